"""``gpudash tune`` as a background job of the dashboard (key ``u``): the same race in a child
process, its progress read from the ``tune.csv`` it writes row by row, its answer from ``tune.json``.

Torch- and Textual-free: the dashboard (and ``gpudash serve``'s tabs, which run the dashboard) start
it, ask how far it got once a second, stop it (SIGINT: tune keeps every window it finished and names
the fastest of them, as Ctrl-C does on the command line) and read its answer.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

STOP_WAIT_S = 30.0  # after SIGINT, how long tune may take to write its report before it is killed


@dataclass(frozen=True)
class TuneAnswer:
    """The winner of a finished (or stopped) race, as the dashboard applies it."""

    winner: str  # "pipelined+amp=bf16+channels_last", as tune.md names it
    variant: str
    knobs: tuple[tuple[str, str], ...]  # (name, value) pairs, "on" for an on/off knob
    batch_size: int
    lines: tuple[str, ...]  # what the result screen says: speed, versus plain / best single knob, loss
    command: str  # the command line that runs the winner
    out_dir: Path


@dataclass(frozen=True)
class TuneRequest:
    """What to race: the running configuration, its workload at its batch size, image size and
    workers on its device, with its variant and knobs raced beside the rest (``current``)."""

    workload: str  # a family's name or a user's ``file.py:function``
    batch_size: int
    device: str
    seed: int = 0
    max_minutes: float = 5.0
    seconds: float | None = None  # tune's --seconds / --warmup (None: tune's defaults)
    warmup: float | None = None
    image_size: int | None = None  # the run's image side (None: the family's)
    workers: int | None = None  # the run's DataLoader workers (None: the default)
    current: str | None = None  # what runs: its variant and knobs, as tune's --current takes them

    def argv(self, out_dir: Path) -> list[str]:
        """The ``gpudash tune`` command line for this request."""
        argv = [sys.executable, "-m", "gpudash", "tune", "-w", self.workload, "-b", str(self.batch_size)]
        argv += ["--device", self.device, "--seed", str(self.seed), "--max-minutes", f"{self.max_minutes:g}"]
        if self.seconds is not None:
            argv += ["--seconds", f"{self.seconds:g}"]
        if self.warmup is not None:
            argv += ["--warmup", f"{self.warmup:g}"]
        if self.image_size is not None:
            argv += ["--image-size", str(self.image_size)]
        if self.workers is not None:
            argv += ["--workers", str(self.workers)]
        if self.current is not None:
            argv += ["--current", self.current]
        return [*argv, "--out", str(out_dir), "-q"]


def parse_minutes(text: str) -> float:
    """The dashboard's prompt: a budget in minutes, 0.5 to 120 (ValueError says why not)."""
    try:
        minutes = float(text.strip() or "5")
    except ValueError:
        raise ValueError(f"expected a number of minutes, got {text.strip()!r}") from None
    if not 0.5 <= minutes <= 120:
        raise ValueError("a tune budget is 0.5 to 120 minutes")
    return minutes


