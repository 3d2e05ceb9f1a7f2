"""gpudash's side of the allocator's history of a job's steps (``gpudash diagnose --memory``, the
dashboard's key): asked of the lead rank after its activations' sample, the snapshot the job's hooks
dump read in the background (``gpudash.diagnosis.memory_peak``) and deleted, and the answer's
words — the lines at the peak and what the recording cost. Torch-free."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from typing import Any

from gpudash.boot.gpudash_boot import wire
from gpudash.core.lenient import count_or, float_or
from gpudash.core.memory_kinds import size
from gpudash.diagnosis.memory_peak import MemoryPeak, peak_of, read_snapshot

FROM_STEP = 4  # the first step recorded: after the optimizer's state exists and the activations' sample (the third)
ANSWER_WAIT_S = 120.0  # a request unanswered this long (its hooks went off, its rank went) frees the next


@dataclass(frozen=True)
class PeakRead:
    """A rank's recording, read: the peak and its holders, or why there are none."""

    rank: int
    steps: int = 0
    peak: MemoryPeak | None = None
    error: str = ""
    wall_ms: float = 0.0  # the recorded steps' wall time
    dump_ms: float = 0.0  # the snapshot's taking and writing, after them

    def cost(self, step_s: float | None) -> str:
        """``2 steps recorded, 95 ms a step against 60 ms (1.58×); the snapshot 0.41 s``."""
        if self.steps <= 0:
            return ""
        each = self.wall_ms / self.steps
        against = f" against {step_s * 1e3:.3g} ms ({each / (step_s * 1e3):.2f}×)" if step_s else ""
        return f"{self.steps} steps recorded, {each:.3g} ms a step{against}; the snapshot {self.dump_ms / 1e3:.2g} s"


class JobMemoryPeaks:
    """``ask`` the request for the lead; ``received`` its answer; ``done`` what was read since."""

    def __init__(self) -> None:
        self.pending = False  # a recording asked for and not answered yet
        self.reading = False  # an answer's snapshot being read in the background
        self.asked_at = 0.0
        self._lock = threading.Lock()
        self._done: list[PeakRead] = []

    @property
    def busy(self) -> bool:
        """A recording asked for is under way (and not given up on), or its answer is being read."""
        return self.reading or (self.pending and time.monotonic() - self.asked_at < ANSWER_WAIT_S)

    def ask(self, steps: int, folder: str, lead_steps: int) -> dict[str, Any]:
        self.pending, self.asked_at = True, time.monotonic()
        return {"k": wire.MEMPEAK, "steps": max(1, steps), "dir": folder, "at": max(FROM_STEP - 1, lead_steps + 1)}

    def received(self, m: dict[str, Any]) -> None:
        """The lead's answer: its snapshot read in the background, or its error now."""
        rank, steps = count_or(m.get("rank")), count_or(m.get("steps"))
        if m.get("error") or not m.get("path"):
            self._finish(PeakRead(rank, steps, error=str(m.get("error") or "no snapshot was written")))
            return
        args = (str(m["path"]), count_or(m.get("device")), count_or(m.get("max_entries")), rank, steps, m)
        self.reading = True
        threading.Thread(target=self._read, args=args, name="gpudash-memory-read", daemon=True).start()

    def done(self) -> list[PeakRead]:
        with self._lock:
            out, self._done = self._done, []
        return out

    def _read(self, path: str, device: int, max_entries: int, rank: int, steps: int, m: dict[str, Any]) -> None:
        wall_ms, dump_ms = float_or(m.get("wall_ms")), float_or(m.get("dump_ms"))
        try:
            peak = peak_of(read_snapshot(path), device, max_entries)
        except Exception as exc:  # noqa: BLE001 - any file at all: said
            why = f"cannot read the allocator's history {path}: {exc}"
            self._finish(PeakRead(rank, steps, error=why, wall_ms=wall_ms, dump_ms=dump_ms))
            return
        finally:
            try:
                os.remove(path)
            except OSError:
                pass
        self._finish(PeakRead(rank, steps, peak=peak, wall_ms=wall_ms, dump_ms=dump_ms))

    def _finish(self, read: PeakRead) -> None:
        with self._lock:
            self.pending = self.reading = False
            self._done.append(read)


def answer_lines(read: PeakRead, step_s: float | None) -> list[str]:
    """The answer as ``diagnose --memory`` prints it: the peak, its holders, the recording's cost."""
    peak = read.peak
    if peak is None:
        return [read.error]
    head = f"at the peak of the {read.steps} recorded steps: {size(peak.peak_bytes)} allocated"
    lost = " (the earliest entries were lost: the history's ring was full)" if peak.truncated else ""
    return [head + lost, *peak.lines(), f"the recording: {read.cost(step_s)}"]
