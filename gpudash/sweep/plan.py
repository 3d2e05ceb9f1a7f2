"""``gpudash sweep``'s plan: which configurations to measure, in which order, and how long.
Torch-, Textual- and matplotlib-free (``gpudash sweep --help`` stays instant). Its arguments are
``gpudash.sweep.arguments``'; its presets ``gpudash.sweep.presets``'.

A *configuration* is one entry of ``-v`` at one batch size of ``-b``, by position: ``-v
fixed,fixed`` is an A/A check of two configurations, labelled ``fixed`` and ``fixed#2``. An
entry ``VARIANT+KNOB[=VALUE]+…`` is the variant with those knobs on top of ``--knob``'s
(``fixed+amp=off`` turns a sweep-wide knob off again); its label is the entry.
Every argument is checked before anything starts; a bad one is one line and exit status 2.
Variants and knob settings the device cannot run are skipped with one line each on stderr.
"""

from __future__ import annotations

import argparse
import random
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from gpudash.arguments import argtypes
from gpudash.arguments.argtypes import UsageError, check_device, check_out_dir
from gpudash.core.protocol import RunConfig
from gpudash.sweep.presets import PRESETS, PresetEntry

if TYPE_CHECKING:  # pragma: no cover
    from workloads.catalog_types import FamilyInfo
    from workloads.knobs import Knobs

SAMPLE_INTERVAL_S = 0.1  # the child's throughput sample (the statistics assume 10 samples/s)
GPU_INTERVAL_S = 0.25  # NVML tick during a sweep


@dataclass(frozen=True)
class Configuration:
    """One thing to measure: a family's variant with its knobs at a batch size (``label`` is
    unique per batch)."""

    family: str
    variant: str
    label: str  # the -v entry: "fixed", "fixed#2" for the second "fixed", "fixed+amp=bf16"
    batch_size: int
    position: int  # index in the family's list of configurations
    knobs: str = "none"  # every knob on (--knob's and the entry's), in their text form

    @property
    def name(self) -> str:
        """ "sync_loss fixed#2 b4": for progress and log lines."""
        return f"{self.family} {self.label} b{self.batch_size}"


@dataclass(frozen=True)
class FamilyPlan:
    """A family's configurations (measured on one session), in the order they were listed."""

    family: str
    title: str
    configurations: tuple[Configuration, ...]
    two_stage: bool = False  # a serial/pipelined family: its stages are timed alone after each repeat
    seconds: float = 10.0  # measured per configuration per repeat
    warmup: float = 2.0  # left out after each change (and after the start)


@dataclass(frozen=True)
class SweepSettings:
    """How long and how often each configuration is measured."""

    repeats: int = 3
    seconds: float = 10.0  # the default of each family's window (FamilyPlan.seconds)
    warmup: float = 2.0  # the default of each family's warm-up (FamilyPlan.warmup)
    until_ci: float | None = None  # percent: add rounds until every interval is this narrow
    max_minutes: float = 30.0
    device: str = "auto"
    device_type: str = "cpu"  # what "auto" resolves to, for defaults and refusals
    seed: int = 0
    sample_interval_s: float = SAMPLE_INTERVAL_S
    gpu_interval_s: float = GPU_INTERVAL_S
    trace_steps: int | None = None  # after each measurement, a profiler window of this many steps
    trace_dir: str | None = None  # where its traces go (OUT/traces)
    nproc: int = 1  # data-parallel ranks of every configuration (DDP; gpudash.engine.ranks)
    peak_tflops: float | None = None  # MFU's peak (--peak-tflops); None: the table's for the GPU
    image_size: int | None = None  # every configuration's image side (None: each family's own)
    workers: int | None = None  # every configuration's DataLoader workers, where it has them (None: the default)


@dataclass(frozen=True)
class SweepPlan:
    families: tuple[FamilyPlan, ...]
    settings: SweepSettings
    out_dir: Path
    command: str  # the exact command line, for the report
    preset: str | None = None
    skipped: tuple[str, ...] = field(default=())  # one line each: why a variant is left out
    knobs: str = "none"  # --knob's, on every configuration (text form)

    @property
    def units(self) -> int:
        """Configuration × repeat measurements planned."""
        return sum(len(f.configurations) for f in self.families) * self.settings.repeats

    @property
    def planned_s(self) -> float:
        """Seconds of warm-up and measuring planned (starts and switches not counted)."""
        return sum(len(f.configurations) * (f.warmup + f.seconds) for f in self.families) * self.settings.repeats


