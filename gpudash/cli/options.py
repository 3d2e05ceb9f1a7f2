"""The command line's options: every parser of ``gpudash`` and its subcommands, and ``DEFAULTS``.

Every parser leaves an option it was not given out of the namespace (``argument_default=SUPPRESS``),
which is how a subcommand's flags and the ones before it merge and how the settings file knows what
the command line set: give an option no ``default=``; its default belongs in ``DEFAULTS``. Nothing
here imports torch or textual at module level (``gpudash --help`` is fast).
"""

from __future__ import annotations

import argparse
from typing import Any

from gpudash.arguments import argtypes, shared_flags
from gpudash.arguments.argtypes import Parser
from gpudash.core.controls import PERIODIC_STEPS
from gpudash.core.protocol import ExitCode, RunConfig
from gpudash.host.gpu_selection import gpu_list

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

DIAGNOSE_WARMUP_S = 5.0  # seconds of running before a diagnosis window (record --diagnose, gpudash diagnose)
DEFAULTS: dict[str, Any] = {  # every option's built-in default (the parsers have none)
    "workload": None,  # the registry's DEFAULT_FAMILY (filled in by settings.with_defaults)
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
    "peak_tflops": None,
    "stall_after": RunConfig.stall_after_s,
    "watchdog": RunConfig.watchdog_s,
    "record": None,
    "duration": None,
    "log": None,
    "meta": None,
    "quiet": False,
    "force": False,
    "progress_every": None,
    "trace_every": None,
    "trace_steps": PERIODIC_STEPS,
    "diagnose": None,
    "warmup": DIAGNOSE_WARMUP_S,
    "keep_running": False,
    "no_check": False,
    "memory": False,
    "json": False,
    "once": False,
    "watch": False,
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
    ("--diagnose", "diagnose"),
    ("--force", "force"),
    ("--progress-every", "progress_every"),
)


# -- parsers ----------------------------------------------------------------------------------------
def help_formatter() -> type[argparse.HelpFormatter]:
    """How help is laid out: plain argparse, keeping the line breaks of descriptions and epilogs."""
    return argparse.RawDescriptionHelpFormatter


def _add_run_options(p: argparse.ArgumentParser) -> None:
    """What runs and how it is measured: the dashboard's, ``record``'s and ``serve``'s options."""
    _add_workload_options(p)
    _add_distributed_options(p)
    _add_measuring_options(p)


def _add_workload_options(p: argparse.ArgumentParser) -> None:
    from workloads.registry import DEFAULT_FAMILY, FAMILIES

    w = p.add_argument_group("workload")
    w.add_argument(
        "-w",
        "--workload",
        metavar="NAME",
        help=f"workload family: {', '.join(FAMILIES)} (default: {DEFAULT_FAMILY}); or your own, FILE.py:FUNCTION "
        "(docs/your-model.md)",
    )
    w.add_argument("-v", "--variant", metavar="NAME", help="variant (default: the family's; see 'gpudash list')")
    w.add_argument(
        "-b", "--batch-size", type=argtypes.batch_size, metavar="N", help="batch size (default: the family's)"
    )
    shared_flags.add_device(w)
    shared_flags.add_image_size(w)
    shared_flags.add_workers(w, "the workload")
    w.add_argument("--seed", type=int, help=f"random seed (default: {DEFAULTS['seed']})")
    argtypes.add_count(w, "--steps", help="stop after N steps")
    w.add_argument(
        "--knob",
        type=argtypes.knob,
        action="append",
        metavar="NAME[=VALUE]",
        help="a knob beyond the variant, repeatable: amp=bf16, channels_last, cudnn_benchmark, "
        "tf32, cuda_graph, compile[=MODE] ('gpudash list' says where each applies)",
    )


def _add_distributed_options(p: argparse.ArgumentParser) -> None:
    d = p.add_argument_group("data parallelism (torch.distributed DDP; torchrun's launcher and rendezvous)")
    argtypes.add_count(d, "--nproc", help="ranks on this node, one GPU each (gloo on the CPU) (default: 1, no DDP)")
    argtypes.add_count(
        d,
        "--nnodes",
        metavar="M",
        help="machines in the run, each running gpudash with the same --rdzv-endpoint (default: 1)",
    )
    d.add_argument("--rdzv-endpoint", metavar="HOST:PORT", help="the rendezvous of a multi-node run (torchrun's)")
    d.add_argument("--rdzv-id", metavar="ID", help="the run's id, the same on every node (torchrun's)")


