"""The parser of ``gpudash`` and of each subcommand, built from the option groups of
``gpudash.cli.options``, and the parsers of the commands that read their own arguments (sweep,
tune, report). Nothing here imports torch or textual at module level (``gpudash --help`` is fast).
"""

from __future__ import annotations

import argparse
from typing import Any

from gpudash.arguments import argtypes, shared_flags
from gpudash.arguments.argtypes import Parser
from gpudash.cli.options import (
    DEFAULTS,
    DIAGNOSE_WARMUP_S,
    add_gpus_option,
    add_record_options,
    add_run_options,
    add_serve_options,
    add_theme_option,
)
from gpudash.core.protocol import ExitCode

EPILOG = """\
examples:
  gpudash -- python train.py --lr 3e-4     the dashboard on your own training job, unmodified
  gpudash record run.csv -- python train.py   ... headless; diagnose -- CMD: what holds it back
  gpudash -w augment -v gpu -b 64          the dashboard on a workload, variant and batch size
  gpudash record run.csv --duration 60     headless, CSV + run.json (= gpudash --record run.csv ...)
  gpudash serve                            the dashboard in a browser at http://127.0.0.1:8000
  gpudash COMMAND --help                   a command's own options

Flags override the settings file (gpudash --config-path prints where it is).
exit status: 0 done, 1 the workload (or writing) failed, 2 bad arguments, 130 interrupted;
with a job after --, the job's own exit status
"""


def help_formatter() -> type[argparse.HelpFormatter]:
    """How help is laid out: plain argparse, keeping the line breaks of descriptions and epilogs."""
    return argparse.RawDescriptionHelpFormatter


class _ConfigPath(argparse.Action):
    """``--config-path``: print where the settings file is, and exit."""

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        from gpudash.arguments.config import config_path

        print(config_path())
        parser.exit(ExitCode.OK)


PASSTHROUGH = {  # the commands that parse their own arguments (own_parser), and their summaries
    "sweep": "measure variants x batch sizes with 95%% intervals (--preset NAME)",
    "tune": "race variants x knobs x batch sizes: the fastest configuration, with its interval",
    "report": "report.md and plots of recordings or sweeps (--html)",
}


def own_parser(command: str) -> Parser:
    """The parser of a command of ``PASSTHROUGH``, which reads every argument after its name."""
    from gpudash.report.command import build_parser as report_parser
    from gpudash.sweep.arguments import build_parser as sweep_parser
    from gpudash.tune.plan import build_parser as tune_parser

    return {"sweep": sweep_parser, "tune": tune_parser, "report": report_parser}[command]()


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
    add_theme_option(top)
    sub = top.add_subparsers(
        dest="command",
        title="commands",
        metavar="COMMAND",
        description="without one, gpudash runs the dashboard (or records, with --record);\n"
        "'gpudash COMMAND --help' lists a command's options",
    )
    commands = _add_commands(sub, common)
    add_run_options(top)
    add_record_options(top, "with --record")
    return top, commands


def _add_commands(sub: Any, common: dict[str, Any]) -> dict[str, Parser]:
    """Each subcommand's parser, by name."""
    commands: dict[str, Parser] = {}

    def command(name: str, summary: str, description: str | None = None, **kw: Any) -> Parser:
        p = sub.add_parser(name, help=summary, description=description or summary, **{**common, **kw})
        commands[name] = p
        return p

    run = command("run", "the live dashboard (the default)", epilog=EPILOG.split("\n\n")[1])
    add_theme_option(run)
    add_run_options(run)
    rec = command(
        "record",
        "headless: a CSV of the run, its metadata and a workload's log",
        "Run a workload without the dashboard and record it: a CSV row per tick, events and\n"
        "a summary row per configuration; metadata in PATH.json, a workload's log in PATH.log\n"
        "(a job after -- writes no log: its output is its own, on the terminal).",
    )
    rec.add_argument("path", metavar="PATH", help="the CSV to write ('-': stdout)")
    add_run_options(rec)
    add_record_options(rec, "recording")
    _add_diagnose_command(command)
    lst = command("list", "workload families, variants, defaults, knobs, what needs CUDA")
    lst.add_argument("-w", "--workload", metavar="NAME", help="only this family")
    rep = command("replay", "a recorded CSV in the dashboard")
    rep.add_argument("path", metavar="PATH", help="a CSV written by gpudash record (or c in the dashboard)")
    rep.add_argument(
        "nodes",
        nargs="*",
        metavar="NODE.csv",
        help="the other nodes' recordings of the same torchrun run: their ranks joined on PATH's clock",
    )
    rep.add_argument("--follow", action="store_true", help="keep reading as the file grows")
    add_theme_option(rep)
    for name, summary in PASSTHROUGH.items():
        p = command(name, summary, add_help=False, prefix_chars="\0")  # its own parser reads every argument
        p.add_argument("args", nargs=argparse.REMAINDER)
    _add_watch_command(command)
    _add_serve_command(command)
    return commands


