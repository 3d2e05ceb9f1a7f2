"""Soak of the dashboard itself: ``gpudash`` in a real terminal (tmux) for an hour, recording, a
change every 30 s, and whether the dashboard process grows.

Why tmux and not Textual's pilot (``soak``): a headless app never turns its frames into terminal
output, so what only a real terminal costs the dashboard (each frame's escape sequences, the styles
rendered for it) is not measured there. The dashboard runs as a user starts it (``python -m gpudash
-w sync_loss ...``) in a tmux session of its own (its own server socket, a fixed size), with a
settings directory of its own so that the recording lands in ``out_dir``. Once the workload runs,
the soak starts a recording as a user does (``c``, enter), then sends a change every
``change_every`` seconds, the keys in turn: ``+`` (batch ×2), ``-`` (back), ``v`` (the next
variant), ``v`` (back, on a two-variant family). Just before each change (or every
``measure_every`` seconds) it samples from /proc the dashboard process's RSS, open fds and threads,
and, for context, the workload's and the recording's size. Verdict per dashboard column: after the
warm-up, the median of the first window against the median of the last one: flat when they differ
by at most 5% (for fds and threads, also when by at most one). The report (``report``) is written
again after every measurement, so a run cut short leaves what it had."""

from __future__ import annotations

import datetime as _dt
import os
import platform
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from benchmarks.cases.shared.gpudash_outputs import gpudash_argv
from benchmarks.cases.shared.tmux import Tmux, wait_for
from benchmarks.harness.case import BadParameter, Unavailable
from benchmarks.harness.context import Run
from benchmarks.harness.params import as_dict, param
from benchmarks.harness.stamp import ROOT
from gpudash.core.proctree import children
from tests.soaks import FLAT_PCT, ProcStats, default_warmup_minutes, proc_stats, slope_per_hour, tree_stats
from tests.soaks import DashboardRow as Row
from tests.soaks import window_verdict as verdict

KEYS = ("+", "-", "v", "v")  # a change each: batch ×2, back, the next variant, back (a two-variant family)
KEY_NAMES = {"+": "batch ×2 (+)", "-": "batch ÷2 (-)", "v": "the next variant (v)"}
SIZE = (120, 36)  # the terminal (default): the README's screenshots' size
START_TIMEOUT_S = 300.0  # torch's import on a loaded machine
QUIT_TIMEOUT_S = 30.0

# key, heading, format; the first three are the dashboard's and get a verdict
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("rss", "dashboard RSS MiB", "{:.1f}"),
    ("fds", "dashboard fds", "{:.0f}"),
    ("threads", "dashboard threads", "{:.0f}"),
    ("workload_rss", "workload RSS MiB", "{:.0f}"),
    ("csv_kib", "recording KiB", "{:.0f}"),
)
JUDGED = ("rss", "fds", "threads")


def dashboard_command(args: Any) -> str:
    """The shell command the pane runs: ``exec`` so the pane's pid is the dashboard's."""
    argv = gpudash_argv("-w", args.workload, *args.gpudash_args)
    env = f"XDG_CONFIG_HOME={shlex.quote(str(args.out_dir / 'config'))} PYTHONPATH={shlex.quote(str(ROOT))}"
    return f"exec env {env} {shlex.join(argv)}"


# -- measurements -----------------------------------------------------------------------------------
@dataclass
class Soak:
    rows: list[Row] = field(default_factory=list)
    changes: list[str] = field(default_factory=list)
    trouble: list[str] = field(default_factory=list)
    screen: str = ""  # the last capture
    ended: str = "in progress"


def workload_pid(dashboard: int) -> int | None:
    """The dashboard's child that leads a process group of its own: the workload process."""
    for kid in children(dashboard):  # any thread's (a worker spawned it)
        try:
            if os.getpgid(kid) == kid:
                return kid
        except OSError:
            continue
    return None


