"""``gpudash tune``: its arguments and its plan — which family, batch sizes and knobs the race
searches, and what the device refuses. Torch-, Textual- and matplotlib-free (``gpudash tune
--help`` stays instant). Every argument is checked before anything starts: a bad one is one line
and exit status 2. How the candidates are built and raced: ``gpudash.tune.candidates`` and
``gpudash.tune.race``."""

from __future__ import annotations

import argparse
import dataclasses
import math
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gpudash.arguments import argtypes, shared_flags
from gpudash.arguments.argtypes import Parser, UsageError, check_device, check_out_dir
from gpudash.sweep.arguments import batch_list, family_name
from gpudash.sweep.command import command_parser
from gpudash.sweep.plan import GPU_INTERVAL_S, SAMPLE_INTERVAL_S, SweepSettings, device_type, split_entry

if TYPE_CHECKING:  # pragma: no cover
    from workloads.catalog_types import FamilyInfo

# The knobs tune searches unless --knobs names others: every single-process knob, each at the value
# that speeds a step up (tf32's "never" slows it down: it is a baseline, not a candidate); when
# compile is raced unasked: gpudash.tune.candidates.
DEFAULT_POOL = ("amp=bf16", "channels_last", "cudnn_benchmark", "tf32", "cuda_graph", "compile")
# What the race on a user's job (tune -- CMD) leaves out unless asked, by the flag that asks: the
# rest of each flag's help after "also race"
JOB_OPT_INS = {
    "--allow-numerics": "settings that change the numbers: TF32 (CUDA) and bf16 autocast, where the job has none",
    "--allow-compile": "torch.compile of the model the optimizer steps",
    "--allow-batch": "a larger batch (it changes the training: the learning rate, the steps an epoch): the largest "
    "that gpudash's memory figures say fits the GPU, checked by running it, samples/s against samples/s",
}
SWITCH_S = 1.5  # about what one switch costs beyond the windows (a rebuild, a capture): for the budget check
START_S = 15.0  # the workload process's start (torch's import, the first build): for the budget check


@dataclass(frozen=True)
class TuneSettings:
    """How briefly the race starts and how far it may go."""

    seconds: float = 1.0  # each candidate's first window; a rung's window grows by GROWTH
    warmup: float = 0.5  # left out after each change (a knob's own warm-up is over before it)
    max_minutes: float = 10.0
    exact: bool = False  # only knobs that change no number format
    device: str = "auto"
    device_type: str = "cpu"
    seed: int = 0
    loss_steps: int = 50  # the correctness guard's steps per copy
    sample_interval_s: float = SAMPLE_INTERVAL_S
    gpu_interval_s: float = GPU_INTERVAL_S
    trace_dir: str | None = None
    nproc: int = 1
    peak_tflops: float | None = None  # MFU's peak (--peak-tflops); None: the table's for the GPU
    image_size: int | None = None  # the image side raced at (--image-size; None: the family's)
    workers: int | None = None  # every candidate's DataLoader workers (--workers; None: the default)

    def sweep_settings(self) -> SweepSettings:
        """The sweep's settings that measure the race's windows: these, one repeat each."""
        shared = {f.name: getattr(self, f.name) for f in dataclasses.fields(SweepSettings) if hasattr(self, f.name)}
        return SweepSettings(repeats=1, **shared)


@dataclass(frozen=True)
class TunePlan:
    """What one ``gpudash tune`` searches."""

    family: str
    title: str
    variants: tuple[str, ...]  # the variants the device runs, the family's plain one first
    batch_sizes: tuple[int, ...]
    pool: tuple[tuple[str, str], ...]  # the knobs searched, (name, value), catalog order
    settings: TuneSettings
    out_dir: Path
    command: str
    skipped: tuple[str, ...] = ()  # one line each: a variant or knob the device cannot run
    two_stage: bool = False
    compile_asked: bool = False  # --knobs names compile: raced whatever the diagnosis says
    # --current: the configuration that runs now (variant, knobs text), raced beside the plain
    # variants and the winner weighed against it (the dashboard's u names what is on its screen)
    current: tuple[str, str] | None = None

    @property
    def first_round_s(self) -> float:
        """About how long measuring every plain variant once takes (the least a race needs)."""
        per = self.settings.warmup + self.settings.seconds + SWITCH_S
        return START_S + per * len(self.variants) * len(self.batch_sizes)


