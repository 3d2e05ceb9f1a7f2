"""Dashboard timings on this machine: time to first frame, and the cost of one redraw.

    .venv/bin/python benchmarks/tui_frame.py            # everything (about 30 s)
    .venv/bin/python benchmarks/tui_frame.py --quick    # skip the whole-process runs

Measures
  * import of gpudash.tui.app in a fresh interpreter (what the first frame waits for);
  * in-process: app construction -> first frame painted (headless driver);
  * whole process: `python -m gpudash.tui.demo` and the real `gpudash` (engine on this
    machine's CPU/GPU) in a pseudo-terminal: exec -> the first full frame on the terminal
    (the footer drawn), and whether torch was still loading in the child then;
  * one redraw of every visible chart at full buffers (600 points a series), building the
    plotext canvases, at 100x30 (4 charts) and 160x48 (6 charts); and one whole frame
    (state -> charts -> Textual compositor) at 160x48.
Targets: first frame <= 1.5 s, redraw <= 25 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import pty
import select
import shutil
import statistics
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gpudash.core.proctree import children  # noqa: E402


def fresh_import_s() -> float:
    code = "import time; t=time.perf_counter(); import gpudash.tui.app; print(time.perf_counter()-t)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    return float(out.stdout.strip())


def in_process_first_frame_s() -> float:
    from gpudash.tui.app import GpuDashApp
    from gpudash.tui.demo import SyntheticSource

    async def main() -> float:
        t0 = time.perf_counter()
        app = GpuDashApp(SyntheticSource(gpu=True), toasts=False)
        async with app.run_test(size=(120, 36)) as pilot:
            while app.first_frame_at is None:
                await pilot.pause(0.001)
            return app.first_frame_at - t0

    return asyncio.run(main())


def pty_first_frame(
    argv: list[str], marker: bytes, timeout: float = 20.0, cols: int = 120, rows: int = 36, after_frame=None
) -> tuple[float | None, str]:
    """Run ``argv`` in a pty; seconds from exec until ``marker`` appears on the terminal."""
    import fcntl
    import termios

    env = dict(os.environ, TERM="xterm-256color", COLUMNS=str(cols), LINES=str(rows))
    t0 = time.perf_counter()
    pid, fd = pty.fork()
    if pid == 0:  # child
        os.chdir(ROOT)
        os.execvpe(argv[0], argv, env)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    buf = b""
    first = None
    note = ""
    deadline = t0 + timeout
    while time.perf_counter() < deadline:
        r, _, _ = select.select([fd], [], [], 0.05)
        if r:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            buf += chunk
            if first is None and marker in buf:
                first = time.perf_counter() - t0
                if after_frame is not None:
                    note = after_frame(pid)
                break
    # quit the app the way a user would, then make sure it is gone
    try:
        os.write(fd, b"q")
    except OSError:
        pass
    end = time.perf_counter() + 15
    while time.perf_counter() < end:
        r, _, _ = select.select([fd], [], [], 0.05)
        if r:
            try:
                if not os.read(fd, 65536):
                    break
            except OSError:
                break
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            break
    else:
        os.kill(pid, 9)
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass
    os.close(fd)
    return first, note


def child_torch_state(parent_pid: int) -> str:
    """Whether the workload child of ``parent_pid`` had torch loaded yet (its memory maps, from /proc)."""
    kids = children(parent_pid)
    for k in kids:
        try:
            maps = Path(f"/proc/{k}/maps").read_text()
        except OSError:
            continue
        if "libtorch" in maps:
            return "torch already loaded in the child"
    return "child still importing torch" if kids else "no child yet"


def redraw_costs(
    size: tuple[int, int], frames: int = 20, clock: Callable[[], float] = time.perf_counter
) -> tuple[int, float, float, float]:
    """(charts shown, median ms to rebuild them all, p95 ms, median ms whole frame); with
    ``clock=time.process_time``, this process's CPU time (steadier on a shared machine)."""
    from gpudash.tui.app import GpuDashApp
    from gpudash.tui.demo import SyntheticSource

    t = [0.0]
    src = SyntheticSource(gpu=True, clock=lambda: t[0], startup_s=0.0)
    src.start()

    async def main():
        app = GpuDashApp(src, clock=lambda: 0.0, toasts=False, maxlen=600)
        async with app.run_test(size=size) as pilot:
            while not app.source_ready:
                await pilot.pause(0.001)
            app.ingest(src.poll())
            # fill every buffer: 600 samples (150 s at 4/s) and 600 GPU ticks (300 s at 2/s)
            for i in range(1, 1300):
                t[0] = i * 0.25
                if i % 400 == 0:
                    src.send(__import__("gpudash.core.protocol", fromlist=["x"]).SetBatchSize(8 * (1 + i // 400)))
                app.ingest(src.poll())
            assert len(app.state.series["steps_per_s"]) == 600
            assert len(app.state.series["power_w"]) == 600
            app.refresh_now()
            await pilot.pause()
            charts = app.visible_charts
            build = []
            for _ in range(frames):
                a = clock()
                app.redraw_charts()
                for c in charts:
                    c.render()  # what the paint does: build the plotext canvas
                build.append((clock() - a) * 1000)
            bare = []
            for _ in range(frames):
                a = clock()
                await pilot.pause()  # what waiting for an idle app costs with nothing to do
                bare.append((clock() - a) * 1000)
            whole = []
            for _ in range(frames):
                app.state.version += 1
                a = clock()
                app.redraw()
                await pilot.pause()  # let Textual render and composite the frame
                whole.append((clock() - a) * 1000)
            build.sort()
            return (
                len(charts),
                statistics.median(build),
                build[int(0.95 * (len(build) - 1))],
                max(0.0, statistics.median(whole) - statistics.median(bare)),
            )

    return asyncio.run(main())


Row = tuple[str, str, str]  # (measure, result, target)


def machine_line() -> str:
    """ "machine: x86_64, 2 cores, Python 3.11.7": the header line of a frame benchmark's output."""
    cpu = platform.processor() or platform.machine()
    return f"machine: {cpu}, {os.cpu_count()} cores, Python {platform.python_version()}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="skip the whole-process (pty) runs")
    args = ap.parse_args()
    print(machine_line(), flush=True)
    rows = startup_rows()
    if not args.quick:
        rows += whole_process_rows()
    rows += redraw_rows()
    print_table(rows)
    return 0


def startup_rows() -> list[Row]:
    """The fresh import of the app and the in-process first frame, best of 3 each."""
    imp = min(fresh_import_s() for _ in range(3))
    ff = min(in_process_first_frame_s() for _ in range(3))
    return [
        ("import gpudash.tui.app (fresh interpreter, best of 3)", f"{imp * 1000:.0f} ms", "—"),
        ("first frame, in process (construct app -> painted)", f"{ff * 1000:.0f} ms", "≤ 1500 ms"),
    ]


def whole_process_rows() -> list[Row]:
    """The first frame in a pty: the demo (best of 3), and the real ``gpudash`` where it is installed."""
    rows: list[Row] = []
    demo = [sys.executable, "-m", "gpudash.tui.demo", "--gpu"]
    times = [pty_first_frame(demo, b"Quit")[0] for _ in range(3)]
    ok = [x for x in times if x is not None]
    rows.append(
        (
            "first frame, whole process: python -m gpudash.tui.demo",
            f"{min(ok) * 1000:.0f} ms" if ok else "not seen",
            "≤ 1500 ms",
        )
    )
    exe = shutil.which("gpudash") or str(Path(sys.executable).parent / "gpudash")
    if os.path.exists(exe):
        first, note = pty_first_frame([exe], b"Quit", after_frame=child_torch_state)
        rows.append(
            (
                f"first frame, whole process: gpudash ({note})",
                f"{first * 1000:.0f} ms" if first else "not seen",
                "≤ 1500 ms",
            )
        )
    return rows


def redraw_rows() -> list[Row]:
    """The redraw of the charts and the whole frame, at 100x30 and at 160x48."""
    rows: list[Row] = []
    for size in ((100, 30), (160, 48)):
        n, med, p95, whole = redraw_costs(size)
        rows.append(
            (
                f"redraw {n} charts at full buffers, {size[0]}x{size[1]} (median / p95)",
                f"{med:.1f} / {p95:.1f} ms",
                "≤ 25 ms",
            )
        )
        rows.append(
            (
                f"whole frame: state -> charts -> Textual paint, {size[0]}x{size[1]} (median, approx.)",
                f"{whole:.1f} ms",
                "—",
            )
        )
    return rows


def print_table(rows: list[Row]) -> None:
    """The rows as a plain-text table: measure, result, target."""
    w = max(len(r[0]) for r in rows)
    print(f"\n{'measure':<{w}}  {'result':>16}  target")
    print("-" * (w + 30))
    for name, val, target in rows:
        print(f"{name:<{w}}  {val:>16}  {target}")


if __name__ == "__main__":
    sys.exit(main())
