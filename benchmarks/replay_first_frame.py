"""``gpudash replay`` of large recordings: first frame, time to read the whole file, and how long
the dashboard's own thread stalls while it does.

    .venv/bin/python benchmarks/replay_first_frame.py                 # 200, 10 000, 50 000 and 200 000 rows
    .venv/bin/python benchmarks/replay_first_frame.py --rows 200000 --quick   # in process only

For each size it writes a synthetic recording (a sample row joined with an NVML sample every
0.25 s, a change every 20 000 rows) and measures
  * whole process: ``gpudash replay FILE`` in a pseudo-terminal, exec -> the first full frame
    (the footer drawn), best of 3;
  * in process (headless Textual): app construction -> first frame painted; -> every row
    handed to the dashboard (``reading …%`` in the header meanwhile); the longest gap between
    two ticks of a 20 ms timer on the app's thread (how long the UI was unresponsive);
  * for comparison, parsing the whole file on the calling thread (what the dashboard did before
    the reader thread: its screen stayed blank that long).
Target: first frame ≤ 1 s at 200 000 rows. Timings are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))  # gpudash, and benchmarks.tui_frame beside this script

from benchmarks.tui_frame import machine_line, pty_first_frame  # noqa: E402
from gpudash.core.protocol import Event, EventKind, GpuSample, Sample  # noqa: E402
from gpudash.recording.csvformat import event_row, format_row, header, sample_row  # noqa: E402

SIZES = (200, 10_000, 50_000, 200_000)  # 200: the baseline, what any replay costs


def write_recording(path: Path, rows: int) -> None:
    """A recording of ``rows`` sample rows (with NVML values), a batch change every 20 000."""
    with path.open("w") as f:
        f.write(format_row(header()))
        f.write(format_row(event_row(Event(0.5, EventKind.STARTED, message="started encdec/serial"))))
        batch = 8
        for i in range(rows):
            t = 1 + i * 0.25
            if i and i % 20_000 == 0:
                f.write(format_row(event_row(Event(t, EventKind.CHANGED, "batch_size", str(batch), str(batch * 2)))))
                batch *= 2
            rate = 100.0 + (i % 7)
            s = Sample(t, "encdec", "serial", batch, i, i * batch, 0.25, rate, rate * batch, 10.0, 13.0, 0.0)
            g = GpuSample(t, 80.0, 40.0, 4096.0, 81559.0, 300.0, 1980.0, 60.0, 300.0 * t, "")
            f.write(format_row(sample_row(s, g)))


def parse_on_this_thread_s(path: Path) -> float:
    """Seconds to parse the whole file where it is asked for (the dashboard's thread, before)."""
    from gpudash.recording.replay import RecordingReader

    t0 = time.perf_counter()
    with path.open(encoding="utf-8", newline="") as f:
        reader = RecordingReader(f, path.name)
        while True:
            reader.read()
            if reader.records.at_end:
                reader.finish()
                break
    return time.perf_counter() - t0


def in_process(path: Path) -> tuple[float, float, float, bool]:
    """(first frame s, everything read s, longest UI stall s, progress shown) in a headless app."""
    from gpudash.recording.replay import ReplaySource
    from gpudash.tui.app import GpuDashApp

    async def main() -> tuple[float, float, float, bool]:
        t0 = time.perf_counter()
        source = ReplaySource(path)
        app = GpuDashApp(source, toasts=False)
        ticks: list[float] = []
        seen_progress = False
        async with app.run_test(size=(120, 36)) as pilot:
            app.set_interval(0.02, lambda: ticks.append(time.perf_counter()))
            while app.first_frame_at is None:
                await pilot.pause(0.001)
            first = app.first_frame_at - t0
            while not (app.source_ready and not source.alive):
                seen_progress = seen_progress or app.status_text().startswith("reading")
                await pilot.pause(0.01)
            loaded = time.perf_counter() - t0
            gaps = [b - a for a, b in zip(ticks, ticks[1:], strict=False)]
            return first, loaded, max(gaps, default=0.0), seen_progress

    return asyncio.run(main())


def whole_process_first_frame_s(path: Path) -> float | None:
    exe = shutil.which("gpudash") or str(Path(sys.executable).parent / "gpudash")
    times = [pty_first_frame([exe, "replay", str(path)], b"Quit", timeout=30)[0] for _ in range(3)]
    ok = [t for t in times if t is not None]
    return min(ok) if ok else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, action="append", help="recording sizes (default: 200, 10k, 50k, 200k)")
    ap.add_argument("--quick", action="store_true", help="skip the whole-process (pty) runs")
    args = ap.parse_args()
    print(f"{machine_line()}, load average {os.getloadavg()[0]:.1f}", flush=True)
    table = []
    with tempfile.TemporaryDirectory() as tmp:
        for rows in args.rows or SIZES:
            path = Path(tmp) / f"replay-{rows}.csv"
            write_recording(path, rows)
            mib = path.stat().st_size / 2**20
            pty = None if args.quick else whole_process_first_frame_s(path)
            first, loaded, stall, progress = in_process(path)
            sync = parse_on_this_thread_s(path)
            table.append((rows, mib, pty, first, loaded, stall, progress, sync))
            print(f"  {rows} rows done", flush=True)

    def ms(x: float | None) -> str:
        return "–" if x is None else f"{x * 1000:.0f} ms"

    cols = (
        "rows",
        "MiB",
        "first frame (process)",
        "first frame (in process)",
        "all rows read",
        "longest UI stall",
        "progress shown",
        "parse on the UI thread",
    )
    print("\n| " + " | ".join(cols) + " |")
    print("|" + "|".join("--:" for _ in cols) + "|")
    for rows, mib, pty, first, loaded, stall, progress, sync in table:
        print(
            f"| {rows:,} | {mib:.1f} | {ms(pty)} | {ms(first)} | {loaded:.1f} s | {ms(stall)} | "
            f"{'yes' if progress else 'no'} | {sync:.1f} s |"
        )
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")
    print("target: first frame ≤ 1 s at 200 000 rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