def _knob_list(text: str) -> list[tuple[str, str]]:
    """An argparse type: knobs ``NAME[=VALUE]`` separated by commas, each in the catalog."""
    parts = [p.strip() for p in text.split(",")]
    if not all(parts):
        raise argparse.ArgumentTypeError(f"expected knobs separated by commas, got {text!r}")
    return [argtypes.knob(p) for p in parts]


def build_parser() -> Parser:
    """The parser of ``gpudash tune``."""
    p = command_parser(
        "gpudash tune",
        "Race variants x knobs x batch sizes of one workload and report the fastest\n"
        "configuration with its interval: tune.md, tune.csv, tune.png and the command that runs it.\n"
        "Your own job instead: gpudash tune [OPTIONS] -- python train.py (its options: gpudash tune --help --).",
        _epilog(),
    )
    p.add_argument(
        "-w", "--workload", type=family_name, required=True, metavar="W", help="a family, or FILE.py:FUNCTION"
    )
    p.add_argument(
        "-b", "--batch-sizes", type=batch_list, metavar="N1,N2", help="batch sizes to search (default: the family's)"
    )
    p.add_argument(
        "--knobs",
        type=_knob_list,
        metavar="K1,K2",
        help=f"the knobs to search (default: {','.join(DEFAULT_POOL)}; those the device cannot run are listed)",
    )
    p.add_argument("--exact", action="store_true", help="only knobs that change no number format (no bf16, no TF32)")
    p.add_argument(
        "--max-minutes",
        type=argtypes.positive_float,
        default=TuneSettings.max_minutes,
        metavar="M",
        help="the race's budget: what is measured by then decides (default: %(default)s)",
    )
    argtypes.add_seconds(
        p, "--seconds", default=TuneSettings.seconds, help="each candidate's first window (default: %(default)s)"
    )
    argtypes.add_seconds(
        p, "--warmup", default=TuneSettings.warmup, help="left out after each change (default: %(default)s)"
    )
    shared_flags.add_device(p, default="auto")
    p.add_argument("--seed", type=int, default=0, help="workload seed and shuffle seed (default: %(default)s)")
    shared_flags.add_image_size(p)
    shared_flags.add_workers(p, "every candidate")
    p.add_argument(
        "--current",
        metavar="VARIANT[+KNOB[=VALUE]...]",
        help="the configuration running now: raced at every batch size, and the winner weighed against it",
    )
    shared_flags.add_peak_tflops(p)
    p.add_argument("--out", metavar="DIR", help="directory for the results (default: tune-WORKLOAD; created)")
    shared_flags.add_quiet(p)
    shared_flags.add_json(p)
    return p


def _epilog() -> str:
    return (
        "how: every variant plain at every batch size, briefly; the variants clearly slower than\n"
        "their batch size's leader drop out. The leading variant gets each knob alone and the knob\n"
        "stacks (layout+autotuning, +bf16/TF32, +CUDA graphs), ordered by the diagnosis of the plain\n"
        "run; a runner-up variant the stacks that led on it; +compile last, where it can still catch\n"
        "the leader. Then successive halving: each rung keeps the third that is not clearly slower\n"
        "than the leader and measures it twice as long; the leader, the plain variant and the best\n"
        "single knob are measured once more, interleaved. A winner with bf16 or TF32 gets its\n"
        "loss compared with the plain run's over the same steps.\n\n"
        "your own job: gpudash tune [--seconds S] [--max-minutes M] [--out DIR] [--json] [--diff]\n"
        f"{' '.join(f'[{flag}]' for flag in JOB_OPT_INS)} -- CMD ... (gpudash tune --help -- says each)\n"
        "races its DataLoader's workers and the other safe settings, each a fresh run, and says the\n"
        "winner as an edit of your DataLoader line (docs/your-job.md)\n\n"
        "exit status: 0 done, 1 the workload failed, 2 bad arguments, 130 interrupted (what was\n"
        "measured is written)\n"
    )