class TuneJob:
    """One ``gpudash tune`` child: start, progress, stop, answer."""

    def __init__(self, request: TuneRequest, out_dir: Path) -> None:
        self.request, self.out_dir = request, out_dir
        self.log_path = out_dir / "tune-stderr.log"
        self._proc: subprocess.Popen[bytes] | None = None
        self._started = 0.0
        self._stop_sent: float | None = None

    def start(self) -> None:
        """Start the child (raises OSError when it cannot be started)."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "wb") as log:
            self._proc = subprocess.Popen(
                self.request.argv(self.out_dir), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log
            )
        self._started = time.monotonic()

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def stopping(self) -> bool:
        return self._stop_sent is not None and self.running

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self._started if self._started else 0.0

    def windows(self) -> int:
        """Measurement windows finished so far (tune.csv's ``window`` rows)."""
        path = self.out_dir / "tune.csv"
        try:
            with open(path, newline="", encoding="utf-8") as f:
                return sum(1 for row in csv.DictReader(f) if row.get("row_kind") == "window")
        except (OSError, csv.Error):
            return 0

    def progress(self) -> str:
        """One line for the message bar."""
        m, s = divmod(int(self.elapsed_s), 60)
        budget = f"{self.request.max_minutes:g} min"
        if self.stopping:
            return f"tune: stopping — writing the report of {self.windows()} windows…"
        return (
            f"tuning {self.request.workload} at batch {self.request.batch_size}: {self.windows()} windows measured, "
            f"{m}:{s:02d} of at most {budget} (the run is paused; u stops and keeps what was measured)"
        )

    def stop(self) -> None:
        """Ask tune to stop (SIGINT): it keeps what it measured and writes its report."""
        if self.running and self._stop_sent is None:
            assert self._proc is not None
            self._proc.send_signal(signal.SIGINT)
            self._stop_sent = time.monotonic()

    def check_stop_deadline(self) -> None:
        """A stop that has waited longer than ``STOP_WAIT_S``: kill the child."""
        if self._stop_sent is not None and self.running and time.monotonic() - self._stop_sent > STOP_WAIT_S:
            assert self._proc is not None
            self._proc.kill()

    def close(self, wait_s: float = 5.0) -> None:
        """At the dashboard's exit: stop the child, and kill it if it has not ended after ``wait_s``."""
        if self._proc is None or self._proc.poll() is not None:
            return
        self.stop()
        try:
            self._proc.wait(wait_s)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()

    def result(self) -> TuneAnswer | str:
        """After the child ended: its answer, or one line saying why there is none."""
        assert self._proc is not None and self._proc.poll() is not None, "the job has not ended"
        try:
            meta = json.loads((self.out_dir / "tune.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            meta = {}
        answer = meta.get("answer") if isinstance(meta, dict) else None
        if not answer:
            why = self._last_error() or f"it ended with exit status {self._proc.returncode} and no winner"
            return f"tune found no winner: {why} (see {self.log_path})"
        return answer_from(answer, self.out_dir)

    def _last_error(self) -> str:
        try:
            lines = [line.strip() for line in self.log_path.read_text(errors="replace").splitlines() if line.strip()]
        except OSError:
            return ""
        return lines[-1].removeprefix("gpudash: error: ") if lines else ""


def answer_from(answer: dict, out_dir: Path) -> TuneAnswer:
    """A ``tune.json`` answer as the dashboard applies it (raises KeyError/ValueError on one that is not)."""
    from workloads.knobs import parse_knobs

    winner = str(answer["winner"])
    variant, knobs = str(answer["variant"]), parse_knobs(str(answer["knobs"]))
    lines = [f"fastest: {winner} at batch {answer['batch_size']}{_speed(answer.get('samples_per_s'))}"]
    for key, name in (("vs_plain", "the plain variant"), ("vs_best_single_knob", "the best single knob")):
        c = answer.get(key)
        if isinstance(c, dict):
            lines.append(f"vs {name} ({c['base']}): {_ratio(c)}, {c['verdict']}")
    loss = answer.get("loss")
    if isinstance(loss, dict) and loss.get("message"):
        lines.append(str(loss["message"]))
    return TuneAnswer(
        winner=winner,
        variant=variant,
        knobs=tuple(knobs.items()),
        batch_size=int(answer["batch_size"]),
        lines=tuple(lines),
        command=str(answer["command"]),
        out_dir=out_dir,
    )


def _speed(e: object) -> str:
    from gpudash.stats.comparison import Estimate
    from gpudash.stats.fmt import fmt_pm

    if not isinstance(e, dict) or e.get("mean") is None:
        return ""
    return f": {fmt_pm(Estimate(float(e['mean']), e.get('low'), e.get('high'), 0))} samples/s"


def _ratio(c: dict) -> str:
    from gpudash.stats.comparison import Comparison, Verdict
    from gpudash.stats.fmt import fmt_ratio

    return fmt_ratio(Comparison(float(c["ratio"]), c.get("low"), c.get("high"), Verdict(c["verdict"])))


def default_out_dir(base: str | os.PathLike[str] | None, workload: str) -> Path:
    """Where a dashboard's tune writes: ``tune-WORKLOAD-YYYYmmdd-HHMMSS`` in ``base`` (the
    configured record directory) or the working directory."""
    name = Path(workload.split(":")[0]).stem or "workload"
    return Path(base or ".") / f"tune-{name}-{time.strftime('%Y%m%d-%H%M%S')}"
