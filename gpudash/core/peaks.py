"""The dense peak arithmetic of a GPU, by the step's dtype: what model FLOPs utilisation (MFU) is a
share of. Torch-free.

Each entry is the vendor's datasheet figure **without sparsity** (datasheets print the tensor-core
figures with 2:4 structured sparsity, twice the dense ones; those are halved here), matched by the
device name NVML and CUDA give (``NVIDIA H100 80GB HBM3``). ``bf16`` and ``fp16`` are tensor-core
math in each (dense, with fp32 accumulation: the same figure on most parts, not on all — a V100
has fp16 tensor cores and no bf16), ``tf32`` is fp32 matmuls on tensor cores, ``fp32`` plain fp32
(no tensor cores). A GPU not in the table has no peak: MFU is blank with
that reason, unless ``--peak-tflops`` gives one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DTYPES = ("bf16", "fp16", "tf32", "fp32")
PRECISION_KNOBS = ("amp", "tf32")  # gpudash's knobs that change a step's dtype: a FLOP count is kept by them


@dataclass(frozen=True)
class GpuPeak:
    """One part's dense peaks in TFLOP/s, and where they come from."""

    part: str  # the part's name, as its datasheet gives it
    pattern: str  # a regular expression on the device name (case-insensitive)
    bf16: float | None  # None: the part has no such tensor math
    tf32: float | None
    fp32: float
    source: str
    fp16: float | None = None  # None: bf16's figure

    def tflops(self, dtype: str) -> float | None:
        """The peak for ``dtype`` (one of ``DTYPES``); None where the part has no such math."""
        if dtype not in DTYPES:
            raise ValueError(f"no peak for dtype {dtype!r}: one of {', '.join(DTYPES)}")
        value = self.bf16 if dtype == "fp16" and self.fp16 is None else getattr(self, dtype)
        return None if value is None else float(value)


H100_DATASHEET = "NVIDIA H100 Tensor Core GPU datasheet (2023), sparsity figures halved"
PEAKS = (
    GpuPeak("H100 NVL", r"\bH100 NVL\b", 835.0, 417.5, 60.0, H100_DATASHEET),
    GpuPeak("H100 PCIe", r"\bH100 PCIe\b", 756.5, 378.0, 51.0, H100_DATASHEET),
    GpuPeak("H100 SXM", r"\bH100\b", 989.5, 494.7, 67.0, H100_DATASHEET),
    GpuPeak("H200 NVL", r"\bH200 NVL\b", 835.0, 417.5, 60.0, "NVIDIA H200 datasheet (2024), sparsity halved"),
    GpuPeak("H200 SXM", r"\bH200\b", 989.5, 494.7, 67.0, "NVIDIA H200 datasheet (2024), sparsity halved"),
    GpuPeak("A100", r"\bA100\b", 312.0, 156.0, 19.5, "NVIDIA A100 Tensor Core GPU datasheet (2021)"),
    GpuPeak("L40S", r"\bL40S\b", 362.05, 183.0, 91.6, "NVIDIA L40S datasheet (2023), sparsity halved"),
    GpuPeak("L4", r"\bL4\b", 121.0, 60.0, 30.3, "NVIDIA L4 Tensor Core GPU datasheet (2023), sparsity halved"),
    GpuPeak("A10", r"\bA10\b", 125.0, 62.5, 31.2, "NVIDIA A10 Tensor Core GPU datasheet (2021)"),
    GpuPeak("RTX A6000", r"\bRTX A6000\b", 154.8, 77.4, 38.7, "NVIDIA RTX A6000 datasheet (2021), sparsity halved"),
    # GeForce: fp16/bf16 tensor math with fp32 accumulation (what training uses), from the architecture whitepapers
    GpuPeak("RTX 4090", r"\bRTX 4090\b", 165.2, 82.6, 82.6, "NVIDIA Ada Lovelace architecture whitepaper (2023)"),
    GpuPeak("RTX 3090", r"\bRTX 3090\b", 71.0, 35.6, 35.6, "NVIDIA Ampere GA102 GPU architecture whitepaper (2021)"),
    # Volta: fp16 tensor cores, no bf16 nor tf32
    GpuPeak("V100 SXM2", r"\bV100\b", None, None, 15.7, "NVIDIA Tesla V100 GPU datasheet (2020)", fp16=125.0),
)


def peak_of(device_name: str) -> GpuPeak | None:
    """The table's entry for ``device_name`` (the first whose pattern matches); None: not known."""
    for peak in PEAKS:
        if re.search(peak.pattern, device_name, re.IGNORECASE):
            return peak
    return None


def mfu_pct(flops_per_step: float, steps_per_s: float, peak_tflops: float) -> float:
    """Model FLOPs utilisation, in percent: the step's FLOPs at the measured rate over the peak."""
    if peak_tflops <= 0:
        raise ValueError("the peak must be a positive number of TFLOP/s")
    return 100.0 * flops_per_step * steps_per_s / (peak_tflops * 1e12)


NO_PEAK_HINT = "give one with --peak-tflops"


@dataclass(frozen=True)
class PeakChoice:
    """The peak MFU is a share of for one run, or why there is none."""

    tflops: float | None
    source: str  # where the figure comes from, or (tflops None) why MFU is blank


def choose_peak(device_name: str | None, dtype: str | None, override: float | None = None) -> PeakChoice:
    """The peak for a step of ``dtype`` (one of ``DTYPES``; None: a mixed or unknown dtype) on
    ``device_name`` (None: no GPU); ``override`` (``--peak-tflops``) wins over the table."""
    if override is not None:
        return PeakChoice(override, "--peak-tflops")
    if device_name is None:
        return PeakChoice(None, f"no GPU, so no peak to compare with: {NO_PEAK_HINT}")
    if dtype is None or dtype not in DTYPES:
        what = "mixes dtypes" if dtype is None else f"computes in {dtype}"
        return PeakChoice(None, f"the step {what}, which has no single peak: {NO_PEAK_HINT}")
    if re.search(r"\bMIG\b", device_name):
        return PeakChoice(
            None, f"{device_name!r} is a MIG slice, whose share of the GPU's peak is not known: {NO_PEAK_HINT}"
        )
    peak = peak_of(device_name)
    if peak is None:
        return PeakChoice(None, f"no dense peak known for {device_name!r}: {NO_PEAK_HINT}")
    tflops = peak.tflops(dtype)
    if tflops is None:
        return PeakChoice(None, f"the {peak.part} has no {dtype} tensor math, so no peak for it: {NO_PEAK_HINT}")
    return PeakChoice(tflops, f"{peak.part} {dtype} dense, {peak.source}")


def model_rates(
    flops_per_step: float | None, steps_per_s: float, peak: PeakChoice
) -> tuple[float | None, float | None]:
    """(TFLOP/s, MFU %) of steps of ``flops_per_step`` FLOPs at ``steps_per_s``; None where not known."""
    if flops_per_step is None or flops_per_step <= 0:
        return None, None
    tflops = flops_per_step * steps_per_s / 1e12
    return tflops, (mfu_pct(flops_per_step, steps_per_s, peak.tflops) if peak.tflops is not None else None)
