"""Whole lines out, for a recording's CSV: to a file descriptor, one write each, a failed write (a
full disk) cut back to the last complete line; or to a text stream (stdout), flushed after each.
A line that cannot be written raises ``RecordWriteError``."""

from __future__ import annotations

import errno
import os
from typing import TextIO


class RecordWriteError(OSError):
    """Writing the CSV failed (e.g. the disk is full); the file holds only complete lines."""


class FdWriter:
    """Whole lines to a file descriptor: one write each; a failed write is cut back."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = str(path)
        self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self.offset = 0

    def write(self, text: str) -> None:
        data = text.encode("utf-8")
        view = memoryview(data)
        written = 0
        try:
            while written < len(data):
                n = os.write(self.fd, view[written:])
                if n <= 0:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                written += n
        except OSError as exc:
            if written:
                try:
                    os.ftruncate(self.fd, self.offset)
                    os.lseek(self.fd, self.offset, os.SEEK_SET)
                except OSError:
                    pass
            raise RecordWriteError(exc.errno, f"cannot write {self.path}: {exc.strerror or exc}") from exc
        self.offset += written

    def close(self) -> None:
        if self.fd >= 0:
            try:
                os.close(self.fd)
            finally:
                self.fd = -1


class StreamWriter:
    """Whole lines to a text stream (stdout), flushed after each."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except OSError as exc:  # BrokenPipeError included
            if isinstance(exc, BrokenPipeError):
                try:  # the reader went away: keep Python's exit-time flush quiet
                    devnull = os.open(os.devnull, os.O_WRONLY)
                    os.dup2(devnull, self.stream.fileno())
                    os.close(devnull)
                except (OSError, ValueError, AttributeError):
                    pass
            raise RecordWriteError(exc.errno, f"cannot write the CSV: {exc.strerror or exc}") from exc

    def close(self) -> None:
        try:
            self.stream.flush()
        except OSError:
            pass
