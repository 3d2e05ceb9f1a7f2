"""``gpudash sweep``'s command line: its parser and its argument types (``family_name`` and
``batch_list`` are tune's too). Torch-, Textual- and matplotlib-free (``gpudash sweep --help``
stays instant). The plan they make is ``gpudash.sweep.plan``'s; the presets ``gpudash.sweep.presets``'.
"""

from __future__ import annotations

import argparse

from gpudash.arguments import argtypes, shared_flags
from gpudash.arguments.argtypes import Parser, UsageError
from gpudash.sweep.command import command_parser
from gpudash.sweep.plan import SweepSettings, entry_text, split_entry
from gpudash.sweep.presets import BURSTY_SECONDS, BURSTY_WARMUP, FAST_KNOBS, PRESETS


def _seconds_or_zero(text: str) -> float:
    """An argparse type: seconds, 0 allowed."""
    if text.strip() in ("0", "0.0"):
        return 0.0
    return argtypes.positive_float(text)


def family_name(text: str) -> str:
    """An argparse type: a known workload family."""
    from workloads.catalog_types import WorkloadError
    from workloads.registry import family

    try:
        return family(text.strip()).name
    except WorkloadError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


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
        f"                  ({FAST_KNOBS.replace('+', ', ')}; cuda_graph; compile); not in all\n\n"
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