# The RunConfig fields a sweep sets the same for every configuration, from its settings (same names)
SESSION_SETTINGS = (
    "device",
    "seed",
    "sample_interval_s",
    "gpu_interval_s",
    "trace_dir",
    "nproc",
    "peak_tflops",
    "image_size",
    "workers",
)


def run_config(config: Configuration, settings: SweepSettings) -> RunConfig:
    """The session's configuration when it starts in ``config``."""
    shared = {name: getattr(settings, name) for name in SESSION_SETTINGS}
    return RunConfig(
        workload=config.family, variant=config.variant, batch_size=config.batch_size, knobs=config.knobs, **shared
    )


# -- the order ------------------------------------------------------------------------------------
def round_orders(n: int, seed: int) -> Iterator[list[int]]:
    """Endless rounds: each a shuffled order of the configurations 0..n-1, each exactly once
    (``random.Random(seed)``): rounds interleave, so drift and thermals hit every configuration
    alike (A B B A …, never A A A B B B)."""
    rng = random.Random(seed)
    while True:
        order = list(range(n))
        rng.shuffle(order)
        yield order


def schedule(n: int, repeats: int, seed: int) -> list[list[int]]:
    """The first ``repeats`` rounds of ``round_orders``."""
    orders = round_orders(n, seed)
    return [next(orders) for _ in range(repeats)]


# -- an entry of -v: VARIANT+KNOB[=VALUE]+... -----------------------------------------------------
def split_entry(text: str) -> tuple[str, list[tuple[str, str]]]:
    """``fixed+amp=bf16+channels_last`` → ("fixed", [("amp", "bf16"), ("channels_last", "on")]):
    the knobs checked against the catalog (the variant against its family later); UsageError."""
    from workloads.catalog_types import WorkloadError
    from workloads.knobs import parse_knob

    variant, *parts = [part.strip() for part in text.split("+")]
    if not variant or not all(parts):
        raise UsageError(f"expected VARIANT+KNOB[=VALUE]+..., got {text.strip()!r}")
    pairs: dict[str, str] = {}
    for part in parts:
        try:
            name, value = parse_knob(part)
        except WorkloadError as exc:
            raise UsageError(f"{text.strip()!r}: {exc}") from None
        if pairs.setdefault(name, value) != value:
            raise UsageError(f"{text.strip()!r} sets knob {name} twice: {pairs[name]} and {value}")
    return variant, list(pairs.items())


def entry_text(text: str) -> str:
    """An entry as its label: its parts without the spaces around them."""
    return "+".join(part.strip() for part in text.split("+"))


# -- the plan -------------------------------------------------------------------------------------
def device_type(device: str) -> str:
    """ "cpu" or "cuda[:N]": what ``auto`` resolves to (cuda when a GPU is visible)."""
    if device != "auto":
        return device
    from gpudash.host.gpu_checks import cuda_devices

    return "cuda" if cuda_devices()[0] > 0 else "cpu"


def labels(variants: list[str]) -> list[str]:
    """Labels by position: the second ``fixed`` is ``fixed#2``."""
    out: list[str] = []
    for i, v in enumerate(variants):
        n = variants[:i].count(v) + 1
        out.append(v if n == 1 else f"{v}#{n}")
    return out


def entry_knobs(entry: str, base: Knobs) -> tuple[str, Knobs]:
    """An entry's variant and its knobs: ``base`` (--knob's) with the entry's on top."""
    variant, pairs = split_entry(entry)
    knobs = base
    for name, value in pairs:
        knobs = knobs.with_value(name, value)
    return variant, knobs


def _refusal(
    info: FamilyInfo, entry: str, base: Knobs, dev_type: str, world_size: int = 1
) -> tuple[str, Knobs, str | None]:
    """(variant, knobs, why the device cannot run them or None); an unknown variant: UsageError."""
    from workloads.catalog_types import WorkloadError

    variant, knobs = entry_knobs(entry, base)
    try:
        variant_info = info.variant(variant)
    except WorkloadError as exc:
        raise UsageError(str(exc)) from None
    why = variant_info.refusal(dev_type)
    if why is None and (knob_why := knobs.refusal(variant_info, dev_type, world_size)) is not None:
        why = f"{info.name} {entry}: {knob_why}"
    return variant_info.name, knobs, why


