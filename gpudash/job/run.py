"""``gpudash record PATH -- CMD`` and ``gpudash diagnose -- CMD``: the user's job, headless.

The job's output passes through unchanged; the recording is the same CSV and metadata as a
family's (``gpudash.recording.headless``); gpudash exits with the job's exit status when the job
ended by itself or on a Ctrl-C passed on to it, and with its own when it stopped the job (the
``--duration``, ``--steps`` or the diagnosis were done). Never imports torch or Textual.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpudash.core.protocol import Event, EventKind, ExitCode, RunConfig
from gpudash.diagnosis.checks import Check
from gpudash.diagnosis.evidence import Evidence
from gpudash.diagnosis.judge import Judgement, judgement_of
from gpudash.diagnosis.verdict import Diagnosis
from gpudash.job.command import display
from gpudash.job.session import JobSession
from gpudash.job.started import MARK_STEPS, NO_STEP
from gpudash.job.suspended import JobControlSignals
from gpudash.recording.headless import HeadlessRecording, new_recording
from gpudash.recording.interrupt import Interrupted

DIAGNOSE_CAP_S = 300.0  # after the warm-up, the most a job's diagnosis may take
STOP_NOTE = (  # before the job's own last lines (its finally blocks'), so that they read as what they are
    "the diagnosis is done: ending the job after a step (every rank after the same one; signals where it "
    "does not step on; --keep-running leaves it running)"
)


def exit_code(session: JobSession, recording: HeadlessRecording) -> int:
    """The job's exit status where it ended by itself or on a Ctrl-C passed on to it; gpudash's
    own where gpudash stopped it (time was up, the diagnosis was done) or could not record."""
    job_code = session.exit_code
    if recording.code == ExitCode.INTERRUPTED:
        return job_code if job_code is not None else int(ExitCode.INTERRUPTED)
    if job_code is not None and not session.process.stopped_by_gpudash:
        return job_code
    return int(recording.code)


def job_config(args: Any, job: list[str], gpus: tuple[int, ...] | None, trace_dir: str | None) -> RunConfig:
    """The run's configuration for a job: its command, and gpudash's own options."""
    from gpudash.job.command import variant, workload_name
    from gpudash.job.settings import parse_set

    return RunConfig(
        workload=workload_name(job),
        variant=variant(job),
        job=tuple(job),
        sample_interval_s=args.sample_interval,
        gpu_interval_s=args.interval,
        max_steps=args.steps,
        gpus=gpus,
        trace_dir=trace_dir,
        watchdog_s=None,
        peak_tflops=args.peak_tflops,
        stall_after_s=args.stall_after,
        job_set=parse_set(getattr(args, "job_set", None) or ()),
    )


def record_job(
    config: RunConfig,
    path: str | os.PathLike[str],
    *,
    meta_path: str | os.PathLike[str] | None = None,
    keep_running: bool = False,
    stdout_to_stderr: bool = False,
    recording_out: list[HeadlessRecording] | None = None,
    diagnosing: bool = False,
    **options: Any,
) -> int:
    """Run the job of ``config`` and record it to ``path``; returns the exit status. ``options``:
    the recording's (``HeadlessRecording``: duration_s, quiet, trace_every_s, diagnose_after_s, …;
    a ``progress_every_s`` of None is the default). ``stdout_to_stderr``: the job's stdout goes to
    gpudash's stderr (diagnose: stdout is the verdict's). ``diagnosing``: ``gpudash diagnose``'s run,
    whose recording is a scratch file (what was kept is not reported)."""
    session = JobSession(config, stdout_to_stderr=stdout_to_stderr)
    recording = new_recording(config, session, path, meta_path, {}, **options)
    if not (diagnosing or recording.quiet):  # said once it runs: a job may prepare its data for minutes
        where = "stdout" if str(path) == "-" else str(path)
        line = f"gpudash: recording {config.workload} ({display(config.job or ())}) to {where} from its first step"

        def launched() -> None:
            print(line, file=sys.stderr, flush=True)
            recording.launch_said = True

        session.on_launch = launched
    if recording_out is not None:
        recording_out.append(recording)
    if keep_running:
        session.stop = lambda timeout=10.0: session.leave_running()  # type: ignore[method-assign]
    with Interrupted(job=True) as interrupted, JobControlSignals(session.stops):
        # a Ctrl-C is the user's: SIGINT reaches the job as it would bare; another signal to gpudash
        # (tune dropping a candidate, a scheduler's SIGTERM) ends it quietly at a step
        session.interrupted_by_user = lambda: interrupted.signal == signal.SIGINT
        recording.run(interrupted)
    code = exit_code(session, recording)
    if recording.recorder is not None and recording.recorder.metadata.get("exit_code") != code:
        recording.recorder.metadata["exit_code"] = code  # the job's own, where it ended by itself
        recording.recorder.write_metadata()
    if session.start_error is not None:  # one line with the reason, and the shell's status
        print(f"gpudash: error: {session.start_error} (exit status {session.exit_code})", file=sys.stderr)
    elif recording.recorder is None and session.exit_code is not None and session.from_hooks.hooks_off is not None:
        why, steps = session.from_hooks.hooks_off  # said even when quiet: the job ran, gpudash did not see it
        print(
            f"gpudash: the job exited with code {session.exit_code}; gpudash's hooks in it went off after {steps} "
            f"steps ({why}): nothing recorded",
            file=sys.stderr,
        )
    elif recording.recorder is None and session.exit_code is not None and not recording.quiet:
        print(f"gpudash: {nothing_recorded(session)}", file=sys.stderr)
    else:
        ended_by_itself = session.exit_code is not None and not session.process.stopped_by_gpudash
        recording.report(ended_by_itself=ended_by_itself and not diagnosing)
    return code


def nothing_recorded(session: JobSession) -> str:
    """The line of a job that ended before gpudash recorded it; where it ran its course without a
    step gpudash saw (torch imported, exit status 0), how to mark its steps."""
    code = session.exit_code
    if session.samples.steps:
        return f"the job exited with code {code} before it was measured: nothing recorded"
    said = f"the job exited with code {code} before its first step: nothing recorded"
    if code == 0 and session.parts.rank_table.hellos:
        said += f" ({NO_STEP}): {MARK_STEPS}"
    return said


def measuring_run(
    config: RunConfig,
    purpose: str,
    quiet: bool,
    keep_running: bool,
    note: str = STOP_NOTE,
    folder: str | None = None,
    **options: Any,
) -> tuple[int, HeadlessRecording | None]:
    """A run of the job that gpudash ends once it has measured what ``options`` ask for (a diagnosis,
    the allocator's history), recorded to a scratch file (``folder``'s ``run.csv`` where given, kept
    for the caller); its exit status and its recording. ``note``: said as gpudash ends it (not when
    ``quiet`` or ``keep_running``)."""
    held: list[HeadlessRecording] = []
    with tempfile.TemporaryDirectory(prefix=f"gpudash-{purpose}-") as scratch:
        code = record_job(
            config,
            os.path.join(folder or scratch, "run.csv"),
            quiet=True,
            stop_after_diagnosis=True,
            keep_running=keep_running,
            stdout_to_stderr=True,
            recording_out=held,
            diagnosing=True,
            stop_note="" if quiet or keep_running else note,
            **options,
        )
    return code, (held[0] if held else None)


# what diagnose runs after its verdict (``gpudash.tune.checks_run``, given by the command line): the
# verdict's evidence and diagnosis, the seconds the job ran from its first step (its STARTED event)
# to the verdict, and the folder of the diagnosed run's ``run.csv``
Checker = Callable[[Evidence, Diagnosis, float, Path], list[Check]]


def diagnosis_head(event: Event, config: RunConfig, judged: Judgement) -> dict[str, object]:
    """``diagnose --json``'s head: what ran, its command, and the ranks' straggler line (by their
    untraced own work; in the text, after the verdict) where the job has several."""
    ran = event.running
    running: dict[str, object] = {
        "workload": ran.workload if ran else "",
        "variant": ran.variant if ran else "",
        "device": ran.device if ran else "",
        "batch_size": ran.batch_size if ran and ran.batch_size > 0 else None,  # null: not known
    }
    running["command"] = list(config.job or ())
    if judged.findings.note:  # what the verdict rests on, where not the whole ("no profiler window")
        running["note"] = judged.findings.note
    if judged.findings.straggler:  # the line, and the rank it names (null: "no straggler …")
        running["straggler"] = judged.findings.straggler
        running["straggler_rank"] = judged.findings.straggler_rank
    return running


def diagnose_job(
    config: RunConfig,
    *,
    warmup_s: float,
    as_json: bool,
    quiet: bool,
    keep_running: bool,
    checker: Checker | None = None,
) -> int:
    """``gpudash diagnose -- CMD``: the verdict on stdout, then the job is stopped (unless
    ``keep_running``); if the job ends first, what could be measured. ``checker``: the
    counterfactuals run after the verdict (never while the job is left running), which bound its
    remedies and are said under them."""
    with tempfile.TemporaryDirectory(prefix="gpudash-diagnose-") as folder:
        return _diagnose_job(config, warmup_s, as_json, quiet, keep_running, None if keep_running else checker, folder)


def _diagnose_job(
    config: RunConfig,
    warmup_s: float,
    as_json: bool,
    quiet: bool,
    keep_running: bool,
    checker: Checker | None,
    folder: str,
) -> int:
    if not quiet:
        print(
            f"gpudash: diagnosing {config.workload} ({display(config.job or ())}): {warmup_s:g} s of warm-up "
            f"after its first step, then a window of its own steps until they settle; the verdict on stdout",
            file=sys.stderr,
            flush=True,
        )
    code, recording = measuring_run(
        config,
        "diagnose",
        quiet,
        keep_running,
        folder=folder,
        duration_s=warmup_s + DIAGNOSE_CAP_S,
        diagnose_after_s=warmup_s,
    )
    events = recording.diagnoses if recording is not None else []
    session = recording.session if recording is not None else None
    ended_first = False
    if not events and isinstance(session, JobSession) and session.exit_code is not None and session.start_error is None:
        ran = session.ran_diagnosis()  # it ended before its window was asked for: over the steps it ran
        if isinstance(ran, str):
            said = recording is not None and recording.recorder is None and bool(session.exit_code)
            if not said:  # a job that failed before it was recorded: the run's own line said so
                print(f"gpudash: error: {ran}", file=sys.stderr)
            return code or int(ExitCode.FAILED)
        events, ended_first = [ran], True  # the verdict, and the job's own exit status (0 where it ended well)
    if not events:
        return code or int(ExitCode.FAILED)
    event = events[0]
    if event.kind == EventKind.ERROR:
        print(f"gpudash: error: {event.message}", file=sys.stderr)
        return code or int(ExitCode.FAILED)
    judged = judgement_of(event)
    if judged is None:  # the session judges every window it measured: a programming error, not the user's
        raise RuntimeError(f"a diagnosis event without its judgement: {event.message}")
    checks: list[Check] = []
    if checker is not None and not (ended_first and code):  # a job that failed is not run again
        started_s = recording.started_s if recording is not None else None
        ran_s = event.time_s - (started_s or 0.0)
        checks = checker(judged.evidence, judged.verdict, ran_s, Path(folder))
    document, lines = judged.answer(checks)
    if as_json:
        print(json.dumps({**diagnosis_head(event, config, judged), **document}, indent=2))
    else:
        print("\n".join([judged.checked_line(document), *lines]))
    return code  # the job's own status where it ended by itself (a failure, a Ctrl-C): 0 where the diagnosis ended it