def _add_diagnose_command(command: Any) -> None:
    """``gpudash diagnose``: one diagnosis window after a warm-up, its verdict on stdout."""
    diag = command(
        "diagnose",
        "what holds the step back: input, syncs, host launches or the GPU (one line, or --json)",
        "Run a workload headless for --warmup seconds, then a diagnosis window: the wait for each\n"
        "batch, the syncs inside the step and, on a GPU, a profiler window. Prints what bounds the\n"
        "step (input-bound, sync-bound, host/launch-bound, GPU-bound, busy with the SMs idle (GPM),\n"
        "CPU-bound), the evidence and\n"
        "what to try next. Nothing is written.",
    )
    add_run_options(diag)
    d = diag.add_argument_group("diagnosis")
    argtypes.add_seconds(d, "--warmup", help=f"seconds the workload runs first (default: {DIAGNOSE_WARMUP_S:g})")
    d.add_argument(
        "--keep-running",
        action="store_true",
        help="with a job after --: leave it running after the verdict (default: stop it)",
    )
    d.add_argument(
        "--no-check",
        action="store_true",
        help="with a job after --: do not run the counterfactuals after the verdict (the job on one rank, "
        "the DataLoader settings an input remedy names, raced as tune races them)",
    )
    d.add_argument(
        "--memory",
        action="store_true",
        help="what holds the GPU's memory instead: two steps recorded with the CUDA allocator's history, "
        "the lines alive at their peak, what the memory holds by kind and what batch fits",
    )
    shared_flags.add_json(d)
    shared_flags.add_quiet(d)


def _add_serve_command(command: Any) -> None:
    """``gpudash serve``: the dashboard (or ``watch``) in a browser, a workload per tab."""
    srv = command(
        "serve",
        "the dashboard in a browser (textual-serve), on this machine only by default",
        "Serve the dashboard over HTTP: each browser tab gets its own dashboard and workload,\n"
        "started with the options below; closing the tab stops both.",
    )
    add_serve_options(srv)
    srv.add_argument(
        "--watch",
        action="store_true",
        help="serve 'gpudash watch' (every GPU and its processes, no workload) instead of a workload's dashboard",
    )
    add_theme_option(srv)
    add_run_options(srv)


def _add_watch_command(command: Any) -> None:
    """``gpudash watch``: every GPU of the box and its processes, with no workload of its own."""
    watch = command(
        "watch",
        "every GPU and its processes, live, with no workload of gpudash's (--once: print and exit)",
        "The dashboard with no workload: every GPU's line, the charts of one GPU (g: the next) and\n"
        "the processes on each GPU (NVML). --once prints them once (--json for scripts) and exits;\n"
        "--record PATH writes NVML's readings to gpudash's CSV, headless, until Ctrl-C (-q: quietly).\n"
        "exit status: 0 done, 1 NVML unavailable (the line says why) or writing failed, 2 bad\n"
        "arguments, 130 interrupted",
    )
    w = watch.add_argument_group("watch")
    w.add_argument("--once", action="store_true", help="print every GPU and its processes now, and exit")
    shared_flags.add_json(w)  # with --once
    w.add_argument("--record", metavar="PATH", help="headless: NVML's readings to a CSV ('-': stdout) until Ctrl-C")
    argtypes.add_seconds(w, "--duration", help="with --record: seconds to record (default: until Ctrl-C)")
    w.add_argument("--force", action="store_true", help="with --record: overwrite the CSV and its metadata file")
    shared_flags.add_quiet(w)  # with --record
    argtypes.add_seconds(w, "--interval", help=f"seconds between NVML samples (default: {DEFAULTS['interval']})")
    add_gpus_option(w, "the GPUs to watch")
    add_theme_option(watch)


def build_parser() -> Parser:
    """The parser of ``gpudash [options]`` (its subcommands' parsers hang under it)."""
    return build_parsers()[0]


def _version() -> str:
    from gpudash.recording.metadata import gpudash_version

    return gpudash_version()
