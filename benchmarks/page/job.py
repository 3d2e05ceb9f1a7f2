"""The section on the user's own job under gpudash (``benchmarks/job_overhead.py`` on the H100)."""

from __future__ import annotations

import re

from benchmarks.page.outputs import overhead
from benchmarks.page.sweeps import DOCS

JOB = DOCS / "bench" / "h100-job"


def slowdown(file: str) -> str:
    """The slowdown cell and verdict of a job_overhead.py run's first table, as printed."""
    found = re.search(r"^\| \w+ \| \d+ \| [\d.]+ \| [\d.]+ \| ([^|]+) \| ([^(|]+)", (JOB / file).read_text(), re.M)
    assert found, f"{file}: no slowdown row"
    return f"{found.group(1).strip()}, {found.group(2).strip()}"


def _row(file: str, label: str) -> list[str]:
    for line in (JOB / file).read_text().splitlines():
        if line.startswith(f"| {label}"):
            return [cell.strip() for cell in line.strip("|").split("|")]
    raise AssertionError(f"{file}: no row {label!r}")


def hook_cost(file: str) -> str:
    """A job_hook_cost.py run's hooks row: the ratio with its interval, the verdict and µs a step."""
    cells = _row(file, "gpudash's hooks")
    return f"{cells[2]} of its bare time, {cells[3]} ({cells[4]} µs a step)"


def aa_row(file: str) -> str:
    """A job_hook_cost.py run's A/A row: the ratio with its interval and the verdict."""
    cells = _row(file, "A/A")
    return f"{cells[2]}, {cells[3]}"


def job_section() -> str:
    """``benchmarks/job_overhead.py``: what watching an unmodified job costs it, and the match."""
    return f"""## Your own job: what watching it costs (`gpudash -- CMD`)

`benchmarks/job_overhead.py`: a user's script run bare and under `gpudash record CSV -- python
SCRIPT`, in interleaved pairs; each script times its own steps. The targets: at most 1% slower,
and gpudash's steps/s and samples/s within 2% of the job's own. The ResNet-50 job, through a
DataLoader (`--job resnet --pairs 3`):

{overhead("job-overhead-resnet.txt", JOB)}

The small job (`--job small`), an MLP over a DataLoader at about 6.5 ms a step, host-bound: its
own speed moves by several per cent from one process to the next (pinned to four CPUs, the GPU's
SM clock at 1980 MHz throughout: `job-overhead-small-pinned-2-clocks.txt`), so whole-process
pairs cannot resolve 1% for it. Two runs of the same command, `--job small --pairs 10 --job-cpus
2-5 --steps 2000`, read {slowdown("job-overhead-small-pinned-1.txt")} and
{slowdown("job-overhead-small-pinned-2.txt")}: the same hooks, opposite verdicts, the noise.

`benchmarks/job_hook_cost.py` takes the noise out: the same step, in one process, alternated one
by one with and without gpudash's hooks (loaded as the bootstrap loads them, sending to a real
channel), the heap frozen after the warm-up and the hooks' time-paced work (a CUDA event a ~25 ms
group, a send every 0.1 s) at the job's pace (`--blocks 120`, under `taskset -c 2-5`):

{overhead("job-hook-cost.txt", JOB)}

With the hooks the small job's step takes {hook_cost("job-hook-cost.txt")}: a cost that shows
(*within noise* is gpudash's word for an interval that excludes 1 under its 2% noise threshold),
within the 1% target: **met** for the hooks, which is what the target is about. gpudash's own
process beside the job (NVML, reading the channel, the CSV) is not in this figure; it costs the
job only what it takes from the CPUs they share, and the whole-process pairs, which take it in,
cannot resolve 1% for this job. With the paces left as they are (a CUDA event after every one or
two hooked steps instead of every third, twice the sends a step: more than the job pays),
{hook_cost("job-hook-cost-as-is.txt")} (`job-hook-cost-as-is.txt`, `--blocks 150`): that run
counts more than the job pays and its interval reaches past 1.01, so it does not show the target
by itself. Before the heap was frozen, a full garbage collection over torch's objects (many steps
long) landed now and then on one side of one block, and even bare against bare read {aa_row("job-hook-cost-unfrozen.txt")} (`job-hook-cost-unfrozen.txt`).
gpudash's counts matched the job's own within 2% in every run.
"""
