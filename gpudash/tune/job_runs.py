"""One candidate of ``gpudash tune -- CMD``: a fresh run of the user's job under ``gpudash record
--duration S --set …``, its figures, its workers' readings, and how two runs compare.

A run is watched while it goes: its DataLoader workers' CPU use and memory are read each second
(``gpudash.tune.worker_cpu``), and a run already slower than the best at half its seconds is
stopped there with Ctrl-C (every row it wrote is kept). ``typed`` is the one place a setting's
``NAME=VALUE`` text becomes its JSON value. Torch-free.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpudash.boot.gpudash_boot.wire import WATCH_ENV
from gpudash.core.memory_kinds import size
from gpudash.core.textfmt import plain
from gpudash.job.settings import BOOLEANS, COUNTS, Settings, describe
from gpudash.report.load import ReportInputError, load_run
from gpudash.report.load import Run as Recorded
from gpudash.stats.comparison import Comparison, Estimate, Verdict, compare
from gpudash.tune.worker_cpu import WorkerCpu, WorkerMemory

KEEP_FROM = 1.05  # a candidate replaces the best only this much faster at its interval's low end


@dataclass
class Run:
    """One candidate's run: its settings and figures (None where it failed: ``error``)."""

    name: str
    settings: Settings
    samples: Estimate | None = None
    steps: Estimate | None = None
    error: str = ""
    started: dict[str, Any] = field(default_factory=dict)
    dropped: bool = False  # stopped early: slower than the best at half its seconds
    worker_busy: float | None = None  # its DataLoader workers' CPU use (0–1 a worker), where seen
    workers_seen: int = 0
    worker_memory: WorkerMemory | None = None  # what its workers held, and the memory free meanwhile
    ranks: int = 1  # the job's ranks on this machine (a torchrun job's: each has its own loader)
    memory: dict[str, Any] = field(default_factory=dict)  # run.json's memory (batch, fits_batch, …), where known

    @property
    def rate(self) -> Estimate | None:
        """What the race ranks by: samples/s where the job's batches are counted, else steps/s."""
        return self.samples if self.samples is not None and self.samples.mean > 0 else self.steps


def typed(settings: Settings) -> dict[str, bool | int | str]:
    """``settings`` as JSON values: counts as integers, switches as booleans (``num_workers: 8``,
    ``pin_memory: true``), the rest as given (``autocast: "bf16"``, the loader's site)."""
    return {key: _typed(key, value) for key, value in settings}


def _typed(key: str, value: str) -> bool | int | str:
    if key in COUNTS:
        return int(value)
    if key in BOOLEANS:
        return value == "True"
    return value