def newest_csv(folder: Path) -> Path | None:
    found = sorted(folder.glob("gpudash-*.csv"), key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


def sample(pid: int, folder: Path, minute: float, changes: int, screen: str) -> Row:
    dash: ProcStats | None = proc_stats(pid)
    kid = workload_pid(pid)
    work = tree_stats(kid) if kid is not None else None
    csv = newest_csv(folder)
    values: dict[str, float | None] = {
        "rss": dash.rss_mib if dash else None,
        "fds": dash.fds if dash else None,
        "threads": dash.threads if dash else None,
        "workload_rss": work.rss_mib if work else None,
        "csv_kib": csv.stat().st_size / 1024 if csv is not None else None,
    }
    header = " ".join(screen.splitlines()[0].split()) if screen else ""
    return Row(minute, values, changes, header)


# -- verdicts (tests/soaks.py: the first window after the warm-up against the last) ---------------------
def overall(args: Any, soak: Soak) -> str:
    """One line for the judged columns together."""
    verdicts = {key: verdict(soak.rows, key, args.warmup_minutes, args.window_minutes) for key in JUDGED}
    names = {key: heading.removeprefix("dashboard ") for key, heading, _ in COLUMNS}
    if any(v.startswith("n/a") for v in verdicts.values()):
        return "not enough measurements after the warm-up yet"
    grown = [names[k] for k, v in verdicts.items() if v.startswith("NOT")]
    if grown:
        return f"the dashboard's {', '.join(grown)} NOT flat within {FLAT_PCT:g}% after the warm-up"
    return f"the dashboard's RSS, fds and threads flat within {FLAT_PCT:g}% after the warm-up"


# -- the report ----------------------------------------------------------------------------------------
def _version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _head(args: Any, soak: Soak, command: str) -> list[str]:
    """The title, where and when, the commands, the verdict and what was done."""
    when = args.started.astimezone().isoformat(timespec="minutes")
    tmux_version = subprocess.run(["tmux", "-V"], capture_output=True, text=True, check=False).stdout.strip()
    keys = ", ".join(KEY_NAMES[k] for k in KEYS)
    return [
        f"# gpudash dashboard soak: {args.minutes:g} min in tmux, a change every {args.change_every:g} s, recording",
        "",
        (
            f"{when} · {platform.node()} · {os.cpu_count()} CPUs ({_cpu_model()}) · Python "
            f"{platform.python_version()} · torch {_version('torch')} · textual {_version('textual')} · "
            f"{tmux_version} {args.size[0]}×{args.size[1]} · measured every {args.measure_every:g} s · "
            f"status: {soak.ended}"
        ),
        "",
        f"Command: `{command}`  ",
        f"The dashboard, in tmux: `{dashboard_command(args).removeprefix('exec ')}`",
        "",
        f"**Verdict: {overall(args, soak)}**",
        "",
        (
            f"Changes, in turn: {keys} (on a two-variant family the second v goes back); the recording "
            f"started with `c`, enter. The dashboard's columns are judged after a {args.warmup_minutes:.3g}-minute "
            f"warm-up: the median of the first {args.window_minutes:.3g} minutes against that of the last "
            f"{args.window_minutes:.3g} (flat: within {FLAT_PCT:g}%; fds and threads also within ±1). The "
            "workload's RSS and the recording's size are context, not judged."
        ),
        "",
    ]


def _table(soak: Soak) -> list[str]:
    cols = ["minute", *(h for _, h, _ in COLUMNS), "changes", "the screen's first line"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in soak.rows:
        cells = [f"{r.minute:.1f}"] + [
            fmt.format(r.values[k]) if r.values[k] is not None else "n/a" for k, _, fmt in COLUMNS
        ]
        lines.append("| " + " | ".join([*cells, str(r.changes), r.header.replace("|", "/")]) + " |")
    return lines


def _verdicts(args: Any, soak: Soak) -> list[str]:
    lines = ["", "| column | verdict | slope after the warm-up |", "|---|---|---|"]
    for key, heading, _ in COLUMNS:
        if key in JUDGED:
            slope = slope_per_hour(soak.rows, key, args.warmup_minutes)
            slope_text = f"{slope:+.2f} /hour" if slope is not None else "n/a"
            text = verdict(soak.rows, key, args.warmup_minutes, args.window_minutes)
            lines.append(f"| {heading} | {text} | {slope_text} |")
    return lines


def _notes(soak: Soak) -> list[str]:
    trouble = len(soak.trouble) or "none"
    notes = ["", f"Changes sent: {len(soak.changes)}; trouble (crashes, restarts, a dashboard gone): {trouble}"]
    notes += [f"- {t}" for t in soak.trouble[:20]]
    if soak.screen:
        notes += ["", "The screen at the last measurement:", "", "```text", soak.screen.rstrip("\n"), "```"]
    return notes


def report(args: Any, soak: Soak, command: str) -> str:
    """The whole report, as markdown."""
    return "\n".join(_head(args, soak, command) + _table(soak) + _verdicts(args, soak) + _notes(soak)) + "\n"


def write_report(args: Any, soak: Soak, command: str) -> None:
    args.report.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.report.with_suffix(args.report.suffix + ".tmp")
    tmp.write_text(report(args, soak, command))
    tmp.replace(args.report)


# -- the soak ------------------------------------------------------------------------------------------
def _say(text: str) -> None:
    print(f"soak-dashboard: {text}", file=sys.stderr, flush=True)


def start_recording(tmux: Tmux, pid: int) -> None:
    """``c``, then enter on the prompt's proposed file name: what a user does."""
    tmux.keys("c")
    wait_for(tmux, "Record this run to CSV", 30, pid)
    tmux.keys("Enter")
    wait_for(tmux, "● REC", 30, pid)


def look(tmux: Tmux, soak: Soak, pid: int, minute: float) -> str:
    """The screen now; a crash is restarted (``r``) and noted."""
    screen = tmux.screen()
    if "crashed — r restarts" in screen or "not responding — r restarts" in screen:
        soak.trouble.append(f"minute {minute:.1f}: the workload ended; pressed r")
        tmux.keys("r")
    return screen


def run_soak(args: Any, soak: Soak, command: str) -> None:
    tmux = Tmux(socket=f"gpudash-soak-{os.getpid()}")
    pid = tmux.start(dashboard_command(args), args.out_dir, args.size)
    _say(f"dashboard pid {pid} in tmux -L {tmux.socket} (attach: tmux -L {tmux.socket} attach -r)")
    try:
        wait_for(tmux, " running", START_TIMEOUT_S, pid, header=True)
        start_recording(tmux, pid)
        t0 = time.monotonic()
        end = t0 + args.minutes * 60
        next_change, next_measure = t0 + args.change_every, t0
        while True:
            now = time.monotonic()
            minute = (now - t0) / 60
            if proc_stats(pid) is None:
                soak.trouble.append(f"minute {minute:.1f}: the dashboard process is gone")
                break
            if now >= next_measure - 1e-6:
                soak.screen = look(tmux, soak, pid, minute)
                row = sample(pid, args.out_dir, minute, len(soak.changes), soak.screen)
                soak.rows.append(row)
                _say(
                    f"minute {minute:5.1f}: "
                    + ", ".join(f"{k}={v:.1f}" for k, v in row.values.items() if v is not None)
                    + f"; {row.header[:70]}"
                )
                write_report(args, soak, command)
                next_measure += args.measure_every
            if now >= end:
                break
            if now >= next_change:
                key = KEYS[len(soak.changes) % len(KEYS)]
                tmux.keys(key, literal=True)
                soak.changes.append(f"minute {minute:.1f}: {KEY_NAMES[key]}")
                next_change += args.change_every
            time.sleep(max(0.05, min(next_change, next_measure, end) - time.monotonic()))
        quit_dashboard(tmux, soak, pid)
    finally:
        tmux.kill()


def quit_dashboard(tmux: Tmux, soak: Soak, pid: int) -> None:
    """Stop the recording (``c``), quit (``q``), and note a dashboard that does not exit."""
    tmux.keys("c")
    time.sleep(1.0)
    tmux.keys("q")
    deadline = time.monotonic() + QUIT_TIMEOUT_S
    while proc_stats(pid) is not None and time.monotonic() < deadline:
        time.sleep(0.2)
    if proc_stats(pid) is not None:
        soak.trouble.append(f"the dashboard had not exited {QUIT_TIMEOUT_S:g} s after q")


@dataclass(frozen=True)
class Params:
    minutes: float = param(60.0, "how long, from the recording's start")
    change_every: float = param(30.0, "seconds between changes")
    measure_every: float | None = param(None, "seconds between measurements (none: just before each change)")
    warmup_minutes: float | None = param(None, "left out of the verdicts (none: 5, or a sixth of a shorter run)")
    window_minutes: float | None = param(None, "the first and last windows compared (none: as the warm-up)")
    size: str = param("120x36", "the terminal's columns x rows (at least 80x24)")
    workload: str = param("sync_loss", "the family (sync_loss: cheap on the CPU)")
    gpudash_args: tuple[str, ...] = param((), "more gpudash options, comma-separated (--image-size,16,--device,cpu)")
    out_dir: str = param("soak-dashboard-out", "the recording, the settings and the dashboard's working directory")
    report: str = param("soak-dashboard-out/report.md", "the report, written again after every measurement")


def interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def settings(p: Params) -> Any:
    """The parameters with their defaults filled in, checked."""
    args = SimpleNamespace(**as_dict(p))
    w, _, h = p.size.lower().partition("x")
    if not (w.isdigit() and h.isdigit() and int(w) >= 80 and int(h) >= 24):
        raise BadParameter(f"size {p.size!r}: give columns x rows, at least 80x24")
    args.size = (int(w), int(h))
    args.gpudash_args = list(p.gpudash_args)
    args.measure_every = p.measure_every or p.change_every
    short = default_warmup_minutes(p.minutes)
    args.warmup_minutes = p.warmup_minutes if p.warmup_minutes is not None else short
    args.window_minutes = p.window_minutes if p.window_minutes is not None else short
    if min(p.minutes, p.change_every, args.measure_every, args.window_minutes) <= 0 or args.warmup_minutes < 0:
        raise BadParameter("minutes, change_every, measure_every and window_minutes must be > 0, warmup_minutes ≥ 0")
    if not Path("/proc/self/status").exists() or shutil.which("tmux") is None:
        raise Unavailable("the soak needs Linux (/proc) and tmux")
    args.out_dir = Path(p.out_dir).resolve()
    args.report = Path(p.report)
    args.started = _dt.datetime.now()
    return args


def measure(run: Run, p: Params) -> None:
    from benchmarks.harness.params import changed

    args = settings(p)
    command = shlex.join(
        ["python", "-m", "benchmarks", "run", "soak_dashboard", *(w for c in changed(p) for w in ("-p", c))]
    )
    args.out_dir.mkdir(parents=True, exist_ok=True)
    soak = Soak()
    signal.signal(signal.SIGTERM, interrupted)
    try:
        run_soak(args, soak, command)
        soak.ended = "done"
    except KeyboardInterrupt:
        soak.ended = "interrupted"
        _say("interrupted: the report has what was measured so far")
    write_report(args, soak, command)
    _say(f"report: {args.report}")
    for line in report(args, soak, command).rstrip("\n").splitlines():
        run.line(line)
