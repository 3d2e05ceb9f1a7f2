"""What a job's process sends gpudash on a pace, and what gpudash asks of it, for gpudash's hooks
(``hooks.py``). Standard library only.

The channel is a datagram socket (one JSON object a datagram): a full socket drops the message,
nothing here ever blocks the job. The outbox is its one owner with one lock: the step records timed
(``timing.py``) go out in batches at most each ``SEND_EVERY_S``, with what the memory
holds, the sync table when it changed and a note, once, of the communication not timed; each send
then takes gpudash's requests (stacks answered at once; a profiler window, the allocator's history
and an end kept for their step). A step sends under the lock; the flusher thread sends what waits
when the job stops stepping, only when the lock is free, and never makes a CUDA call.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from . import wire
from .stacks import answer

SEND_EVERY_S = 0.1  # step records go out at most this often
SITES_EVERY_S = 2.0  # the sync table, when it changed
MEM_EVERY_S = 1.0  # what the memory holds
MAX_BATCH = 200  # step records a datagram


class Channel:
    """The datagram socket to gpudash, and this process's own for gpudash's requests."""

    def __init__(self, host: str) -> None:
        self.host = host
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.setblocking(False)
        self.own = os.path.join(os.path.dirname(host), f"job-{os.getpid()}.sock")
        try:
            self.sock.bind(self.own)
        except OSError:
            self.own = ""
        self.dropped = 0

    def send(self, message: dict[str, Any]) -> None:
        try:
            self.sock.sendto(json.dumps(message, separators=(",", ":")).encode(), self.host)
        except OSError:  # full (dropped), or gpudash gone
            self.dropped += 1

    def requests(self) -> list[dict[str, Any]]:
        out = []
        while self.own:
            try:
                data = self.sock.recv(65536)
            except OSError:
                break
            try:
                out.append(json.loads(data))
            except ValueError:
                continue
        return out


class Outbox:
    """The channel's owner: ``flush`` sends what is due (under ``lock``), ``flush_if_idle`` from the
    flusher thread, ``take_requests`` answers or keeps what gpudash asked. ``rank`` and ``steps``
    read the process's own; ``worker`` (a DataLoader worker) and ``syncs`` (the sync counter, on a
    GPU from the first step) are set by the hooks."""

    def __init__(
        self, channel: Channel, times: Any, *, memory: Any, comm: Any, window: Any, rank: Callable[[], int]
    ) -> None:
        self.channel = channel
        self.lock = threading.Lock()
        self.times = times  # timing.StepTimes: its ``ready`` records go out
        self.memory = memory  # memory_count.MemoryCount: what the memory holds, its history on request
        self.comm = comm  # comm.CommTimes: what of the communication is not timed
        self.window = window  # window.ProfilerWindow, on request
        self.rank = rank
        self.every_s = SEND_EVERY_S
        self.worker = False  # a DataLoader worker (forked or spawned): answers stack requests only
        self.syncs: Any = None  # syncs.SyncCount, where syncs are counted
        self.end_after = end_after_env()  # gpudash's end of a measuring run: after this step (--steps: from the start)
        self.last_send = 0.0
        self.mem_sent = 0.0
        self.sites_sent = (0.0, -1)
        self.untimed_said = False

    def send(self, message: dict[str, Any]) -> None:
        self.channel.send(message)

    def forked(self) -> None:
        """A forked child: a lock of its own, which no thread here holds, and a socket of its own."""
        self.lock = threading.Lock()
        self.channel = Channel(self.channel.host)

    def flush(self, final: bool = False, cuda: bool = True) -> None:
        """Send the records ready (``cuda``: first collect the groups whose event completed; never
        from the flusher thread, which must not make CUDA calls), and what else is due."""
        times, rank = self.times, self.rank()
        if times.cuda and cuda:
            times.collect()
            if final:
                times.settle()
        self.last_send = time.monotonic()
        while times.ready:
            batch, times.ready = times.ready[:MAX_BATCH], times.ready[MAX_BATCH:]
            self.channel.send({"k": wire.STEPS, "rank": rank, "pid": os.getpid(), "s": batch})
        if (cuda or not times.cuda) and (final or self.last_send - self.mem_sent >= MEM_EVERY_S):
            if (memory := self.memory.message(rank)) is not None:
                self.channel.send(memory)
                self.mem_sent = self.last_send
        self._send_sites(rank, final)
        if self.comm.untimed and not self.untimed_said:  # once: what of its communication is not timed
            self.untimed_said = True
            self.channel.send({"k": wire.NOTE, "rank": rank, "text": self.comm.untimed})
        self.take_requests()

    def _send_sites(self, rank: int, final: bool) -> None:
        """The sync table, each ``SITES_EVERY_S`` where it changed (and at the end)."""
        syncs = self.syncs
        if syncs is None or not (final or self.last_send - self.sites_sent[0] >= SITES_EVERY_S):
            return
        total = syncs.sites.total
        if total != self.sites_sent[1] or final:
            table = syncs.sites.table()
            self.channel.send(
                {"k": wire.SITES, "rank": rank, "table": table.as_dict(), "not_counted": syncs.not_counted}
            )
            self.sites_sent = (self.last_send, total)

    def flush_if_idle(self) -> None:
        """From the flusher thread: steps not sent for two paces go out, unless a step holds the lock."""
        if time.monotonic() - self.last_send >= self.every_s * 2 and self.lock.acquire(blocking=False):
            try:
                self.flush(cuda=False)
            except Exception:  # noqa: BLE001, S110 - the next step's flush says it
                pass
            finally:
                self.lock.release()

    def take_requests(self) -> None:
        """gpudash's requests: stacks answered now; a window, a history, an end kept for its step."""
        for request in self.channel.requests():
            kind = request.get("k")
            if kind == wire.STACKS:
                answer(self.channel, self.rank(), self.worker)
            elif kind == wire.END:
                after = int(request.get("after") or 0)  # the earliest asked: --steps', then a stop's
                self.end_after = after if self.end_after is None else min(self.end_after, after)
            elif kind == wire.TRACE:
                self.window.ask(request)
            elif kind == wire.MEMPEAK:
                self.memory.history.ask(request)


def end_after_env() -> int | None:
    """``--steps N``, as gpudash set it in the job's environment: end at step N (None: not set, or not a count)."""
    try:
        steps = int(os.environ.get(wire.END_AFTER_ENV, ""))
    except ValueError:
        return None
    return steps if steps > 0 else None
