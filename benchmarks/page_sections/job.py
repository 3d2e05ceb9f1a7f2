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
and gpudash's steps/s and samples/s within 2% of the job's own. The ResNet-50 job, through a
DataLoader (`--job resnet --pairs 3`):

{overhead("job-overhead-resnet.txt", JOB)}

The small job (`--job small --pairs 4`), an MLP over a DataLoader at about 6.5 ms a step, with the
hooks as they stand (steps timed in groups of CUDA events, one step's FLOPs counted):

{overhead("job-overhead-small.txt", JOB)}

Its first build, one CUDA event recorded and queried at every step, was slower by 3%
(`job-overhead-small-per-step-events.txt`: 1.0308× [1.0142–1.0477]). The two runs since read *no
change detected*, but the small job's own speed moves by ±4% from one process to the next, so
four pairs cannot tell 1% from nothing: that target is not shown either way yet
([bench/h100-job](bench/h100-job/README.md) says what remains). gpudash's counts matched the job's
own within 2% in every run.
"""
