"""An exception nothing in the dashboard caught: its traceback to a log file, one line to the user.

Textual would print a full-screen traceback and leave the exit status to the caller; gpudash
exits with status 1 and says, in one line, what failed and where the traceback is.
"""

from __future__ import annotations

import os
import platform
import tempfile
import traceback
from datetime import datetime


def crash_log_path() -> str:
    """``$TMPDIR/gpudash-<pid>-crash.log``."""
    return os.path.join(tempfile.gettempdir(), f"gpudash-{os.getpid()}-crash.log")


def write_crash_log(error: BaseException, context: str = "") -> str | None:
    """The traceback, with the versions that matter, appended to ``crash_log_path()``; the path
    (None when it cannot be written: the one line then says so)."""
    from gpudash.recording.metadata import gpudash_version

    path = crash_log_path()
    try:
        import textual

        textual_version = getattr(textual, "__version__", "?")
    except ImportError:  # pragma: no cover - the dashboard runs on it
        textual_version = "?"
    head = (
        f"gpudash {gpudash_version()} · Python {platform.python_version()} · textual {textual_version} · "
        f"{datetime.now().astimezone().isoformat(timespec='seconds')}\n" + (f"{context}\n" if context else "")
    )
    try:
        with open(path, "a", encoding="utf-8") as f:
            f.write(head + "".join(traceback.format_exception(error)) + "\n")
    except OSError:
        return None
    return path


def crash_line(error: BaseException, log_path: str | None) -> str:
    """ "gpudash: error: the dashboard failed: TypeError: … (traceback in /tmp/gpudash-12-crash.log)"."""
    first = (str(error).strip().splitlines() or [""])[0][:200]
    what = f"{type(error).__name__}: {first}" if first else type(error).__name__
    where = f"traceback in {log_path}" if log_path else "its traceback could not be written"
    return f"gpudash: error: the dashboard failed: {what} ({where})"


def report_crash(error: BaseException, context: str = "") -> str:
    """Write the log; the one line for the terminal."""
    return crash_line(error, write_crash_log(error, context))
