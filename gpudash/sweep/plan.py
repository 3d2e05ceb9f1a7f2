"""``gpudash sweep``: its arguments, presets and plan — which configurations to measure, in
which order. Torch-, Textual- and matplotlib-free (``gpudash sweep --help`` stays instant).

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

from gpudash.arguments import argtypes, shared_flags
from gpudash.arguments.argtypes import Parser, UsageError, check_device, check_out_dir
from gpudash.core.protocol import RunConfig
from gpudash.sweep.command import command_parser
from workloads.registry import FAMILIES  # torch-free

if TYPE_CHECKING:  # pragma: no cover
    from workloads.knobs import Knobs
    from workloads.registry import FamilyInfo

SAMPLE_INTERVAL_S = 0.1  # the child's throughput sample (the statistics assume 10 samples/s)
GPU_INTERVAL_S = 0.25  # NVML tick during a sweep


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
_FAST = "amp=bf16+channels_last+cudnn_benchmark"  # the cheap knobs every convolution net takes


def _beyond(family: str, text: str, batch_sizes: tuple[int, ...] | None = None, **timing: float) -> PresetEntry:
    """A family's row: the entries of ``text``, ``{fast}`` for ``_FAST``, ``{ROLE}`` its variant of that role."""
    entries = text.format(fast=_FAST, **FAMILIES[family].variants_by_role()).split(",")
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
SESSION_SETTINGS = ("device", "seed", "sample_interval_s", "gpu_interval_s", "trace_dir", "nproc", "peak_tflops")


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


# -- argument types -------------------------------------------------------------------------------
def _seconds_or_zero(text: str) -> float:
    """An argparse type: seconds, 0 allowed."""
    if text.strip() in ("0", "0.0"):
        return 0.0
    return argtypes.positive_float(text)


def family_name(text: str) -> str:
    """An argparse type: a known workload family."""
    from workloads.registry import WorkloadError, family

    try:
        return family(text.strip()).name
    except WorkloadError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def split_entry(text: str) -> tuple[str, list[tuple[str, str]]]:
    """``fixed+amp=bf16+channels_last`` → ("fixed", [("amp", "bf16"), ("channels_last", "on")]):
    the knobs checked against the catalog (the variant against its family later); UsageError."""
    from workloads.knobs import parse_knob
    from workloads.registry import WorkloadError

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


