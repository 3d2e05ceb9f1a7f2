"""The ``gpudash`` command and its subcommands: ``run`` (the dashboard, the default), ``record``
(headless; ``gpudash --record PATH`` is the same), ``diagnose``, ``list``, ``replay``, ``sweep``, ``tune``, ``report``,
``watch`` (every GPU and its processes, no workload) and ``serve`` (the dashboard in a browser).

Fast to start: nothing here imports torch or textual at module level. Every argument is
checked before anything starts; a bad one is one line on stderr and exit status 2.

Defaults, lowest first: ``DEFAULTS`` (``gpudash/cli/options.py``, with every parser), the user's
settings file (``gpudash/arguments/config.py``), then the flags.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from gpudash.arguments import argtypes
from gpudash.arguments.argparse_adapter import parser_actions
from gpudash.arguments.argtypes import UsageError, check_device
from gpudash.cli.options import DEFAULTS, PASSTHROUGH, RECORD_ONLY, build_parsers
from gpudash.core import faults
from gpudash.core.protocol import EventKind, ExitCode, RunConfig
from gpudash.host.gpu_checks import check_gpus
from gpudash.host.gpu_selection import GpuSelectionError, gpu_indexes
from gpudash.recording import paths

DIAGNOSE_CAP_S = 300.0  # seconds after the warm-up by which a diagnosis must have answered


# -- checks that need the machine, not torch ------------------------------------------------------
def trace_dir_for(record: str) -> str:
    """Where a recording's profiler windows go: ``run.csv`` → ``run.traces/`` (stdout: ./gpudash-traces)."""
    if record == "-":
        return os.path.abspath("gpudash-traces")
    base = os.path.abspath(record)
    return (base[:-4] if base.endswith(".csv") else base) + ".traces"


# The RunConfig fields that an option gives as it is (field: the option's dest); the workload,
# the knobs and the GPUs are checked and converted first.
RUN_OPTIONS = {
    "variant": "variant",
    "batch_size": "batch_size",
    "device": "device",
    "image_size": "image_size",
    "workers": "workers",
    "seed": "seed",
    "sample_interval_s": "sample_interval",
    "gpu_interval_s": "interval",
    "watchdog_s": "watchdog",
    "max_steps": "steps",
    "nproc": "nproc",
    "nnodes": "nnodes",
    "rdzv_endpoint": "rdzv_endpoint",
    "rdzv_id": "rdzv_id",
    "peak_tflops": "peak_tflops",
}


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
    as_given = {field: getattr(args, option) for field, option in RUN_OPTIONS.items()}
    return RunConfig(workload=info.name, knobs=knobs.text(), gpus=gpus, **as_given)


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
    from gpudash.arguments import config

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


def _themed_user_config(theme: str | None) -> Any:
    """The settings file's settings with ``--theme`` on top (UsageError for an unknown theme)."""
    check_theme(theme)
    user_config = _user_config()
    if theme is not None:
        user_config = dataclasses.replace(user_config, values={**user_config.values, "theme": theme})
    return user_config


def _cmd_replay(given: dict[str, Any]) -> int:
    path = given["path"]
    for each in (path, *given.get("nodes", ())):
        if not os.path.isfile(each):
            return _fail(f"no such file: {each}")
        if not os.access(each, os.R_OK):
            return _fail(f"cannot read {each}")
    try:
        user_config = _themed_user_config(given.get("theme"))
    except UsageError as exc:
        return _fail(str(exc))
    from gpudash.tui.entry_points import run_replay

    return int(run_replay(path, given.get("follow", False), user_config, given.get("nodes", ())) or 0)


def _cmd_passthrough(name: str, argv: list[str]) -> int:
    if name == "sweep":
        from gpudash.sweep.run import main as sweep_main

        return sweep_main(argv)
    if name == "tune":
        from gpudash.tune.run import main as tune_main

        return tune_main(argv)
    from gpudash.report.command import main as report_main

    return report_main(argv)


def _recording_options(args: argparse.Namespace) -> dict[str, Any]:
    """A headless recording's options as given (``--steps`` is in the run's config: max_steps)."""
    return {
        "duration_s": args.duration,
        "meta_path": args.meta,
        "quiet": args.quiet,
        "trace_every_s": args.trace_every,
        "trace_steps": args.trace_steps,
        "progress_every_s": args.progress_every,
        "diagnose_after_s": args.diagnose,
    }


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

        return run_record(config, record, log_path=args.log, **_recording_options(args))
    if args.theme is not None:
        user_config = dataclasses.replace(user_config, values={**user_config.values, "theme": args.theme})
    if command == "serve":
        from gpudash.cli.serve import serve

        _, commands = build_parsers()
        return serve(args.host, args.port, args.public_url, as_argv(commands["run"], given))
    from gpudash.cli.serve import end_with_server
    from gpudash.tui.entry_points import run_dashboard

    end_with_server()  # a tab of ``gpudash serve``: quit (stopping the workload) when the server dies
    return int(run_dashboard(config, user_config) or 0)


WATCH_TUI_ONLY = (("--theme", "theme"),)
WATCH_RECORD_ONLY = (("--duration", "duration"), ("--force", "force"), ("-q/--quiet", "quiet"))


