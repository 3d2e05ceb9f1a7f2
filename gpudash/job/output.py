"""A captured job's output for the dashboard's pane: read as its file grows, a line at a time, made
safe to show (``safe_line``) and cut to ``MAX_LINE`` characters (``cut``). Torch- and Textual-free."""

from __future__ import annotations

import re
import time
from typing import Any

from gpudash.core.textfmt import strip_controls

MAX_LINE = 4096  # characters of a line kept for the pane
OUTPUT_POLL_S = 0.05  # how often the captured output's file is read as it grows


def read_output(session: Any) -> None:
    """The job's output into the session's ``output`` (``gpudash.job.session.JobSession``), line by
    line, as its file grows: a carriage return (a progress bar) replaces the line being written,
    escape sequences are dropped."""
    import codecs

    path = session.process.output_path
    assert path is not None
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    with open(path, "rb") as f:
        while True:
            chunk = f.read(1 << 16)
            if not chunk:
                if session.process.poll() is not None or session.left:
                    chunk = f.read(1 << 16)  # what it wrote last
                    if not chunk:
                        break
                else:
                    time.sleep(OUTPUT_POLL_S)
                    continue
            text = session.partial + decoder.decode(chunk)
            *lines, partial = text.split("\n")
            session.partial = partial.rsplit("\r", 1)[-1][-MAX_LINE:]  # a progress bar's latest draw
            session.output.extend(safe_line(cut(line)) for line in lines)
            session.output_version += 1
    if session.partial:
        session.output.append(safe_line(session.partial))
        session.partial = ""
        session.output_version += 1
    if not session.left:
        session.process.remove_output()


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
