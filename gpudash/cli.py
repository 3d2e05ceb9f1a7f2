"""The ``gpudash`` command: the dashboard, ``--record`` (headless), ``list``, ``replay``,
``sweep`` and ``report``.

Fast to start: nothing here imports torch or textual at module level. Every argument is
checked before anything starts; a bad one is one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path
from typing import Sequence

from gpudash import argtypes
from gpudash.argtypes import Parser, UsageError, check_device
from gpudash.protocol import ExitCode, RunConfig

EPILOG = """\
forms:
  gpudash [options]                  the live dashboard
  gpudash --record PATH [options]    headless: CSV to PATH ('-' = stdout), metadata to PATH.json
  gpudash list                       workload families, variants, defaults, what needs CUDA
  gpudash replay PATH [--follow]     a recorded CSV in the dashboard
  gpudash sweep -w FAMILY --out DIR  measure variants x batch sizes with 95% intervals
                                     (--preset NAME; 'gpudash sweep --help')
  gpudash report RUN.csv... --out DIR  report.md + plots of recordings or sweeps (--html)

exit status: 0 done, 1 the workload (or writing) failed, 2 bad arguments, 130 interrupted
"""


# -- parsers ----------------------------------------------------------------------------------------
def build_parser() -> Parser:
    """The parser of ``gpudash [options]`` (the dashboard and ``--record``)."""
    from workloads.registry import DEFAULT_FAMILY, FAMILIES

    p = Parser(
        prog="gpudash",
        description="See what CUDA streams, GPU-side augmentation and removing host-device syncs "
        "do to training throughput, live.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"gpudash {_version()}")
    p.add_argument("--record", metavar="PATH", help="record headless to a CSV file ('-': stdout)")
    w = p.add_argument_group("workload")
    w.add_argument("-w", "--workload", default=DEFAULT_FAMILY, metavar="NAME",
                   help=f"workload family: {', '.join(FAMILIES)} (default: %(default)s)")
    w.add_argument("-v", "--variant", metavar="NAME", help="variant (default: the family's; see 'gpudash list')")
    w.add_argument("-b", "--batch-size", type=argtypes.batch_size, metavar="N", help="batch size (default: the family's)")
    w.add_argument("--device", type=argtypes.device, default="auto", metavar="DEV",
                   help="auto, cpu, cuda or cuda:N (default: auto = cuda if available)")
    w.add_argument("--image-size", type=argtypes.image_size, metavar="PX", help="image side, a power of two")
    w.add_argument("--workers", type=argtypes.nonnegative_int, metavar="N", help="DataLoader workers, where the variant uses them")
    w.add_argument("--seed", type=int, default=0, help="random seed (default: %(default)s)")
    w.add_argument("--steps", type=argtypes.positive_int, metavar="N", help="stop after N steps")
    w.add_argument("--knob", type=argtypes.knob, action="append", metavar="NAME[=VALUE]",
                   help="a knob beyond the variant, repeatable: amp=bf16, channels_last, cudnn_benchmark, "
                   "tf32, cuda_graph, compile[=MODE] ('gpudash list' says where each applies)")
    r = p.add_argument_group("measuring and recording")
    r.add_argument("--sample-interval", type=argtypes.positive_float, default=RunConfig.sample_interval_s, metavar="S",
                   help="seconds between throughput samples (default: %(default)s)")
    r.add_argument("--interval", type=argtypes.positive_float, default=RunConfig.gpu_interval_s, metavar="S",
                   help="seconds between NVML GPU samples (default: %(default)s)")
    r.add_argument("--duration", type=argtypes.positive_float, metavar="S",
                   help="with --record: seconds to record once the workload runs (default: until Ctrl-C)")
    r.add_argument("--log", metavar="PATH", help="with --record: the workload process's log (default: PATH.log)")
    r.add_argument("--meta", metavar="PATH", help="with --record: metadata JSON (default: beside the CSV)")
    r.add_argument("-q", "--quiet", action="store_true", help="with --record: no progress lines on stderr")
    r.add_argument("--trace-every", type=argtypes.positive_float, metavar="S",
                   help="with --record: a torch.profiler window every S seconds (Chrome traces in PATH.traces/, "
                   "figures in event rows)")
    r.add_argument("--trace-steps", type=argtypes.int_at_least(1, "at least 1"), default=20, metavar="N",
                   help="steps per profiler window (default: %(default)s; at most 200)")
    return p


def _version() -> str:
    from gpudash.record import gpudash_version

    return gpudash_version()


# -- checks that need the machine, not torch ------------------------------------------------------
def check_writable(path: str, what: str = "record path") -> None:
    """Raise UsageError unless ``path`` can be created or appended to (created files are removed)."""
    if path == "-":
        return
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"{what} {path} is a directory")
    parent = p.parent
    if not parent.is_dir():
        raise UsageError(f"cannot write {path}: directory {parent} does not exist")
    existed = p.exists()
    try:
        with open(p, "a"):
            pass
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None
    if not existed:
        try:
            p.unlink()
        except OSError:
            pass


def trace_dir_for(record: str) -> str:
    """Where a recording's profiler windows go: ``run.csv`` → ``run.traces/`` (stdout: ./gpudash-traces)."""
    if record == "-":
        return os.path.abspath("gpudash-traces")
    base = os.path.abspath(record)
    return (base[:-4] if base.endswith(".csv") else base) + ".traces"