def _pool(args: argparse.Namespace, dev_type: str) -> tuple[tuple[tuple[str, str], ...], list[str]]:
    """The knobs to search and the lines saying which the device (or --exact) leaves out."""
    from workloads.knobs import KNOBS, OFF

    asked = args.knobs if args.knobs is not None else [argtypes.knob(k) for k in DEFAULT_POOL]
    skipped: list[str] = []
    pool: dict[str, str] = {}
    for name, value in asked:
        info = KNOBS[name]
        if value == OFF:
            raise UsageError(f"--knobs {name}={OFF}: a knob's off setting is every candidate's start; name a value")
        if info.needs_ddp:
            raise UsageError(f"--knobs {name}: a DistributedDataParallel setting; tune runs one process")
        if name in pool and pool[name] != value:
            raise UsageError(f"--knobs names {name} twice: {pool[name]} and {value}")
        if args.exact and info.changes_precision:
            skipped.append(f"knob {name}={value}: it changes the number format (--exact)")
        elif info.needs_cuda and not dev_type.startswith("cuda"):
            skipped.append(f"knob {name}: it needs CUDA (on {dev_type})")
        else:
            pool[name] = value
    order = list(KNOBS)
    return tuple(sorted(pool.items(), key=lambda kv: order.index(kv[0]))), skipped


def _variants(info: FamilyInfo, dev_type: str, skipped: list[str]) -> tuple[str, ...]:
    """The family's variants the device runs (the plain one first); the others to ``skipped``."""
    kept = []
    for name in info.variant_names:
        why = info.variant(name).refusal(dev_type)
        if why is None:
            kept.append(name)
        else:
            skipped.append(f"{info.name} {name}: {why} (on {dev_type})")
    return tuple(kept)


def _current(info: FamilyInfo, text: str, dev_type: str) -> tuple[str, str]:
    """``--current``'s (variant, knobs text), checked: a variant of the family that the device
    runs, with knobs it runs on one process (UsageError)."""
    from workloads.catalog_types import WorkloadError
    from workloads.knobs import Knobs

    variant, pairs = split_entry(text)
    try:
        variant_info = info.variant(variant)
    except WorkloadError as exc:
        raise UsageError(f"--current {text.strip()}: {exc}") from None
    why = variant_info.refusal(dev_type) or Knobs(pairs).refusal(variant_info, dev_type)
    if why is not None:
        raise UsageError(f"--current {text.strip()}: {why} (on {dev_type})")
    return variant, Knobs(pairs).text()


def plan_from_args(args: argparse.Namespace, argv: list[str]) -> TunePlan:
    """Check everything and build the plan (the output directory is made last)."""
    from workloads.registry import family

    info = family(args.workload)
    check_device(args.device)
    dev_type = device_type(args.device)
    batches = tuple(args.batch_sizes or (info.defaults(dev_type.split(":", 1)[0]).batch_size,))
    for b in batches:
        argtypes.check_batch_limits(info, b)
    skipped: list[str] = []
    pool, knob_lines = _pool(args, dev_type)
    variants = _variants(info, dev_type, skipped)
    skipped.extend(knob_lines)
    if not variants or (args.knobs is not None and not pool):  # nothing, or none of the knobs asked for
        advice = "; run it with --device cuda" if not dev_type.startswith("cuda") else ""
        raise UsageError(f"nothing to tune: {'; '.join(skipped)}{advice}")
    settings = argtypes.from_args(TuneSettings, args, device_type=dev_type)
    current = _current(info, args.current, dev_type) if args.current else None
    plan = TunePlan(
        family=info.name,
        title=info.title,
        variants=variants,
        batch_sizes=batches,
        pool=pool,
        settings=settings,
        out_dir=Path(args.out or argtypes.default_out("tune", info.name)),
        command=shlex.join(["gpudash", "tune", *argv]),
        skipped=tuple(skipped),
        two_stage=info.pipeline_toggle is not None,
        compile_asked=args.knobs is not None and any(name == "compile" for name, _ in args.knobs),
        current=current,
    )
    if plan.first_round_s > args.max_minutes * 60:
        need = math.ceil(plan.first_round_s / 6) / 10
        raise UsageError(
            f"--max-minutes {args.max_minutes:g} is too short for even one round of the "
            f"{len(variants) * len(batches)} plain configurations (about {need:g} min)"
        )
    check_out_dir(str(plan.out_dir))
    return plan
