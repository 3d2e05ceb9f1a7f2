"""The one bounded reader of every CSV gpudash reads back (recordings, sweeps, tracks): records of
at most ``MAX_RECORD`` characters, control characters stripped as the text is read, a bad record
handed to its caller's policy (replay skips and counts it; report and ``read_table`` refuse it)."""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Callable, Iterator
from typing import TextIO

from gpudash.core.textfmt import strip_controls

CHUNK = 256 << 10  # characters read (and parsed) at a time: about 1 000 rows
MAX_RECORD = 1 << 20  # a record longer than this (or a quote never closed) is not a row: bad
BadRecord = Callable[[int, str], None]  # what a reader does with a bad record: (line, why: "is longer …")


class UnreadableCsv(ValueError):
    """A CSV file ``read_table`` refuses: the message is one line naming the file (and the line)."""


def open_csv(path: str | os.PathLike[str]) -> TextIO:
    """A CSV file opened as every reader here opens one: UTF-8 (a byte that is not reads as
    U+FFFD), line endings as they are (``csv`` needs them)."""
    return open(path, encoding="utf-8", errors="replace", newline="")


def _complete_prefix(text: str) -> int:
    """The length of the longest prefix of ``text`` made of whole CSV records: it ends with a
    newline outside quotes (0: no record is complete yet). Linear in ``len(text)``."""
    last = text.rfind("\n")
    if last < 0:
        return 0
    if text.count('"', 0, last) % 2 == 0:  # the common case: no quote open at the last newline
        return last + 1
    end, pos, odd = 0, 0, False
    while (nl := text.find("\n", pos, last + 1)) >= 0:
        odd ^= bool(text.count('"', pos, nl) % 2)
        pos = nl + 1
        if not odd:
            end = pos
    return end


def _blank(cells: list[str]) -> bool:
    """An empty line (or one of spaces): no record at all."""
    return not cells or (len(cells) == 1 and not cells[0].strip())


class CsvRecords:
    """The records of an open CSV file (``open_csv``), read incrementally as a hostile file.

    ``read()`` reads a chunk and returns the records it completed as (line number, cells), parsed
    as they are iterated (one at a time: a chunk's thousand rows are never all held as lists);
    a record still being written (no newline yet, or an open quote) is kept back until it is
    whole. Control
    characters are stripped as the text is read (``strip_controls``; a quoted cell keeps its
    line feeds), so no cell can carry an escape sequence. A record over ``MAX_RECORD``
    characters, or with a field over ``csv``'s field limit, is handed to ``on_bad`` (which may
    raise) and skipped; blank lines are skipped."""

    def __init__(self, f: TextIO, on_bad: BadRecord) -> None:
        self._f = f
        self._on_bad = on_bad
        self._pending = ""  # text after the last whole record
        self._skipping = False  # dropping an overlong record until its newline
        self._lines = 0  # lines before ``_pending``
        self.at_end = False  # the last read reached the end of the file (as it was then)
        self.chars_read = 0  # progress only

    @property
    def has_pending(self) -> bool:
        """Text after the last whole record: a row without its newline (yet)."""
        return bool(self._pending.strip())

    def unfinished(self) -> str | None:
        """Why the text after the last whole record is not one, at the end of a file ("line 9
        has no newline …"); None when there is none."""
        if not self.has_pending:
            return None
        if "\n" in self._pending:
            return f"line {self._lines + 1} opens a quote it never closes"
        return f"line {self._lines + 1} has no newline (truncated while being written?)"

    def read(self, size: int = CHUNK) -> Iterator[tuple[int, list[str]]]:
        """Read up to ``size`` more characters (now); the records they completed (as iterated)."""
        chunk = self._f.read(size)
        self.at_end = len(chunk) < size
        self.chars_read += len(chunk)
        self._pending += strip_controls(chunk, keep_newlines=True)
        if self._skipping and not self._skip_rest():
            return iter(())
        cut = _complete_prefix(self._pending)
        if cut == 0 and len(self._pending) > MAX_RECORD:  # no end in sight (or a stray quote): one bad record
            line = self._lines + 1
            self._lines += self._pending.count("\n")
            self._pending, self._skipping = "", True
            self._on_bad(line, f"is longer than {MAX_RECORD >> 20} MiB")
            return iter(())
        done, self._pending = self._pending[:cut], self._pending[cut:]
        return self._parse(done)

    def finish(self) -> Iterator[tuple[int, list[str]]]:
        """The whole file is read: a last record without its newline is complete after all."""
        rest, self._pending = self._pending, ""
        return self._parse(rest + "\n") if rest.strip() and not self._skipping else iter(())

    def _skip_rest(self) -> bool:
        """Drop the rest of an overlong record, up to its newline; whether that was found."""
        nl = self._pending.find("\n")
        if nl < 0:
            self._pending = ""
            return False
        self._pending, self._skipping = self._pending[nl + 1 :], False
        self._lines += 1
        return True

    def _parse(self, text: str) -> Iterator[tuple[int, list[str]]]:
        """The records of ``text`` (whole records), counted in lines now, parsed as iterated."""
        first, self._lines = self._lines + 1, self._lines + text.count("\n")
        return self._records(csv.reader(io.StringIO(text)), first)

    def _records(self, rows: Iterator[list[str]], first: int) -> Iterator[tuple[int, list[str]]]:
        while True:
            line = first + rows.line_num  # type: ignore[attr-defined]  # a csv.reader, typed as its rows
            try:
                cells = next(rows)
            except StopIteration:
                return
            except csv.Error as exc:  # a field over csv's field limit, mostly
                self._on_bad(line, f"is not CSV: {exc}")
                continue
            if not _blank(cells):
                yield line, cells


def _open_table(path: str | os.PathLike[str]) -> TextIO:
    try:
        return open_csv(path)
    except FileNotFoundError:
        raise UnreadableCsv(f"no such file: {path}") from None
    except IsADirectoryError:
        raise UnreadableCsv(f"{path} is a directory, not a CSV") from None
    except OSError as exc:
        raise UnreadableCsv(f"cannot read {path}: {exc.strerror or exc}") from None


def read_table(
    path: str | os.PathLike[str], check_header: Callable[[list[str]], None] | None = None
) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """A whole CSV file, strictly: its header and each record after it as (line number, cells),
    each with as many cells as the header. Raises ``UnreadableCsv`` for the first thing wrong;
    ``check_header`` may refuse the header before the rest is read."""

    def refuse(line: int, why: str) -> None:
        raise UnreadableCsv(f"{path}: line {line} {why}")

    header: list[str] | None = None
    rows: list[tuple[int, list[str]]] = []
    with _open_table(path) as f:
        records = CsvRecords(f, refuse)
        while not records.at_end:
            for line, cells in records.read():
                if header is None:
                    header = cells
                    if check_header is not None:
                        check_header(header)
                elif len(cells) != len(header):
                    raise UnreadableCsv(f"{path}: line {line} has {len(cells)} of {len(header)} fields (truncated?)")
                else:
                    rows.append((line, cells))
        unfinished = records.unfinished()
        if unfinished:
            raise UnreadableCsv(f"{path}: {unfinished}")
    if header is None:
        raise UnreadableCsv(f"{path} is empty")
    return header, rows