def _cmd_watch(given: dict[str, Any]) -> int:
    """``gpudash watch``: the dashboard over every GPU (``--once``: printed; ``--record``: to CSV)."""
    once, record = given.get("once", False), given.get("record")
    headless = "--once" if once else ("--record" if record is not None else None)
    if once and record is not None:
        return _fail("--once and --record: give one (--once prints the GPUs once, --record records them)")
    if given.get("json") and not once:
        return _fail("--json only applies with --once")
    stray = [flag for flag, dest in WATCH_RECORD_ONLY if dest in given and record is None]
    if stray:
        return _fail(f"{stray[0]} only applies with --record PATH")
    stray = [flag for flag, dest in WATCH_TUI_ONLY if dest in given and headless]
    if stray:
        return _fail(f"{stray[0]} is for the dashboard; it does not apply with {headless}")
    try:
        gpus = gpu_indexes(given["gpus"]) if given.get("gpus") else None
        check_gpus(gpus)  # a GPU this machine lacks: exit 2, as in the dashboard
        if record is not None:
            from gpudash.recording.record import meta_path_for

            force = given.get("force", False)
            paths.check_output_file(record, "--record", replace=force)
            if record != "-":
                paths.check_output_file(str(meta_path_for(record)), "the metadata file", replace=force)
    except (UsageError, GpuSelectionError) as exc:
        return _fail(str(exc))
    interval = given.get("interval", DEFAULTS["interval"])
    if once:
        from gpudash.watch.once import run_once

        return run_once(gpus, given.get("json", False))
    if record is not None:
        from gpudash.watch.record import run_watch_record

        return run_watch_record(
            record, interval_s=interval, gpus=gpus, duration_s=given.get("duration"), quiet=given.get("quiet", False)
        )
    try:
        user_config = _themed_user_config(given.get("theme"))
    except UsageError as exc:
        return _fail(str(exc))
    from gpudash.cli.serve import end_with_server
    from gpudash.watch.app import run_watch

    end_with_server()  # a tab of ``gpudash serve --watch``: quit when the server dies
    return run_watch(interval, gpus, user_config)


def _cmd_serve_watch(given: dict[str, Any]) -> int:
    """``gpudash serve --watch``: each browser tab runs ``gpudash watch`` with the options given
    here (a browser names nothing: no workload, no file)."""
    _, commands = build_parsers()
    own = {a.dest for a in parser_actions(commands["watch"])} - {"once", "json", "record", "duration", "force", "quiet"}
    stray = [dest for dest in given if dest not in own and dest not in ("host", "port", "public_url")]
    if stray:
        flags = _flags(commands["serve"], stray)
        return _fail(f"{flags} does not apply to 'gpudash serve --watch' (it runs no workload)")
    try:
        check_theme(given.get("theme"))
        if given.get("gpus"):
            check_gpus(gpu_indexes(given["gpus"]))
    except (UsageError, GpuSelectionError) as exc:
        return _fail(str(exc))
    from gpudash.cli.serve import serve

    args = _with_defaults(given, _user_config())
    return serve(args.host, args.port, args.public_url, as_argv(commands["watch"], given), command="watch")


def _say_diagnosing(config: RunConfig, warmup_s: float) -> None:
    """``gpudash diagnose``'s progress line (unless -q): what runs, and how long it takes at most."""
    batch = f" bs{config.batch_size}" if config.batch_size else ""
    print(
        f"gpudash: diagnosing {config.workload} {config.variant or '(default variant)'}{batch} on {config.device}: "
        f"{warmup_s:g} s of warm-up, then a diagnosis window (at most {DIAGNOSE_CAP_S:g} s); the verdict on stdout",
        file=sys.stderr, flush=True,
    )  # fmt: skip


def _cmd_diagnose(given: dict[str, Any]) -> int:
    """``gpudash diagnose``: a headless run that ends with one diagnosis window; its verdict on stdout."""
    import json
    import tempfile

    from gpudash.diagnosis import remedies, rules
    from gpudash.diagnosis.evidence import Evidence
    from gpudash.recording.headless import HeadlessRecording, run_record

    args = _with_defaults(given, _user_config())
    try:
        config = config_from_args(args)
    except UsageError as exc:
        return _fail(str(exc))
    if not args.quiet:
        _say_diagnosing(config, args.warmup)
    held: list[HeadlessRecording] = []
    with tempfile.TemporaryDirectory(prefix="gpudash-diagnose-") as scratch:
        code = run_record(
            config,
            os.path.join(scratch, "run.csv"),
            duration_s=args.warmup + DIAGNOSE_CAP_S,  # a window that never answers does not hang it
            quiet=True,
            diagnose_after_s=args.warmup,
            memory_peak=args.memory,
            stop_after_diagnosis=True,
            recording_out=held,
        )
    events = (held[0].memory_peaks if args.memory else held[0].diagnoses) if held else []
    if code != ExitCode.OK:
        return code  # the run's failure was said (refused, crashed, interrupted)
    if not events:
        return _fail(f"no diagnosis: the run ended before its window answered (in {args.warmup + DIAGNOSE_CAP_S:g} s)")
    event = events[0]
    if event.kind == EventKind.ERROR:
        print(f"gpudash: error: {event.message}", file=sys.stderr)
        return int(ExitCode.FAILED)
    if args.memory:
        print(json.dumps(json.loads(event.details["memory_peak"]), indent=2) if args.json else event.details["lines"])
        return 0
    evidence = Evidence.from_details(event.details)
    verdict, lines = remedies.answer(evidence, rules.diagnose(evidence), script=False)
    if args.json:
        running: dict[str, object] = {k: event.details[k] for k in ("workload", "variant", "device", "knobs")}
        running["batch_size"] = int(event.details["batch_size"])
        print(json.dumps({**running, **verdict}, indent=2))
    else:
        print("\n".join([event.message, *lines]))
    return 0