def family_plan(
    entry: PresetEntry,
    dev_type: str,
    skipped: list[str],
    timing: tuple[float | None, float | None] = (None, None),
    knobs: Knobs | None = None,
    nproc: int = 1,
) -> FamilyPlan | None:
    """The configurations of one family (entries × batch sizes); refused ones go to
    ``skipped``. ``timing``: --seconds and --warmup when given (they override the preset's);
    ``knobs``: --knob's, on every configuration; ``nproc``: data-parallel ranks of each."""
    from workloads.catalog_types import WorkloadError
    from workloads.knobs import Knobs
    from workloads.registry import family

    try:
        info = family(entry.family)
    except WorkloadError as exc:
        raise UsageError(str(exc)) from None
    entries = [entry_text(e) for e in entry.variants or info.variant_names]
    checked = [_refusal(info, e, knobs or Knobs(), dev_type, nproc) for e in entries]
    batches = entry.batch_sizes or (info.defaults(dev_type.split(":", 1)[0]).batch_size,)
    for b in batches:  # over each rank's share of the dataset or the family's cap: refused before anything runs
        argtypes.check_batch_limits(info, b, nproc)
    kept = [(v, k.text(), label) for (v, k, why), label in zip(checked, labels(entries), strict=False) if why is None]
    skipped.extend(f"{why} (on {dev_type})" for why in dict.fromkeys(why for _, _, why in checked if why))
    if not kept:
        return None
    configs = [(v, k, label, b) for b in batches for v, k, label in kept]
    return FamilyPlan(
        family=info.name,
        title=info.title,
        configurations=tuple(Configuration(info.name, v, label, b, i, k) for i, (v, k, label, b) in enumerate(configs)),
        two_stage=info.pipeline_toggle is not None,
        seconds=_first(timing[0], entry.seconds, SweepSettings.seconds),
        warmup=_first(timing[1], entry.warmup, SweepSettings.warmup),
    )


def _first(*values: float | None) -> float:
    """The first value given."""
    return next(v for v in values if v is not None)


def plan_from_args(args: argparse.Namespace, argv: list[str]) -> SweepPlan:
    """Check everything and build the plan (the output directory is made last)."""
    if args.preset is not None:
        for flag, value in (("-v", args.variants), ("-b", args.batch_sizes)):
            if value is not None:
                raise UsageError(f"{flag} does not apply with --preset (the preset names its own)")
        entries = PRESETS[args.preset]
    else:
        entries = (
            PresetEntry(args.workload, tuple(args.variants or ()) or None, tuple(args.batch_sizes or ()) or None),
        )
    knobs = argtypes.knobs_from(args.knob)
    check_device(args.device)
    argtypes.check_parallel(args.nproc, 1, None, args.device)
    argtypes.check_host_budget(args.nproc, None, args.device)
    dev_type = device_type(args.device)
    skipped: list[str] = []
    timing = (args.seconds, args.warmup)
    families = tuple(
        fp for fp in (family_plan(e, dev_type, skipped, timing, knobs, args.nproc) for e in entries) if fp is not None
    )
    if not families:
        advice = "; run it with --device cuda" if not dev_type.startswith("cuda") else ""
        raise UsageError(f"nothing to measure: {'; '.join(skipped)}{advice}")
    out_dir = check_out_dir(args.out or argtypes.default_out("sweep", args.preset or families[0].family))
    settings = argtypes.from_args(
        SweepSettings,
        args,
        seconds=_first(args.seconds, SweepSettings.seconds),
        warmup=_first(args.warmup, SweepSettings.warmup),
        device_type=dev_type,
        trace_steps=args.trace,
        trace_dir=str(out_dir.resolve() / "traces") if args.trace else None,
    )
    command = shlex.join(["gpudash", "sweep", *argv])
    return SweepPlan(families, settings, out_dir, command, args.preset, tuple(skipped), knobs.text())
