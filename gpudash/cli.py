"""The ``gpudash`` command and its subcommands: ``run`` (the dashboard, the default), ``record``
(headless; ``gpudash --record PATH`` is the same), ``list``, ``replay``, ``sweep``, ``report``
and ``serve`` (the dashboard in a browser).

Fast to start: nothing here imports torch or textual at module level. Every argument is
checked before anything starts; a bad one is one line on stderr and exit status 2.

Defaults, lowest first: ``DEFAULTS`` here, the user's settings file (``gpudash/config.py``),
then the flags. Every parser leaves an option it was not given out of the namespace
(``argument_default=SUPPRESS``), which is how a subcommand's flags and the ones before it
merge and how the settings file knows what the command line set: give an option no
``default=``; its default belongs in ``DEFAULTS``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from gpudash import argtypes
from gpudash.argparse_adapter import parser_actions
from gpudash.argtypes import Parser, UsageError, check_device
from gpudash.core import faults
from gpudash.core.protocol import ExitCode, RunConfig
from gpudash.host.gpu_checks import check_gpus
from gpudash.host.gpu_selection import GpuSelectionError, gpu_indexes, gpu_list
from gpudash.recording import paths

EPILOG = """\
examples:
  gpudash -w augment -v gpu -b 64          the dashboard on a workload, variant and batch size
  gpudash record run.csv --duration 60     headless, CSV + run.json (= gpudash --record run.csv ...)
  gpudash serve                            the dashboard in a browser at http://127.0.0.1:8000
  gpudash COMMAND --help                   a command's own options

Flags override the settings file (gpudash --config-path prints where it is).
exit status: 0 done, 1 the workload (or writing) failed, 2 bad arguments, 130 interrupted
"""

DEFAULTS: dict[str, Any] = {  # every option's built-in default (the parsers have none)
    "workload": None,  # the registry's DEFAULT_FAMILY (filled in by _with_defaults)
    "variant": None,
    "batch_size": None,
    "device": "auto",
    "image_size": None,
    "workers": None,
    "seed": 0,
    "steps": None,
    "knob": None,
    "theme": None,
    "no_color": False,
    "sample_interval": RunConfig.sample_interval_s,
    "interval": RunConfig.gpu_interval_s,
    "gpus": None,
    "watchdog": RunConfig.watchdog_s,
    "record": None,
    "duration": None,
    "log": None,
    "meta": None,
    "quiet": False,
    "force": False,
    "progress_every": None,
    "trace_every": None,
    "trace_steps": 20,
    "host": "127.0.0.1",
    "port": 8000,
    "public_url": None,
    "nproc": 1,
    "nnodes": 1,
    "rdzv_endpoint": None,
    "rdzv_id": None,
}
RECORD_ONLY = (
    ("--duration", "duration"),
    ("--log", "log"),
    ("--meta", "meta"),
    ("--trace-every", "trace_every"),
    ("--force", "force"),
    ("--progress-every", "progress_every"),
)


# -- parsers ----------------------------------------------------------------------------------------
def help_formatter() -> type[argparse.HelpFormatter]:
    """How help is laid out: plain argparse, keeping the line breaks of descriptions and epilogs."""
    return argparse.RawDescriptionHelpFormatter


def _add_run_options(p: argparse.ArgumentParser) -> None:
    """What runs and how it is measured: the dashboard's, ``record``'s and ``serve``'s options."""
    from workloads.registry import DEFAULT_FAMILY, FAMILIES

    w = p.add_argument_group("workload")
    w.add_argument(
        "-w", "--workload", metavar="NAME", help=f"workload family: {', '.join(FAMILIES)} (default: {DEFAULT_FAMILY})"
    )
    w.add_argument("-v", "--variant", metavar="NAME", help="variant (default: the family's; see 'gpudash list')")
    w.add_argument(
        "-b", "--batch-size", type=argtypes.batch_size, metavar="N", help="batch size (default: the family's)"
    )
    w.add_argument(
        "--device",
        type=argtypes.device,
        metavar="DEV",
        help="auto, cpu, cuda or cuda:N (default: auto = cuda if available)",
    )
    w.add_argument("--image-size", type=argtypes.image_size, metavar="PX", help="image side, a power of two")
    w.add_argument(
        "--workers",
        type=argtypes.nonnegative_int,
        metavar="N",
        help="DataLoader workers, where the variant uses them (default: the CPUs, split among one machine's ranks)",
    )
    w.add_argument("--seed", type=int, help=f"random seed (default: {DEFAULTS['seed']})")
    w.add_argument("--steps", type=argtypes.positive_int, metavar="N", help="stop after N steps")
    w.add_argument(
        "--knob",
        type=argtypes.knob,
        action="append",
        metavar="NAME[=VALUE]",
        help="a knob beyond the variant, repeatable: amp=bf16, channels_last, cudnn_benchmark, "
        "tf32, cuda_graph, compile[=MODE] ('gpudash list' says where each applies)",
    )
    d = p.add_argument_group("data parallelism (torch.distributed DDP; torchrun's launcher and rendezvous)")
    d.add_argument(
        "--nproc",
        type=argtypes.positive_int,
        metavar="N",
        help="ranks on this node, one GPU each (gloo on the CPU) (default: 1, no DDP)",
    )
    d.add_argument(
        "--nnodes",
        type=argtypes.positive_int,
        metavar="M",
        help="machines in the run, each running gpudash with the same --rdzv-endpoint (default: 1)",
    )
    d.add_argument("--rdzv-endpoint", metavar="HOST:PORT", help="the rendezvous of a multi-node run (torchrun's)")
    d.add_argument("--rdzv-id", metavar="ID", help="the run's id, the same on every node (torchrun's)")
    m = p.add_argument_group("measuring")
    m.add_argument(
        "--sample-interval",
        type=argtypes.positive_float,
        metavar="S",
        help=f"seconds between throughput samples (default: {DEFAULTS['sample_interval']})",
    )
    m.add_argument(
        "--interval",
        type=argtypes.positive_float,
        metavar="S",
        help=f"seconds between NVML GPU samples (default: {DEFAULTS['interval']})",
    )
    m.add_argument(
        "--gpus",
        type=gpu_list,
        metavar="I,J",
        help="the GPUs to watch, one row and CSV columns each, by index as nvidia-smi numbers them "
        "(default: the ones CUDA_VISIBLE_DEVICES names, else every GPU)",
    )
    m.add_argument(
        "--watchdog",
        type=argtypes.positive_float,
        metavar="S",
        help="seconds without a sample or event before the workload process is reported as not "
        f"responding; --record then stops it and exits 1 (default: {DEFAULTS['watchdog']:g})",
    )