# a job's settings are its own arguments: these options of a family's run do not apply to one
JOB_REFUSED: tuple[str, ...] = ("workload", "variant", "batch_size", "knob", "image_size", "workers", "seed")
JOB_REFUSED += ("device", "nproc", "nnodes", "rdzv_endpoint", "rdzv_id", "log", "watchdog")


def _cmd_job(before: list[str], job: list[str]) -> int:
    """``gpudash [run|record PATH|diagnose] [OPTIONS] -- CMD ...``: the user's job, unmodified."""
    from gpudash.job.command import JobCommandError, check_command
    from gpudash.job.run import diagnose_job, job_config, record_job
    from gpudash.job.run_memory import diagnose_memory

    top, _ = build_parsers()
    given = vars(top.parse_args(before))
    command = given.pop("command", None) or ("record" if "record" in given else "run")
    if command not in ("run", "record", "diagnose"):
        return _fail(f"'gpudash {command}' takes no job after --: a job runs in the dashboard, record or diagnose")
    refused = [dest for dest in JOB_REFUSED if dest in given]
    if refused:
        return _fail(f"{_flags(top, refused)} does not apply to a job after --: its settings are its own arguments")
    try:
        check_command(job)
    except JobCommandError as exc:
        _fail(str(exc))
        return 2 if not job else 127 if "not found" in str(exc) or "no such" in str(exc) else 126
    user_config = _user_config()
    args = _with_defaults(given, user_config)
    record = given.get("path") or given.get("record")
    try:
        gpus = gpu_indexes(args.gpus) if args.gpus else None
        if record is not None:
            paths.check_recording_outputs(record, args.meta, None, args.force)
        check_theme(args.theme)
    except (UsageError, GpuSelectionError) as exc:
        return _fail(str(exc))
    trace_dir = trace_dir_for(record) if record is not None and args.trace_every is not None else None
    try:
        config = job_config(args, job, gpus, trace_dir)
    except ValueError as exc:  # a bad --set (gpudash.job.settings.SettingError)
        return _fail(str(exc))
    if command == "diagnose":
        flags = {"as_json": args.json, "quiet": args.quiet, "keep_running": args.keep_running}
        return diagnose_memory(config, **flags) if args.memory else diagnose_job(config, warmup_s=args.warmup, **flags)
    if record is not None:  # with "-" the CSV is stdout: the job's own stdout goes to stderr, apart
        return record_job(config, record, stdout_to_stderr=str(record) == "-", **_recording_options(args))
    from gpudash.tui.entry_points import run_dashboard

    return int(run_dashboard(config, user_config) or 0)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``gpudash`` console script; returns the exit status (130 for a Ctrl-C that
    came before a command took it over: one line, no traceback)."""
    try:
        return _main(list(sys.argv[1:] if argv is None else argv))
    except KeyboardInterrupt:
        print("gpudash: interrupted", file=sys.stderr)
        return int(ExitCode.INTERRUPTED)


def _main(argv: list[str]) -> int:
    try:
        faults.from_env()  # test-only (GPUDASH_FAULT): a bad value stops here, before anything starts
    except faults.FaultSpecError as exc:
        return _fail(str(exc))
    from gpudash.job.command import split_job

    before, job = split_job(argv)
    named = next((word for word in before if not word.startswith("-")), None)  # the command, if any
    if job is not None and named not in PASSTHROUGH:  # (a recording path named "report" is a path)
        return _cmd_job(before, job)
    top, commands = build_parsers()
    given = vars(top.parse_args(argv))
    command = given.pop("command", None)
    if given.get("job_set"):
        return _fail("--set applies to your job (gpudash record PATH --set K=V -- CMD): a family's settings are knobs")
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
    handlers: dict[str, Callable[[dict[str, Any]], int]] = {
        "list": _cmd_list,
        "replay": _cmd_replay,
        "diagnose": _cmd_diagnose,
        "watch": _cmd_watch,
    }
    if given.get("no_color"):
        os.environ["NO_COLOR"] = "1"  # Textual reads it when the app is built (here, or in serve's child)
    if command in handlers:
        return handlers[command](given)
    if command == "serve" and given.pop("watch", False):
        return _cmd_serve_watch(given)
    return _cmd_run_or_record(command or ("record" if "record" in given else "run"), given)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
