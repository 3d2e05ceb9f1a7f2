"""``ReplaySource``: a recorded CSV as an ``EngineSource``, for ``gpudash replay``.

Textual-free and torch-free. The file is treated as hostile: ``start()`` refuses one that is
not a gpudash recording (``NotARecording``: empty, header only, or missing columns), and the
metadata beside it is checked (``gpudash.recording.sidecar``) and ignored, with the reason, when bad.

The rows are parsed off the caller's thread: from the first ``poll()`` a reader thread turns
the file into messages in batches on a bounded queue, and ``poll()`` hands out at most
``POLL_MAX_MESSAGES`` at a time, so a dashboard that ingests them on its own thread stays
responsive over a file of any size (``info.loading`` says how far the reading is). With
``follow`` the thread keeps reading rows as they are appended. ``RecordingReader`` is the
parsing itself, synchronous, over the bounded reader ``gpudash report`` reads with too
(``csvread.CsvRecords``): a row still being written (no newline yet, or an open quote) is
kept back until it is complete; a malformed row, one over 1 MiB or with a field over ``csv``'s
limit is skipped and counted; no cell keeps a control character. Controls make no sense on a
recording: ``send()`` raises ``ReadOnlyError``.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Iterable, Sequence
from typing import Any, TextIO

from gpudash.core.protocol import Control, GpuInfo, Message, RankSample, RunConfig, SourceInfo
from gpudash.core.textfmt import strip_controls
from gpudash.recording.csvformat import ROW_KINDS, RowParser, missing_columns
from gpudash.recording.csvread import CHUNK, CsvRecords, open_csv
from gpudash.recording.replay_sites import RecordedSites
from gpudash.recording.sidecar import (
    UNKNOWN_CONFIG,
    Sidecar,
    config_from_metadata,
    gpu_info_from_metadata,
    read_sidecar,
)

POLL_MAX_MESSAGES = 6000  # per poll(): about 40 ms of the dashboard's ingest
QUEUED_BATCHES = 16  # parsed chunks the reader may hold before it waits for poll()
FOLLOW_WAIT_S = 0.2  # how often a followed file is checked for new rows


class ReadOnlyError(RuntimeError):
    """A control was sent to a replay."""


class NotARecording(ValueError):
    """The file is not a gpudash recording (or has nothing in it): one line saying why."""


class RecordingReader:
    """A recording's rows as messages, read incrementally from an open text file (``open_csv``)
    by the one bounded reader, ``CsvRecords``: a bad record is skipped and counted (before the
    header: ``NotARecording``)."""

    def __init__(self, f: TextIO, name: str) -> None:
        self.name = strip_controls(name)
        self.records = CsvRecords(f, self._bad)  # where the reading stands: at_end, chars_read
        self.fields: list[str] | None = None
        self._kind_at = 0  # where row_kind is in the header
        self._parser: RowParser | None = None
        self.rows_read = 0
        self.bad_rows = 0

    def read(self, size: int = CHUNK) -> list[Message]:
        """Parse up to ``size`` more characters; the messages of the rows completed."""
        return self._messages(self.records.read(size))

    def finish(self) -> list[Message]:
        """The whole file is read: a last row without its newline is complete after all."""
        return self._messages(self.records.finish())

    def _bad(self, line: int, why: str) -> None:
        if self.fields is None:
            raise NotARecording(f"{self.name}: not a gpudash recording (line {line} {why})")
        self.bad_rows += 1

    def _messages(self, records: Iterable[tuple[int, list[str]]]) -> list[Message]:
        out: list[Message] = []
        for _, cells in records:
            if self.fields is None:
                self._check_header(cells)
            else:
                out.extend(self._row(cells))
        return out

    def _check_header(self, cells: list[str]) -> None:
        missing = missing_columns(cells)
        if missing:
            shown = ", ".join(missing[:6]) + (f" and {len(missing) - 6} more" if len(missing) > 6 else "")
            raise NotARecording(f"{self.name}: not a gpudash recording (missing columns: {shown})")
        self.fields = cells
        self._kind_at = cells.index("row_kind")
        self._parser = RowParser(cells)

    def _row(self, cells: list[str]) -> list[Message]:
        if self._parser is None or len(cells) != len(self.fields or ()) or cells[self._kind_at] not in ROW_KINDS:
            self.bad_rows += 1
            return []
        try:
            msgs = self._parser.messages(cells)
        except (ValueError, KeyError, TypeError, ArithmeticError):
            self.bad_rows += 1
            return []
        self.rows_read += 1
        return msgs


class ReplaySource:
    """Messages of a recorded CSV, read by a thread: all of it, or (``follow``) as it grows."""

    def __init__(self, path: str | os.PathLike[str], follow: bool = False, joined: Sequence[RankSample] = ()) -> None:
        self.path = str(path)
        self.follow = follow
        self._joined = list(joined)  # other nodes' rank rows on this file's clock (replay_world), oldest first
        self.sidecar = Sidecar()
        self.metadata: dict[str, Any] = {}
        self.config: RunConfig = UNKNOWN_CONFIG
        self.gpu_info = GpuInfo(available=False, unavailable="replay not started")
        self._f: TextIO | None = None
        self._reader: RecordingReader | None = None
        self._size = 0
        self._batches: queue.Queue[list[Message]] = queue.Queue(maxsize=QUEUED_BATCHES)
        self._carry: list[Message] = []  # a batch poll() has begun to hand out
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._done = False  # the reader thread has finished (without follow: the whole file is read)
        self._caught_up = False  # the reader has been to the end of the file once
        self._error: Exception | None = None  # what stopped the reader thread, told once by poll()
        self._sites = RecordedSites({})

    # -- EngineSource ---------------------------------------------------------------------------
    @property
    def info(self) -> SourceInfo:
        return SourceInfo(
            replay=True,
            path=strip_controls(self.path),
            follow=self.follow,
            bad_rows=self.bad_rows,
            loading=self.loading,
            notes=(self.sidecar.note,) if self.sidecar.note else (),
        )

    @property
    def rows_read(self) -> int:
        return self._reader.rows_read if self._reader else 0

    @property
    def bad_rows(self) -> int:
        return self._reader.bad_rows if self._reader else 0

    @property
    def loading(self) -> str | None:
        """ "reading 37% · 74 000 rows" until the file's rows (as they were at the start) are all
        handed out; None after."""
        if self._reader is None or (self._caught_up and self._drained):
            return None
        share = f"{min(99, 100 * self._reader.records.chars_read // max(1, self._size))}% · " if self._size else ""
        return f"reading {share}{self.rows_read:,} rows".replace(",", " ")

    def start(self) -> None:
        """Open and check the file, read its metadata (the rows are read from the first ``poll()``).

        Raises OSError when the file cannot be read and ``NotARecording`` when it is not a
        gpudash recording (without ``follow``: also when it has no rows); the file is closed then."""
        if self._f is not None or self._done:
            return
        self._f = open_csv(self.path)
        try:
            self._size = os.fstat(self._f.fileno()).st_size
            self._reader = RecordingReader(self._f, os.path.basename(self.path))
            first = self._read_header()
        except BaseException:
            self._done = True  # nothing will come: not alive
            self.stop()
            raise
        self.sidecar = read_sidecar(self.path)
        self.metadata = self.sidecar.data
        why_none = self.sidecar.note or "no metadata file beside the CSV"
        self.gpu_info = gpu_info_from_metadata(self.metadata, why_none)
        self.config = config_from_metadata(self.metadata)
        self._sites = RecordedSites(self.metadata)  # each configuration's sync table, after its first sample
        if first:
            self._batches.put(self._sites.after_samples(first))

    def _start_reading(self) -> None:
        """The reader thread, from the first ``poll()`` on: until then (``gpudash replay`` checks the
        file before the dashboard exists) it would only slow the dashboard's first frame down."""
        if self._thread is None and self._reader is not None and not self._stop.is_set() and not self._done:
            self._thread = threading.Thread(target=self._run, name=f"replay {self.path}", daemon=True)
            self._thread.start()

    def _read_header(self) -> list[Message]:
        """Read until the header is complete and checked; the messages of any rows read with it."""
        reader, out = self._reader, []
        assert reader is not None
        while reader.fields is None:
            out += reader.read()
            if reader.fields is None and reader.records.at_end:
                out += reader.finish()  # a header without its newline
                if reader.fields is None:
                    if self.follow:  # a file just created: its header is still to come
                        return out
                    raise NotARecording(f"{reader.name} is empty: not a gpudash recording")
        if not self.follow and reader.records.at_end and not out and not reader.records.has_pending:
            raise NotARecording(f"{reader.name} has only its header: nothing was recorded")
        return out

    def send(self, control: Control) -> None:
        raise ReadOnlyError("replay is read-only: controls do not apply to a recording")

    def poll(self) -> list[Message]:
        """Up to ``POLL_MAX_MESSAGES`` messages, oldest first; never blocks. Raises, once, what
        stopped the reader (a followed file whose header turned out not to be a recording's)."""
        self._start_reading()
        out = self._carry
        self._carry = []
        while len(out) < POLL_MAX_MESSAGES:
            try:
                out.extend(self._batches.get_nowait())
            except queue.Empty:
                break
        out, self._carry = out[:POLL_MAX_MESSAGES], out[POLL_MAX_MESSAGES:]
        if not out and self._error is not None:
            error, self._error = self._error, None
            raise error
        return out

    @property
    def _drained(self) -> bool:
        return not self._carry and self._batches.empty()

    @property
    def alive(self) -> bool:
        """Without ``follow``: until every row has been handed out; with it, until stopped."""
        if self._reader is None:
            return False
        if self.follow:
            return not self._stop.is_set() and (not self._done or not self._drained)
        return not (self._done and self._drained)

    def restart(self) -> None:
        raise ReadOnlyError("replay is read-only: nothing to restart")

    def stop(self) -> None:
        """Stop the reader thread and close the file. Idempotent."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)
        if self._f is not None:
            self._f.close()
            self._f = None

    # -- the reader thread --------------------------------------------------------------------------
    def _run(self) -> None:
        reader = self._reader
        assert reader is not None
        try:
            sites = self._sites
            while not self._stop.is_set():
                batch = reader.read()
                if reader.records.at_end and not self.follow:
                    self._put(self._join(sites.after_samples(batch + reader.finish()), True))
                    break
                self._put(self._join(sites.after_samples(batch), False))
                if reader.records.at_end:
                    self._caught_up = True
                    self._stop.wait(FOLLOW_WAIT_S)
        except Exception as exc:  # noqa: BLE001 - told by poll(), the dashboard stays up
            self._error = exc
        finally:
            self._caught_up = self._done = True

    def _join(self, batch: list[Message], last: bool) -> list[Message]:
        """The batch with the other nodes' rank rows up to its last time (``last``: all that remain)."""
        if not self._joined:
            return batch
        until = max((m.time_s for m in batch), default=-1.0)
        n = (
            len(self._joined)
            if last
            else next((i for i, r in enumerate(self._joined) if r.time_s > until), len(self._joined))
        )
        joined, self._joined = self._joined[:n], self._joined[n:]
        return [*batch, *joined]

    def _put(self, batch: list[Message]) -> None:
        """Queue a batch, waiting while the queue is full (until stopped)."""
        while batch and not self._stop.is_set():
            try:
                self._batches.put(batch, timeout=0.1)
                return
            except queue.Full:
                continue


def read_all(source: ReplaySource, timeout_s: float = 120.0) -> list[Message]:
    """Start ``source`` (without follow) and collect every message it has (tests, benchmarks)."""
    source.start()
    out: list[Message] = []
    deadline = time.monotonic() + timeout_s
    while source.alive:
        got = source.poll()
        out += got
        if not got:
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {source.path} took more than {timeout_s:g} s")
            time.sleep(0.005)
    source.stop()
    return out
