"""``gpudash [run|record PATH|diagnose] [OPTIONS] -- CMD ...``: the user's own job, unmodified, in
the dashboard, recorded headless or diagnosed. A job's settings are its own arguments: the options
that choose a family's workload do not apply to it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from gpudash.arguments.argtypes import UsageError
from gpudash.cli.messages import fail, spelled
from gpudash.cli.parsers import build_parsers
from gpudash.cli.run_options import recording_options, trace_dir_for
from gpudash.cli.settings import check_theme, user_config, with_defaults
from gpudash.host.gpu_selection import GpuSelectionError, gpu_indexes
from gpudash.recording import paths

if TYPE_CHECKING:
    from gpudash.diagnosis.checks import Check
    from gpudash.diagnosis.evidence import Evidence
    from gpudash.diagnosis.verdict import Diagnosis
    from gpudash.job.run import Checker

# a job's settings are its own arguments: these options of a family's run do not apply to one
JOB_REFUSED: tuple[str, ...] = ("workload", "variant", "batch_size", "knob", "image_size", "workers", "seed")
JOB_REFUSED += ("device", "nproc", "nnodes", "rdzv_endpoint", "rdzv_id", "log", "watchdog")


def command_refusal(exc: Exception, job: list[str]) -> int:
    """The exit status of a job's command that cannot run, as a shell's: 2 none given, 127 not
    found, 126 found but not runnable."""
    if not job:
        return 2
    return 127 if "not found" in str(exc) or "no such" in str(exc) else 126


def diagnose_checker(job: list[str], quiet: bool) -> Checker:
    """What ``gpudash diagnose -- CMD`` runs after its verdict: the counterfactuals of
    ``gpudash.tune.checks_run`` on the job's own command (progress on stderr unless ``quiet``)."""
    from gpudash.diagnosis.parts import INPUT
    from gpudash.diagnosis.remedies import remedies
    from gpudash.tune.checks_run import check_seconds, run_checks

    def say(text: str) -> None:
        if not quiet:
            print(f"gpudash: {text}", file=sys.stderr, flush=True)

    def check(evidence: Evidence, diagnosis: Diagnosis, ran_s: float, folder: Path) -> list[Check]:
        named = [r.advice for r in remedies(evidence, diagnosis.bound, script=True) if r.limit == INPUT]
        seconds = check_seconds(ran_s)
        return run_checks(job, folder / "run.csv", evidence, named[0] if named else "", seconds, folder, say)

    return check


def run_job(before: list[str], job: list[str]) -> int:
    """``gpudash [run|record PATH|diagnose] [OPTIONS] -- CMD ...``: the user's job, unmodified."""
    from gpudash.job.command import JobCommandError, check_command
    from gpudash.job.diagnose_memory import diagnose_memory
    from gpudash.job.run import diagnose_job, job_config, record_job

    top, _ = build_parsers()
    given = vars(top.parse_args(before))
    command = given.pop("command", None) or ("record" if "record" in given else "run")
    if command not in ("run", "record", "diagnose"):
        return fail(f"'gpudash {command}' takes no job after --: a job runs in the dashboard, record or diagnose")
    refused = [dest for dest in JOB_REFUSED if dest in given]
    if refused:
        return fail(f"{spelled(top, refused)} does not apply to a job after --: its settings are its own arguments")
    try:
        check_command(job)
    except JobCommandError as exc:
        fail(str(exc))
        return command_refusal(exc, job)
    settings = user_config()
    args = with_defaults(given, settings)
    record = given.get("path") or given.get("record")
    try:
        gpus = gpu_indexes(args.gpus) if args.gpus else None
        if record is not None:
            paths.check_recording_outputs(record, args.meta, None, args.force)
        check_theme(args.theme)
    except (UsageError, GpuSelectionError) as exc:
        return fail(str(exc))
    trace_dir = trace_dir_for(record) if record is not None and args.trace_every is not None else None
    try:
        config = job_config(args, job, gpus, trace_dir)
    except ValueError as exc:  # a bad --set (gpudash.job.settings.SettingError)
        return fail(str(exc))
    if command == "diagnose":
        flags = {"as_json": args.json, "quiet": args.quiet, "keep_running": args.keep_running}
        if args.memory:
            return diagnose_memory(config, **flags)
        checker = None if args.no_check else diagnose_checker(job, args.quiet)
        return diagnose_job(config, warmup_s=args.warmup, checker=checker, **flags)
    if record is not None:  # with "-" the CSV is stdout: the job's own stdout goes to stderr, apart
        return record_job(config, record, stdout_to_stderr=str(record) == "-", **recording_options(args))
    from gpudash.tui.entry_points import run_dashboard

    return int(run_dashboard(config, settings) or 0)
