"""How a workload process's end is told: its exit status in words and its log's last line."""

from __future__ import annotations

import os
import signal


def exit_reason(exitcode: int | None) -> str:
    """'exited with code 1', 'killed by SIGKILL', ..."""
    if exitcode is None:
        return "is still running"
    if exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exited with code {exitcode}"


def last_log_line(path: str | os.PathLike[str] | None, limit: int = 200, start: int = 0) -> str:
    """The last non-empty line of a log file after byte ``start`` ('' if none)."""
    if not path:
        return ""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(start, size - 8192))
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return ""
    for line in reversed(lines):
        if line.strip():
            line = line.strip()
            return line if len(line) <= limit else line[: limit - 1] + "…"
    return ""
