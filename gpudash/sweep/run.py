"""``gpudash sweep``: every family of the plan measured in turn, its rows written as they come.

Never imports torch (the workload runs in the child), textual or matplotlib (the plot is
``gpudash.sweep.report``'s, imported when written). The arguments are ``gpudash.sweep.arguments``';
the plan ``gpudash.sweep.plan``'s; each family's rounds ``gpudash.sweep.rounds``' (on the session
driver, ``gpudash.sweep.driver``); the figures ``gpudash.sweep.results``'; the files
``gpudash.sweep.report``'s.

Exit status: 0 done, 1 the workload crashed (or nothing could be measured), 130 SIGINT or
SIGTERM. In every case the files hold every finished configuration × repeat.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from gpudash.core.protocol import ExitCode, RunConfig
from gpudash.recording.interrupt import Interrupted
from gpudash.sweep.arguments import build_parser
from gpudash.sweep.command import parse_plan
from gpudash.sweep.driver import SweepStopped
from gpudash.sweep.plan import SweepPlan, plan_from_args
from gpudash.sweep.progress import SweepProgress
from gpudash.sweep.rounds import FamilyRun
from gpudash.sweep.window import Clock

if TYPE_CHECKING:  # pragma: no cover
    from gpudash.host.session import EngineSession
    from gpudash.sweep.report import SweepReport


def _say(text: str) -> None:
    """A diagnostic line on stderr."""
    print(f"gpudash: {text}", file=sys.stderr, flush=True)


def _session_for(plan: SweepPlan, family: str) -> Callable[[RunConfig], EngineSession]:
    """Make a family's session, its workload log in the output directory."""
    from gpudash.host.session import EngineSession

    return lambda config: EngineSession(config, log_path=plan.out_dir / f"sweep-{family}.log")


def _measure_all(plan: SweepPlan, report: SweepReport, progress: SweepProgress) -> tuple[str, ExitCode]:
    """Every family in turn; returns (status, exit code). The report gets every finished row."""
    clock = Clock(plan.settings.max_minutes)
    with Interrupted() as interrupted:
        try:
            for fp in plan.families:
                run = FamilyRun(
                    fp,
                    plan.settings,
                    session_for=_session_for(plan, fp.family),
                    interrupted=interrupted,
                    progress=progress,
                    clock=clock,
                    recorder=report,
                )
                try:
                    run.run()
                finally:
                    report.add_family(fp, run.results, run.notes)
        except SweepStopped as exc:
            return exc.status, exc.code
        except KeyboardInterrupt:  # a second Ctrl-C while the child was stopping
            return "interrupted by SIGINT", ExitCode.INTERRUPTED
    return "done", ExitCode.OK


def run_sweep(plan: SweepPlan, *, quiet: bool = False, as_json: bool = False) -> int:
    """Measure ``plan`` and write ``sweep.csv`` (row by row), ``sweep.json``, ``sweep.md`` and the
    plots into ``plan.out_dir``; returns the exit status (an ``ExitCode``); ``as_json``: the results on stdout."""
    from gpudash.sweep.csv_rows import summary_row
    from gpudash.sweep.report import SweepReport

    started, s = time.monotonic(), plan.settings
    planned_min = plan.planned_s / 60
    if planned_min > s.max_minutes:
        _say(
            f"the planned {plan.units} measurements take about {planned_min:.0f} min: "
            f"those after --max-minutes {s.max_minutes:g} are left out"
        )
    try:
        report = SweepReport(plan)
    except OSError as exc:
        _say(f"error: cannot write in {plan.out_dir}: {exc.strerror or exc}")
        return ExitCode.FAILED
    with SweepProgress(quiet, plan.units) as progress:
        try:
            status, code = _measure_all(plan, report, progress)
        except OSError as exc:  # writing a row failed (a full disk)
            status, code = f"write failed: {exc.strerror or exc}", ExitCode.FAILED
    if code == ExitCode.OK and not any(not r.error for r in report.results):
        status, code = "nothing could be measured", ExitCode.FAILED
    written = report.finish(status, code, time.monotonic() - started)
    _final_lines(report, status, code, written, quiet)
    if as_json:  # sweep.json's document, with each configuration's summary row (sweep.csv's)
        rows = [summary_row(c) for _, summaries in report.summaries for c in summaries]
        print(json.dumps({**report.meta, "configurations": rows}, indent=2, default=str), flush=True)
    return code


def _final_lines(report: SweepReport, status: str, code: ExitCode, written: list[str], quiet: bool) -> None:
    """The last lines on stderr: a failure always; unless quiet, the summaries and the files."""
    if code == ExitCode.FAILED:
        _say(f"error: {status}")
    if quiet:
        return
    for line in report.summary_lines():
        _say(line)
    if code != ExitCode.FAILED:
        _say(status)
    for note in report.notes:
        _say(note)
    _say(f"wrote {', '.join(written)} in {report.out_dir}")


def main(argv: list[str]) -> int:
    """``gpudash sweep ...``: check the arguments (``gpudash.sweep.plan``), then run the sweep."""
    parsed = parse_plan(argv, build_parser(), plan_from_args)
    if parsed is None:
        return ExitCode.USAGE
    args, plan = parsed
    for line in plan.skipped:
        print(f"gpudash: skipping {line}", file=sys.stderr, flush=True)
    return run_sweep(plan, quiet=args.quiet, as_json=args.json)