def config_from_args(args: argparse.Namespace) -> RunConfig:
    """Check the workload, variant and device; return the run's configuration."""
    from workloads.registry import WorkloadError, family

    try:
        info = family(args.workload)
        variant = info.variant(args.variant) if args.variant else info.variant(info.default_variant)
    except WorkloadError as exc:
        raise UsageError(str(exc)) from None
    check_device(args.device, variant)
    knobs = argtypes.knobs_from(args.knob)
    argtypes.check_knobs(knobs, args.device, variant)
    return RunConfig(
        workload=info.name,
        variant=args.variant,
        batch_size=args.batch_size,
        device=args.device,
        image_size=args.image_size,
        workers=args.workers,
        seed=args.seed,
        sample_interval_s=args.sample_interval,
        gpu_interval_s=args.interval,
        max_steps=args.steps,
        knobs=knobs.text(),
    )


def _fail(message: str) -> int:
    print(f"gpudash: error: {' '.join(message.split())}", file=sys.stderr)
    return ExitCode.USAGE


# -- subcommands ------------------------------------------------------------------------------------
def _cmd_list(argv: list[str]) -> int:
    p = Parser(prog="gpudash list", description="Workload families, variants, defaults and which need CUDA.")
    p.parse_args(argv)
    from workloads import knobs
    from workloads.registry import describe

    print(describe())
    print()
    print(knobs.describe())
    return ExitCode.OK


def _cmd_replay(argv: list[str]) -> int:
    p = Parser(prog="gpudash replay", description="Show a recorded CSV in the dashboard.")
    p.add_argument("path", help="a CSV written by gpudash --record")
    p.add_argument("--follow", action="store_true", help="keep reading as the file grows")
    args = p.parse_args(argv)
    if not os.path.isfile(args.path):
        return _fail(f"no such file: {args.path}")
    if not os.access(args.path, os.R_OK):
        return _fail(f"cannot read {args.path}")
    from gpudash.tui.app import run_replay

    return int(run_replay(args.path, args.follow) or 0)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``gpudash`` console script; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "list":
        return _cmd_list(argv[1:])
    if argv and argv[0] == "replay":
        return _cmd_replay(argv[1:])
    if argv and argv[0] == "sweep":
        from gpudash.sweep_plan import main as sweep_main

        return sweep_main(argv[1:])
    if argv and argv[0] == "report":
        from gpudash.report import main as report_main

        return report_main(argv[1:])
    args = build_parser().parse_args(argv)
    try:
        if args.record is None:
            for flag, value in (("--duration", args.duration), ("--log", args.log), ("--meta", args.meta),
                                ("--trace-every", args.trace_every)):
                if value is not None:
                    raise UsageError(f"{flag} only applies with --record PATH")
        config = config_from_args(args)
        if args.trace_every is not None:
            config = dataclasses.replace(config, trace_dir=trace_dir_for(args.record))
        if args.record is not None:
            check_writable(args.record)
            if args.meta:
                check_writable(args.meta, "metadata path")
            if args.log:
                check_writable(args.log, "log path")
    except UsageError as exc:
        return _fail(str(exc))
    if args.record is not None:
        from gpudash.headless import run_record

        return run_record(
            config,
            args.record,
            duration_s=args.duration,  # --steps is in config (max_steps)
            log_path=args.log,
            meta_path=args.meta,
            quiet=args.quiet,
            trace_every_s=args.trace_every,
            trace_steps=args.trace_steps,
        )
    from gpudash.tui.app import run_dashboard

    return int(run_dashboard(config) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