def _add_theme_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--theme",
        metavar="NAME",
        help="the dashboard's Textual theme (default: the settings "
        "file's, where ctrl+p's Change theme saves it; else textual-dark)",
    )
    p.add_argument("--no-color", action="store_true", help="no colour: lines told apart by marker (as NO_COLOR=1)")


def _add_record_options(p: argparse.ArgumentParser, title: str) -> None:
    r = p.add_argument_group(title)
    if p.prog == "gpudash":  # 'gpudash record' takes the path as its argument
        r.add_argument(
            "--record",
            metavar="PATH",
            help="record headless to a CSV file ('-': stdout); the same as 'gpudash record PATH'",
        )
    r.add_argument(
        "--duration",
        type=argtypes.positive_float,
        metavar="S",
        help="seconds to record once the workload runs (default: until Ctrl-C)",
    )
    r.add_argument(
        "--force", action="store_true", help="overwrite the CSV and its metadata file if they exist (default: refuse)"
    )
    r.add_argument("--log", metavar="PATH", help="the workload process's log (default: beside the CSV, .log)")
    r.add_argument("--meta", metavar="PATH", help="metadata JSON (default: beside the CSV, .json)")
    r.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    r.add_argument(
        "--progress-every",
        type=argtypes.positive_float,
        metavar="S",
        help="seconds between progress lines on stderr (default: 10)",
    )
    r.add_argument(
        "--trace-every",
        type=argtypes.positive_float,
        metavar="S",
        help="a torch.profiler window every S seconds (Chrome traces in PATH.traces/, figures in event rows)",
    )
    r.add_argument(
        "--trace-steps",
        type=argtypes.int_at_least(1, "at least 1"),
        metavar="N",
        help=f"steps per profiler window (default: {DEFAULTS['trace_steps']}; at most 200)",
    )


