"""The section on GPM and MFU (the ``gpm_cost`` and ``mfu_check`` cases on the H100)."""

from __future__ import annotations

from benchmarks.page.results import overhead
from benchmarks.page.sweeps import DOCS

GPM = DOCS / "bench" / "h100-gpm"


def gpm_section() -> str:
    """What GPM sampling costs a training step, and gpudash's MFU against the analytic count."""
    return f"""## What the GPU really does: GPM and MFU

`python -m benchmarks run gpm_cost`: a bf16 MLP step timed with gpudash's NVML sampler (every 0.5 s, in
another process) reading GPM — SM, tensor-core and DRAM activity — or not, in interleaved pairs.
The target: no measurable cost.

{overhead("gpm-cost.txt", GPM)}

`python -m benchmarks run mfu_check`: GPT-2 small in bf16 as a `-w` workload under `gpudash record`;
gpudash's FLOPs a step (counted once with torch's FLOP formulas), TFLOP/s and MFU against the analytic
6·N + 12·L·d·T a token at the measured tokens/s. The target: MFU within ±10%.

{overhead("mfu-check.txt", GPM)}

The +2% is flash attention's backward recomputing QKᵀ, which torch's formula counts and the
analytic one does not. What GPM tells apart that utilisation cannot (a tiny-kernel loop at 26%
utilisation and 0.02% SM activity), gpudash's figures against a direct read (within ±5 points)
and the diagnosis with them: [bench/h100-gpm](bench/h100-gpm/README.md).
"""