def _add_measuring_options(p: argparse.ArgumentParser) -> None:
    m = p.add_argument_group("measuring")
    argtypes.add_seconds(
        m, "--sample-interval", help=f"seconds between throughput samples (default: {DEFAULTS['sample_interval']})"
    )
    argtypes.add_seconds(m, "--interval", help=f"seconds between NVML GPU samples (default: {DEFAULTS['interval']})")
    _add_gpus_option(m, "the GPUs to watch, one row and CSV columns each")
    shared_flags.add_peak_tflops(m)
    argtypes.add_seconds(
        m,
        "--stall-after",
        help="your job (gpudash -- CMD): seconds with no step, in no evaluation, checkpoint or compile, "
        "after which it is called stalled and gpudash shows where each of its threads waits; also ten "
        "median steps at the least, never before its median step is known, nor while its step computes "
        f"(default: {DEFAULTS['stall_after']:g})",
    )
    m.add_argument(
        "--set",
        dest="job_set",
        action="append",
        metavar="KEY=VALUE",
        help="your job (gpudash -- CMD): a setting applied without an edit of its script, repeatable: "
        "num_workers, pin_memory, persistent_workers, prefetch_factor (its training DataLoader's; "
        "loader_site=FILE:LINE names it), cudnn_benchmark, expandable_segments; changing the numbers: "
        "tf32, autocast=bf16, compile (the model the optimizer steps); changing the training: batch_size "
        "(with loader_site)",
    )
    argtypes.add_seconds(
        m,
        "--watchdog",
        help="seconds without a sample or event before the workload process is reported as not "
        f"responding; --record then stops it and exits 1 (default: {DEFAULTS['watchdog']:g})",
    )


def _add_gpus_option(options: argtypes.Options, what: str) -> None:
    """``--gpus I,J``: which GPUs are watched (the dashboard's, ``record``'s and ``watch``'s)."""
    options.add_argument(
        "--gpus",
        type=gpu_list,
        metavar="I,J",
        help=f"{what}, by index as nvidia-smi numbers them (default: the ones CUDA_VISIBLE_DEVICES names, "
        "else every GPU)",
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
    argtypes.add_seconds(r, "--duration", help="seconds to record once the workload runs (default: until Ctrl-C)")
    r.add_argument(
        "--force", action="store_true", help="overwrite the CSV and its metadata file if they exist (default: refuse)"
    )
    r.add_argument(
        "--log",
        metavar="PATH",
        help="the workload process's log (default: beside the CSV, .log); a job after -- writes none",
    )
    r.add_argument("--meta", metavar="PATH", help="metadata JSON (default: beside the CSV, .json)")
    shared_flags.add_quiet(r)
    argtypes.add_seconds(r, "--progress-every", help="seconds between progress lines on stderr (default: 10)")
    argtypes.add_seconds(
        r,
        "--trace-every",
        help="a torch.profiler window every S seconds (Chrome traces in PATH.traces/, figures in event rows)",
    )
    argtypes.add_seconds(
        r,
        "--diagnose",
        nargs="?",
        const=DIAGNOSE_WARMUP_S,
        help="a diagnosis window S seconds after the start (default: "
        f"{DIAGNOSE_WARMUP_S:g}): what bounds the step, an event row and a line on stderr",
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
    _add_theme_option(top)
    sub = top.add_subparsers(
        dest="command",
        title="commands",
        metavar="COMMAND",
        description="without one, gpudash runs the dashboard (or records, with --record);\n"
        "'gpudash COMMAND --help' lists a command's options",
    )
    commands = _add_commands(sub, common)
    _add_run_options(top)
    _add_record_options(top, "with --record")
    return top, commands


def _add_commands(sub: Any, common: dict[str, Any]) -> dict[str, Parser]:
    """Each subcommand's parser, by name."""
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
        "headless: a CSV of the run, its metadata and a workload's log",
        "Run a workload without the dashboard and record it: a CSV row per tick, events and\n"
        "a summary row per configuration; metadata in PATH.json, a workload's log in PATH.log\n"
        "(a job after -- writes no log: its output is its own, on the terminal).",
    )
    rec.add_argument("path", metavar="PATH", help="the CSV to write ('-': stdout)")
    _add_run_options(rec)
    _add_record_options(rec, "recording")
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
    _add_theme_option(rep)
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
    _add_run_options(diag)
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
    _add_serve_options(srv)
    srv.add_argument(
        "--watch",
        action="store_true",
        help="serve 'gpudash watch' (every GPU and its processes, no workload) instead of a workload's dashboard",
    )
    _add_theme_option(srv)
    _add_run_options(srv)


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
    _add_gpus_option(w, "the GPUs to watch")
    _add_theme_option(watch)


def build_parser() -> Parser:
    """The parser of ``gpudash [options]`` (its subcommands' parsers hang under it)."""
    return build_parsers()[0]


def _version() -> str:
    from gpudash.recording.record import gpudash_version

    return gpudash_version()