def _add_serve_options(p: argparse.ArgumentParser) -> None:
    s = p.add_argument_group("serving")
    s.add_argument(
        "--host",
        metavar="ADDR",
        help=f"address to listen on (default: {DEFAULTS['host']}: this "
        "machine only; anything else lets whoever reaches the port run workloads here)",
    )
    s.add_argument("--port", type=argtypes.port, metavar="N", help=f"port (default: {DEFAULTS['port']})")
    s.add_argument(
        "--public-url",
        metavar="URL",
        help="the address browsers use, when it is not http://HOST:PORT (a proxy, an ssh tunnel to another port)",
    )


class _ConfigPath(argparse.Action):
    """``--config-path``: print where the settings file is, and exit."""

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        from gpudash.config import config_path

        print(config_path())
        parser.exit(ExitCode.OK)


PASSTHROUGH = ("sweep", "report")  # these parse their own arguments (gpudash/sweep/plan.py, report.py)


def build_parsers() -> tuple[Parser, dict[str, Parser]]:
    """The parser of ``gpudash`` and of each subcommand."""
    common: dict[str, Any] = dict(formatter_class=help_formatter(), argument_default=argparse.SUPPRESS)
    top = Parser(
        prog="gpudash",
        description="See what CUDA streams, GPU-side augmentation and removing host-device syncs\n"
        "do to training throughput, live.",
        epilog=EPILOG,
        **common,
        # no abbreviations at the top: it sees every argument, also those of 'sweep'/'report', whose
        # own options (sweep's --trace) must not be taken for a prefix of one here (--trace-every)
        allow_abbrev=False,
    )
    top.add_argument("-V", "--version", action="version", version=f"gpudash {_version()}")
    top.add_argument("--config-path", action=_ConfigPath, nargs=0, help="print where the settings file is, and exit")
    _add_theme_option(top)
    sub = top.add_subparsers(
        dest="command",
        title="commands",
        metavar="COMMAND",
        description="without one, gpudash runs the dashboard (or records, with --record);\n"
        "'gpudash COMMAND --help' lists a command's options",
    )
    commands: dict[str, Parser] = {}

    def command(name: str, summary: str, description: str | None = None, **kw: Any) -> Parser:
        p = sub.add_parser(name, help=summary, description=description or summary, **{**common, **kw})
        commands[name] = p
        return p

    run = command("run", "the live dashboard (the default)", epilog=EPILOG.split("\n\n")[1])
    _add_theme_option(run)
    _add_run_options(run)
    rec = command(
        "record",
        "headless: a CSV of the run, its metadata and the workload's log",
        "Run a workload without the dashboard and record it: a CSV row per tick, events and\n"
        "a summary row per configuration; metadata in PATH.json, the workload's log in PATH.log.",
    )
    rec.add_argument("path", metavar="PATH", help="the CSV to write ('-': stdout)")
    _add_run_options(rec)
    _add_record_options(rec, "recording")
    lst = command("list", "workload families, variants, defaults, knobs, what needs CUDA")
    lst.add_argument("-w", "--workload", metavar="NAME", help="only this family")
    rep = command("replay", "a recorded CSV in the dashboard")
    rep.add_argument("path", metavar="PATH", help="a CSV written by gpudash record (or c in the dashboard)")
    rep.add_argument("--follow", action="store_true", help="keep reading as the file grows")
    _add_theme_option(rep)
    for name, summary in (
        ("sweep", "measure variants x batch sizes with 95%% intervals (--preset NAME)"),
        ("report", "report.md and plots of recordings or sweeps (--html)"),
    ):
        p = command(name, summary, add_help=False, prefix_chars="\0")  # its own parser reads every argument
        p.add_argument("args", nargs=argparse.REMAINDER)
    srv = command(
        "serve",
        "the dashboard in a browser (textual-serve), on this machine only by default",
        "Serve the dashboard over HTTP: each browser tab gets its own dashboard and workload,\n"
        "started with the options below; closing the tab stops both.",
    )
    _add_serve_options(srv)
    _add_theme_option(srv)
    _add_run_options(srv)
    _add_run_options(top)
    _add_record_options(top, "with --record")
    return top, commands


