"""``gpudash sweep --preset NAME``: the presets, each the families it measures with their variants,
batch sizes and timing. Torch-free (the registry's catalog only).
"""

from __future__ import annotations

from dataclasses import dataclass

from workloads.registry import FAMILIES  # torch-free


@dataclass(frozen=True)
class PresetEntry:
    """One family of a preset; None: every variant / the family's default batch for the device."""

    family: str
    variants: tuple[str, ...] | None = None
    batch_sizes: tuple[int, ...] | None = None
    seconds: float | None = None  # None: --seconds's default
    warmup: float | None = None


# The input pipeline delivers batches in bursts (every worker finishes one at about the same
# time) a few seconds apart, and refills its prefetch queue for seconds after each switch:
# its windows must span many bursts and start after the refill.
BURSTY_SECONDS, BURSTY_WARMUP = 30.0, 10.0
_PRESET_PARTS: dict[str, tuple[PresetEntry, ...]] = {
    "pipelining": (PresetEntry("encdec", None, (8, 16, 32)),),
    "augmentation": (PresetEntry("augment"),),
    "syncs": (PresetEntry("sync_loss"),),
    "input-pipeline": (PresetEntry("input_pipeline", seconds=BURSTY_SECONDS, warmup=BURSTY_WARMUP),),
}
# "beyond": per family the plain variant, the article's fix, and the fix with the knob combinations
# worth showing (on a CPU the CUDA-only ones are skipped with their reason), written as -v takes
# them, each variant by what it is (the registry's ``FamilyInfo.variants_by_role``).
FAST_KNOBS = "amp=bf16+channels_last+cudnn_benchmark"  # the cheap knobs every convolution net takes


def _beyond(family: str, text: str, batch_sizes: tuple[int, ...] | None = None, **timing: float) -> PresetEntry:
    """A family's row: the entries of ``text``, ``{fast}`` for ``FAST_KNOBS``, ``{ROLE}`` its variant of that role."""
    entries = text.format(fast=FAST_KNOBS, **FAMILIES[family].variants_by_role()).split(",")
    return PresetEntry(family, tuple(entries), batch_sizes, **timing)


BEYOND: tuple[PresetEntry, ...] = (
    _beyond(
        "encdec",
        "{default},{pair_pipelined},{default}+{fast},{default}+{fast}+cuda_graph,{pair_pipelined}+{fast}+cuda_graph,"
        "{default}+compile",
        (8, 32),
    ),
    _beyond(
        "sync_loss",
        "{default},{sync_free},{sync_free}+{fast},{sync_free}+{fast}+cuda_graph,{sync_free}+cuda_graph",
        (8, 32),
    ),
    _beyond(
        "augment",
        "{default},{pair_serial},{pair_pipelined},{pair_pipelined}+{fast},{pair_pipelined}+{fast}+cuda_graph",
        (32,),
    ),
    _beyond(
        "input_pipeline",
        "{default},{BATCH_COLOUR},{GPU_COLOUR},{GPU_COLOUR}+{fast}",
        seconds=BURSTY_SECONDS,
        warmup=BURSTY_WARMUP,
    ),
)
PRESETS: dict[str, tuple[PresetEntry, ...]] = {
    **_PRESET_PARTS,
    "all": tuple(entry for entries in _PRESET_PARTS.values() for entry in entries),
    "beyond": BEYOND,  # not part of "all"
}
