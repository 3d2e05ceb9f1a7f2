"""A captured job's output for the dashboard's pane: read as its file grows, a line at a time, made
safe to show (``safe_line``) and cut to ``MAX_LINE`` characters (``cut``). Torch- and Textual-free.

The file stays bounded whatever the job prints: what the pane has read is freed from it at once (a
hole punched in the file, ``fallocate``; where the file system cannot, the file is emptied each
time the pane has caught up with it past ``EMPTY_AT``), and when the job writes faster than the
pane reads, what is more than ``BACKLOG_MAX`` behind is skipped, and the pane says how much. The
pane keeps its own last lines (``gpudash.job.session.OUTPUT_LINES``).
"""

from __future__ import annotations

import codecs
import ctypes
import os
import re
import time
from typing import Any

from gpudash.core.textfmt import strip_controls

MAX_LINE = 4096  # characters of a line kept for the pane
OUTPUT_POLL_S = 0.05  # how often the captured output's file is read as it grows
CHUNK = 1 << 16
PUNCH_EVERY = 1 << 20  # the read part of the file is freed each time this much more was read
BACKLOG_MAX = 64 << 20  # unread output beyond this is skipped (the pane shows the last lines anyway)
BACKLOG_KEEP = 1 << 20  # ... down to this much
EMPTY_AT = 16 << 20  # without holes: the file is emptied once the pane has read this much and caught up
FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE = 0x01, 0x02


def read_output(session: Any) -> None:
    """The job's output into the session's ``output`` (``gpudash.job.session.JobSession``), line by
    line, as its file grows: a carriage return (a progress bar) replaces the line being written,
    escape sequences are dropped; the file's read part is freed as it goes."""
    path = session.process.output_path
    assert path is not None
    capture = _Capture(session)
    with open(path, "r+b", buffering=0) as f:
        while True:
            chunk = f.read(CHUNK)
            if not chunk:
                capture.caught_up(f)
                if session.process.poll() is not None or session.left:
                    chunk = f.read(CHUNK)  # what it wrote last
                    if not chunk:
                        break
                else:
                    time.sleep(OUTPUT_POLL_S)
                    continue
            capture.take(chunk)
            capture.bound(f)
    capture.finish()
    if not session.left:
        session.process.remove_output()


class _Capture:
    """The reading of one job's output file: lines into the session, the file kept bounded."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self.freed = 0  # the file's bytes before this offset are a hole
        self.can_punch = True

    def take(self, chunk: bytes) -> None:
        s = self.session
        text = s.partial + self.decoder.decode(chunk)
        *lines, partial = text.split("\n")
        s.partial = partial.rsplit("\r", 1)[-1][-MAX_LINE:]  # a progress bar's latest draw
        s.output.extend(safe_line(cut(line)) for line in lines)
        s.output_version += 1

    def bound(self, f: Any) -> None:
        """Free what was read; skip ahead when the job writes faster than the pane reads."""
        at = f.tell()
        size = os.fstat(f.fileno()).st_size
        if size - at > BACKLOG_MAX:
            skip = size - at - BACKLOG_KEEP
            f.seek(at + skip)
            self.session.partial = ""
            self.decoder.reset()
            mib = skip / 2**20
            self.session.output.append(f"[… {mib:,.0f} MiB of the job's output not shown: it came faster than read]")
            at += skip
        if self.can_punch and at - self.freed >= PUNCH_EVERY:
            upto = at - at % 4096
            if _punch(f.fileno(), upto):
                self.freed = upto
            else:
                self.can_punch = False

    def caught_up(self, f: Any) -> None:
        """Where holes cannot be punched: the file emptied once the pane has read it all."""
        if not self.can_punch and f.tell() >= EMPTY_AT:
            os.ftruncate(f.fileno(), 0)  # the job's file is O_APPEND: it writes on at the new end
            f.seek(0)

    def finish(self) -> None:
        s = self.session
        if s.partial:
            s.output.append(safe_line(s.partial))
            s.partial = ""
            s.output_version += 1


def _punch(fd: int, length: int) -> bool:
    """A hole over the file's first ``length`` bytes (its blocks freed, its size kept); False where
    the file system cannot."""
    try:
        fallocate = ctypes.CDLL(None, use_errno=True).fallocate
    except (AttributeError, OSError):
        return False
    fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    return bool(fallocate(fd, FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE, 0, length) == 0)


def cut(line: str) -> str:
    """A line of at most ``MAX_LINE`` characters kept (its beginning), what was cut said: the
    pane's memory stays bounded whatever the job prints."""
    if len(line) <= MAX_LINE:
        return line
    return f"{line[:MAX_LINE]} … [{len(line) - MAX_LINE:,} more characters not shown]"


_ESCAPES = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")


def safe_line(text: str) -> str:
    """A line of the job's output as a pane can show it: what follows its last carriage return,
    without escape sequences or other control characters."""
    return strip_controls(_ESCAPES.sub("", text.rsplit("\r", 1)[-1]).expandtabs())