def run_once(
    command: list[str], settings: Settings, seconds: float, csv_path: Path, beat: Run | None = None, watch: bool = False
) -> Run:
    """The job once, recorded under ``settings``; its figures, or why there are none. Stopped early
    (SIGTERM: gpudash ends the job at a step boundary, every row kept) once half its seconds show it
    slower than ``beat``; ``watch``: its first step says what its model does (autocast, compiled, where
    it is called)."""
    run = Run(describe(settings), settings)
    argv = [sys.executable, "-m", "gpudash", "record", str(csv_path), "-q", "--force", "--duration", f"{seconds:g}"]
    argv += [arg for k, v in settings for arg in ("--set", f"{k}={v}")]
    err_path = csv_path.with_suffix(".err")
    with open(err_path, "w", encoding="utf-8") as err:
        env = {**os.environ, WATCH_ENV: "1"} if watch else None
        process = subprocess.Popen([*argv, "--", *command], stdout=subprocess.DEVNULL, stderr=err, env=env)
        try:
            run.dropped = _watch(process, run, csv_path, seconds, beat)
        except KeyboardInterrupt:  # the run ends as a Ctrl-C ends a recording (its rows kept), then the caller hears it
            _end(process)
            raise
    if process.returncode != 0 and not run.dropped or not csv_path.exists():
        said = [line for line in err_path.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
        tail = " | ".join(said[-3:])  # the job's own last lines, then gpudash's
        run.error = f"exit {process.returncode}: {tail}" if tail else f"exit {process.returncode}"
        return run
    try:
        recorded = load_run(csv_path)
    except ReportInputError as exc:
        run.error = str(exc)
        return run
    if not take_rates(run, recorded):
        run.error = "no samples after the warm-up: give each run more --seconds"
        return run
    run.started = dict(recorded.meta.get("started") or {})
    memory = recorded.meta.get("memory")
    run.memory = dict(memory) if isinstance(memory, dict) else {}
    run.ranks = len({r.rank for r in recorded.ranks}) or 1
    return run


def _watch(process: subprocess.Popen[bytes], run: Run, csv_path: Path, seconds: float, beat: Run | None) -> bool:
    """Wait for ``process`` (returning as it ends), reading its workers' CPU use and memory each
    second; True where it was stopped early for being slower than ``beat``."""
    workers = WorkerCpu(process.pid)
    began, dropped = time.monotonic(), False
    while not _ended_within(process, 1.0):
        workers.read()
        elapsed = time.monotonic() - began
        if elapsed > seconds + 300:
            process.kill()
        elif not dropped and beat is not None and elapsed >= seconds / 2 and _losing(csv_path, beat):
            process.send_signal(signal.SIGTERM)  # gpudash ends the job at a step, its rows kept
            dropped = True
    run.worker_busy, run.workers_seen, run.worker_memory = workers.busy, workers.count, workers.memory
    return dropped


def _end(process: subprocess.Popen[bytes]) -> None:
    """``process`` ended as a Ctrl-C ends it (a terminal's reached it too, where it came from one),
    waited for; killed where it does not end within half a minute."""
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _ended_within(process: subprocess.Popen[bytes], seconds: float) -> bool:
    """Whether ``process`` ends within ``seconds`` (waited for: no second is lost after its end)."""
    try:
        process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        return False
    return True


def _losing(csv_path: Path, beat: Run) -> bool:
    """Whether the recording so far is slower than ``beat`` beyond the noise."""
    try:
        recorded = load_run(csv_path)
    except (ReportInputError, OSError):
        return False
    so_far = Run("so far", ())
    return take_rates(so_far, recorded) and slower(beat, so_far)


def take_rates(run: Run, recorded: Recorded) -> bool:
    """``run``'s samples/s and steps/s: its recording's last configuration after the warm-up
    (False where there is none yet)."""
    figures = [c for c in recorded.configs if c.steps is not None]
    if figures:
        run.samples, run.steps = figures[-1].stats.get("samples_per_s"), figures[-1].stats.get("steps_per_s")
    return bool(figures)


def faster(best: Run, new: Run) -> Comparison | None:
    """``new`` against ``best`` where it is faster by ``KEEP_FROM`` at its interval's low end: two
    runs differ more from one another than each one's windows do, which its interval counts."""
    if best.rate is None or new.rate is None:
        return None
    c = compare(best.rate, new.rate)
    return c if c.verdict == Verdict.FASTER and (c.low or 0.0) >= KEEP_FROM else None


def slower(best: Run, new: Run) -> bool:
    """``new`` is slower than ``best`` beyond the noise (False where either has no figure)."""
    if best.rate is None or new.rate is None:
        return False
    return compare(best.rate, new.rate).verdict == Verdict.SLOWER


def shown(run: Run) -> str:
    """A run's progress line: its rate and its workers' CPU use and memory, or its error."""
    if run.rate is None:
        return run.error
    unit = "samples" if run.rate is run.samples else "steps"
    busy = f", workers {run.worker_busy:.0%} busy" if run.worker_busy is not None else ""
    if run.worker_memory is not None:
        busy += f", {size(run.worker_memory.per_worker)} each"
    return f"{plain(run.rate.mean)} {unit}/s{busy}" + (" (dropped early: slower)" if run.dropped else "")
