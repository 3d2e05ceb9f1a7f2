"""The section on the user's own job under gpudash (``benchmarks/job_overhead.py`` on the H100)."""

from __future__ import annotations

from benchmarks.page_sections.outputs import overhead
from benchmarks.page_sections.sweeps import DOCS

JOB = DOCS / "bench" / "h100-job"


def job_section() -> str:
    """``benchmarks/job_overhead.py``: what watching an unmodified job costs it, and the match."""
    return f"""## Your own job: what watching it costs (`gpudash -- CMD`)

`benchmarks/job_overhead.py`: a user's script run bare and under `gpudash record CSV -- python
SCRIPT`, in interleaved pairs; each script times its own steps. The targets: at most 1% slower,
and gpudash's steps/s and samples/s within 2% of the job's own. The ResNet-50 job
(`--job resnet --pairs 3`):

{overhead("job-overhead-resnet.txt", JOB)}

(this run's script had no DataLoader: gpudash counted its steps but no samples, hence the 0s.) The
small job (`--job small --pairs 4`), with one CUDA event recorded at every step:

{overhead("job-overhead-small-per-step-events.txt", JOB)}

The small job's slowdown is not within the target in this run; the hooks now time steps in groups
of CUDA events, as gpudash's own step timer does, and that change awaits its GPU run
([bench/h100-job](bench/h100-job/README.md) says what remains).
"""
