"""The dashboard's entry points: ``gpudash`` over a live run (``run_dashboard``), ``gpudash
replay`` (``run_replay``), and the app run over a source until the user quits (``run_app``, also
``gpudash watch``'s). Each returns the exit status.

Torch is never imported here: the engine's session and the replay's reader are imported when
called, and the first frame does not wait for the child's torch import.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Callable, Sequence

from gpudash.arguments.config import UserConfig
from gpudash.core.protocol import EngineSource, ExitCode, RunConfig
from gpudash.tui.app import GpuDashApp
from gpudash.tui.crash import report_crash
from gpudash.tui.job_view import run_job

TRACE_DIR = "gpudash-traces"  # a live run's profiler windows go here (in the working directory)


def prepare_for_child_processes() -> None:
    """Start multiprocessing's resource tracker while ``sys.stderr`` is still the real one.

    Inside ``App.run()`` Textual swaps ``sys.stderr`` for an object whose ``fileno()`` is -1;
    the tracker, started lazily by the engine's first ``Queue``, passes that fd to its own
    process and fails with "bad value(s) in fds_to_keep". Call this before ``app.run()``.
    """
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()


def run_dashboard(config: RunConfig, user_config: UserConfig | None = None) -> int:
    """``gpudash``: the live dashboard over the engine. Returns the exit code.

    Profiler windows (T) write into ``config.trace_dir``, by default ``./gpudash-traces`` (the
    engine creates it when the first window is taken)."""
    from gpudash.host.session import EngineSession

    prepare_for_child_processes()
    config = with_trace_dir(config)
    if config.job:  # the user's own command (gpudash -- CMD): its status where it ended by itself
        return run_job(config, user_config, run_app)
    return run_app(EngineSession(config), user_config)  # the child's output goes to the session's log file


def with_trace_dir(config: RunConfig, cwd: str | None = None) -> RunConfig:
    """``config`` with a trace directory: its own, else ``<cwd>/gpudash-traces``."""
    if config.trace_dir is not None:
        return config
    return dataclasses.replace(config, trace_dir=os.path.join(os.path.abspath(cwd or os.getcwd()), TRACE_DIR))


def run_app(
    source: EngineSource,
    user_config: UserConfig | None = None,
    headless: bool = False,
    *,
    app_class: Callable[..., GpuDashApp] = GpuDashApp,
    what: str = "the dashboard",
) -> int:
    """``app_class`` (the dashboard, or watch's) over ``source`` until the user quits, the source stopped
    however it ends; an exception (building the app, or in it) is one line naming its log, status 1."""
    try:
        save_dir = user_config.get("record_dir") if user_config is not None else None  # screenshots too
        app = app_class(source, save_dir=save_dir, user_config=user_config)
        code = app.run(headless=headless)
        failed = app.crash_line
    except Exception as exc:  # noqa: BLE001 - one line, the traceback in the log
        code, failed = None, report_crash(exc, f"building {what}")
    finally:
        source.stop()
    if failed:
        print(failed, file=sys.stderr, flush=True)
        return ExitCode.FAILED
    return int(code or 0)


def run_replay(path: str, follow: bool, user_config: UserConfig | None = None, nodes: Sequence[str] = ()) -> int:
    """``gpudash replay PATH [NODE.csv …]``: the dashboard over a recorded CSV, with the other nodes'
    ranks of the same torchrun run joined in. Returns the exit code."""
    from gpudash.recording.replay import NotARecording, ReplaySource
    from gpudash.recording.replay_world import joined_ranks

    # `gpudash replay` (cli.commands.replay.replay) has already checked that PATH is a readable file;
    # a file gone since (or a directory) still ends here as an OSError with a message.
    try:
        source = ReplaySource(path, follow=follow, joined=joined_ranks(path, nodes))
        source.start()
    except OSError as exc:
        print(f"gpudash replay: cannot read {path}: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    except NotARecording as exc:  # empty, header only, or another program's CSV
        print(f"gpudash: error: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    return run_app(source, user_config)