def _name_list(text: str) -> list[str]:
    """An argparse type: entries ``VARIANT[+KNOB[=VALUE]...]`` separated by commas (their knobs
    checked here, the variants against the family later)."""
    names = [part.strip() for part in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(f"expected names separated by commas, got {text!r}")
    for name in names:
        try:
            split_entry(name)
        except UsageError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return [entry_text(name) for name in names]


def batch_list(text: str) -> list[int]:
    """An argparse type: batch sizes separated by commas, each at least 1, none twice."""
    sizes = [argtypes.batch_size(part) for part in text.split(",")]
    for i, b in enumerate(sizes):
        if b in sizes[:i]:
            raise argparse.ArgumentTypeError(f"batch size {b} is listed twice")
    return sizes


def build_parser() -> Parser:
    """The parser of ``gpudash sweep``."""
    p = command_parser(
        "gpudash sweep",
        "Measure variants and batch sizes in interleaved, shuffled repeats and write\n"
        "the articles' tables with 95% intervals: sweep.csv, sweep.json, sweep.md, sweep.png/.svg.",
        _epilog(),
    )
    _add_selection_options(p)
    _add_timing_options(p)
    shared_flags.add_device(p, default="auto")
    argtypes.add_count(
        p,
        "--nproc",
        default=1,
        help="data-parallel ranks (DDP) for every configuration, one GPU each; -b is per rank (default: 1)",
    )
    p.add_argument("--seed", type=int, default=0, help="workload seed and shuffle seed (default: %(default)s)")
    shared_flags.add_peak_tflops(p)
    p.add_argument(
        "--out", metavar="DIR", help="directory for the results (default: sweep-PRESET, or sweep-WORKLOAD; created)"
    )
    shared_flags.add_quiet(p)
    shared_flags.add_json(p)
    return p


def _epilog() -> str:
    return (
        f"presets: {', '.join(PRESETS)}\n"
        "  pipelining      encdec, every variant, at batch 8,16,32\n"
        "  augmentation    augment, every variant, the family's default batch\n"
        "  syncs           sync_loss, every variant, default batch\n"
        f"  input-pipeline  input_pipeline, every variant, default batch, "
        f"{BURSTY_SECONDS:g} s after {BURSTY_WARMUP:g} s\n"
        "  all             the four\n"
        "  beyond          per family the plain variant, the article's fix, and the fix with knobs\n"
        f"                  ({_FAST.replace('+', ', ')}; cuda_graph; compile); not in all\n\n"
        "knobs: --knob puts a knob on every configuration; an entry of -v adds its own with +:\n"
        "  -v fixed,fixed+amp=bf16+channels_last,fixed+amp=bf16+channels_last+cuda_graph\n"
        "  measures the plain variant and two knob settings side by side ('gpudash list' says where\n"
        "  each knob applies; a setting the device cannot run is skipped with the reason)\n\n"
        "exit status: 0 done, 1 the workload failed, 2 bad arguments, 130 interrupted\n"
    )


def _add_selection_options(p: Parser) -> None:
    """What is measured: the family or preset, variants, batch sizes, knobs."""
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("-w", "--workload", type=family_name, metavar="FAMILY", help="the workload family")
    what.add_argument("--preset", choices=tuple(PRESETS), metavar="NAME", help=f"one of: {', '.join(PRESETS)}")
    p.add_argument(
        "-v",
        "--variants",
        type=_name_list,
        metavar="V1,V2+KNOB",
        help="variants, by position, each with +KNOB[=VALUE] knobs of its own (default: all; one twice = an A/A check)",
    )
    p.add_argument("-b", "--batch-sizes", type=batch_list, metavar="N1,N2", help="batch sizes (default: the family's)")
    p.add_argument(
        "--knob",
        type=argtypes.knob,
        action="append",
        metavar="NAME[=VALUE]",
        help="a knob on every configuration, repeatable: amp=bf16, channels_last, cudnn_benchmark, "
        "tf32, cuda_graph, compile[=MODE]",
    )


def _add_timing_options(p: Parser) -> None:
    """How long and how often: repeats, seconds, warm-up, the interval target, profiler windows."""
    argtypes.add_count(p, "--repeats", default=3, help="rounds (default: %(default)s)")
    argtypes.add_seconds(
        p,
        "--seconds",
        help=f"measured per configuration per repeat (default: {SweepSettings.seconds:g}; a preset may say more)",
    )
    p.add_argument(
        "--warmup",
        type=_seconds_or_zero,
        metavar="S",
        help=f"left out after each change (default: {SweepSettings.warmup:g}; a preset may say more)",
    )
    p.add_argument(
        "--until-ci",
        type=argtypes.positive_float,
        metavar="PCT",
        help="then add rounds until every steps/s interval is within ±PCT%%",
    )
    p.add_argument(
        "--max-minutes",
        type=argtypes.positive_float,
        default=30.0,
        metavar="M",
        help="start nothing new after M minutes (default: %(default)s)",
    )
    p.add_argument(
        "--trace",
        type=argtypes.int_at_least(1, "at least 1"),
        nargs="?",
        const=20,
        metavar="N",
        help="after each measurement, a torch.profiler window of N steps (default 20), its Chrome "
        "trace in DIR/traces/ (left out of the figures)",
    )


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
    from workloads.registry import WorkloadError

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
    from workloads.knobs import Knobs
    from workloads.registry import WorkloadError, family

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