def build_parser() -> Parser:
    """The parser of ``gpudash [options]`` (its subcommands' parsers hang under it)."""
    return build_parsers()[0]


def _version() -> str:
    from gpudash.recording.record import gpudash_version

    return gpudash_version()


# -- checks that need the machine, not torch ------------------------------------------------------
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
    argtypes.check_batch_limits(info, args.batch_size, args.nproc * args.nnodes)
    gpus = gpu_indexes(args.gpus) if args.gpus else None
    try:
        check_gpus(gpus)
    except GpuSelectionError as exc:
        raise UsageError(str(exc)) from None
    knobs = argtypes.knobs_from(args.knob)
    argtypes.check_parallel(args.nproc, args.nnodes, args.rdzv_endpoint, args.device)
    argtypes.check_host_budget(args.nproc, args.workers, args.device)
    argtypes.check_knobs(knobs, args.device, variant, world_size=args.nproc * args.nnodes)
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
        watchdog_s=args.watchdog,
        max_steps=args.steps,
        knobs=knobs.text(),
        gpus=gpus,
        nproc=args.nproc,
        nnodes=args.nnodes,
        rdzv_endpoint=args.rdzv_endpoint,
        rdzv_id=args.rdzv_id,
    )


def check_theme(name: str | None) -> None:
    """Raise UsageError unless ``name`` is one of Textual's themes (None: nothing to check)."""
    if name is None:
        return
    from textual.theme import BUILTIN_THEMES

    if name not in BUILTIN_THEMES:
        raise UsageError(f"--theme {name}: not a Textual theme; choose one of: {', '.join(sorted(BUILTIN_THEMES))}")


def _fail(message: str) -> int:
    """One ``gpudash: error:`` line (control characters from a name given are not passed on)."""
    from gpudash.core.textfmt import strip_controls

    print(f"gpudash: error: {strip_controls(' '.join(message.split()))}", file=sys.stderr)
    return ExitCode.USAGE


def _warn(message: str) -> None:
    print(f"gpudash: warning: {' '.join(message.split())}", file=sys.stderr, flush=True)


# -- options: given, from the settings file, built in ------------------------------------------------
def _flags(parser: argparse.ArgumentParser, dests: Sequence[str]) -> str:
    """How the user spells these options: "-w/--workload, --theme"."""
    spelled = {a.dest: "/".join(a.option_strings) or a.dest for a in parser_actions(parser)}
    return ", ".join(spelled.get(d, d) for d in dests)


def _with_defaults(given: dict[str, Any], user_config: Any) -> argparse.Namespace:
    """The options given, then the settings file's, then ``DEFAULTS``."""
    from workloads.registry import DEFAULT_FAMILY

    values = {**DEFAULTS, "workload": DEFAULT_FAMILY}
    values.update(user_config.option_defaults(given.get("workload")))
    values.update(given)
    return argparse.Namespace(**values)


def _user_config() -> Any:
    """The settings file, each of its problems one warning line on stderr."""
    from gpudash import config

    user_config = config.load()
    for problem in user_config.problems:
        _warn(problem)
    return user_config


def as_argv(parser: argparse.ArgumentParser, given: dict[str, Any]) -> list[str]:
    """The options of ``given`` that ``parser`` reads, written back as its flags
    (``--knob=amp=bf16``): how ``serve`` starts ``gpudash run`` with the options it was given."""
    argv: list[str] = []
    for action in parser_actions(parser):
        if action.dest not in given or not action.option_strings:
            continue
        flag, value = action.option_strings[-1], given[action.dest]
        if action.nargs == 0:  # store_true
            argv.append(flag)
            continue
        for item in value if isinstance(value, list) else [value]:
            argv.append(f"{flag}={'='.join(item) if isinstance(item, tuple) else item}")
    return argv


# -- subcommands ------------------------------------------------------------------------------------
def _cmd_list(given: dict[str, Any]) -> int:
    from workloads import knobs
    from workloads.registry import WorkloadError, describe, family

    if "workload" in given:
        try:
            only = family(given["workload"]).name
        except WorkloadError as exc:
            return _fail(str(exc))
        print(describe(only))
        return ExitCode.OK
    print(describe())
    print()
    print(knobs.describe())
    return ExitCode.OK


def _cmd_replay(given: dict[str, Any]) -> int:
    path = given["path"]
    if not os.path.isfile(path):
        return _fail(f"no such file: {path}")
    if not os.access(path, os.R_OK):
        return _fail(f"cannot read {path}")
    user_config = _user_config()
    theme = given.get("theme")
    try:
        check_theme(theme)
    except UsageError as exc:
        return _fail(str(exc))
    if theme is not None:
        user_config = dataclasses.replace(user_config, values={**user_config.values, "theme": theme})
    from gpudash.tui.app import run_replay

    return int(run_replay(path, given.get("follow", False), user_config) or 0)


def _cmd_passthrough(name: str, argv: list[str]) -> int:
    if name == "sweep":
        from gpudash.sweep.run import main as sweep_main

        return sweep_main(argv)
    from gpudash.report.command import main as report_main

    return report_main(argv)


def _cmd_run_or_record(command: str, given: dict[str, Any]) -> int:
    """``gpudash [run]``, ``gpudash record PATH`` and ``gpudash --record PATH``; ``serve`` checks
    its options here too (``command`` = "serve") before serving."""
    record = given.pop("path") if "path" in given else given.get("record")
    if record is None:
        stray = [flag for flag, dest in RECORD_ONLY if dest in given]
        if stray:
            return _fail(f"{stray[0]} only applies with --record PATH")
    user_config = _user_config()
    args = _with_defaults(given, user_config)
    try:
        config = config_from_args(args)
        if args.trace_every is not None:
            assert record is not None  # --trace-every without --record PATH was refused above
            config = dataclasses.replace(config, trace_dir=trace_dir_for(record))
        if record is not None:
            paths.check_recording_outputs(record, args.meta, args.log, args.force)
        else:
            check_theme(args.theme)
    except UsageError as exc:
        return _fail(str(exc))
    if record is not None:
        from gpudash.recording.headless import run_record

        return run_record(
            config,
            record,
            duration_s=args.duration,  # --steps is in config (max_steps)
            log_path=args.log,
            meta_path=args.meta,
            quiet=args.quiet,
            trace_every_s=args.trace_every,
            trace_steps=args.trace_steps,
            progress_every_s=args.progress_every,
        )
    if args.theme is not None:
        user_config = dataclasses.replace(user_config, values={**user_config.values, "theme": args.theme})
    if command == "serve":
        from gpudash.serve import serve

        _, commands = build_parsers()
        return serve(args.host, args.port, args.public_url, as_argv(commands["run"], given))
    from gpudash.serve import end_with_server
    from gpudash.tui.app import run_dashboard

    end_with_server()  # a tab of ``gpudash serve``: quit (stopping the workload) when the server dies
    return int(run_dashboard(config, user_config) or 0)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``gpudash`` console script; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        faults.from_env()  # test-only (GPUDASH_FAULT): a bad value stops here, before anything starts
    except faults.FaultSpecError as exc:
        return _fail(str(exc))
    top, commands = build_parsers()
    given = vars(top.parse_args(argv))
    command = given.pop("command", None)
    if command in PASSTHROUGH:
        rest = given.pop("args", [])
        if given:
            return _fail(
                f"{_flags(top, list(given))} before '{command}': give {command}'s options after it "
                f"(gpudash {command} --help)"
            )
        return _cmd_passthrough(command, rest)
    if command is not None:
        own = {a.dest for a in parser_actions(commands[command])}
        stray = [dest for dest in given if dest not in own]
        if stray:
            return _fail(f"{_flags(top, stray)} does not apply to 'gpudash {command}'")
    handlers: dict[str, Callable[[dict[str, Any]], int]] = {"list": _cmd_list, "replay": _cmd_replay}
    if given.get("no_color"):
        os.environ["NO_COLOR"] = "1"  # Textual reads it when the app is built (here, or in serve's child)
    if command in handlers:
        return handlers[command](given)
    return _cmd_run_or_record(command or ("record" if "record" in given else "run"), given)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
