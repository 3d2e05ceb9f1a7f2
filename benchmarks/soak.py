"""Soak: the dashboard (through Textual's Pilot, recording to CSV) over the real engine for an
hour, a change every minute, and whether anything grows.

    .venv/bin/python benchmarks/soak.py                                # 60 minutes, a change a minute
    .venv/bin/python benchmarks/soak.py --minutes 6 --change-every 30   # a quick check
    .venv/bin/python benchmarks/soak.py --device cuda --minutes 30 --out docs/soak-gpu.md

The run opens with a tour: every change of the cycle once, every other family visited once, a
change every ``--tour-every`` seconds (20), so that what a process loads once and keeps (each
family's imports, the JPEG cache, cuDNN's and the allocator's first pools) is loaded inside the
warm-up, not counted as growth. Then a change every ``--change-every`` seconds.
A Pilot-driven app never renders its frames to escape codes, so what a real terminal costs the
dashboard is not measured here: ``benchmarks/soak_dashboard.py`` soaks it in tmux.
Every second change goes back to the configuration the run started in (the base), so the base
is measured again and again between the others: batch ×2 and back, knobs on and off, the next
variant and back, another workload family (each in turn, DataLoader workers and all) and back.
Just before each change it samples, from /proc (Linux): the RSS, open file descriptors and
threads of this process (the dashboard, its recorder and the NVML thread) and of the workload
process with its children (DataLoader workers), the GPU's memory in use (NVML, when there
is one: the whole device), what the workload's CUDA caching allocator holds (allocated and
reserved, from its latest sample) and the rest (NVML − reserved: the context, loaded kernels,
the libraries' handles), which tells the allocator's growth from the driver's and the
libraries'. It prints a markdown table and, per column, the verdict "flat within 5% after the
first 5 minutes" (a sixth of the run when it is shorter than 30 minutes): the spread (max −
min) of the base configuration's values after the warm-up, relative to the first of them (for
counts of fds and threads a spread of one also passes: one coming and going is not growth).
The allocator's cache of the base depends on the configuration before it (where the model's
tensors were left), so reserved and NVML memory are also judged like for like: each
measurement against the earlier ones that followed the same configuration.
Ctrl-C prints what was measured so far.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as _dt
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.soaks import Row, Soak, add_measure_options, default_warmup_minutes, proc_stats, table, tree_stats  # noqa: E402

CPU_KNOBS = "channels_last=on"  # what "knobs on" sets, by device type
CUDA_KNOBS = "amp=bf16,channels_last=on,cudnn_benchmark=on"


def running_label(app: Any) -> str:
    """What runs now, as the table shows it: "encdec serial b8 (channels_last=on)"."""
    state, knobs = app.state, app.controller.knobs_text
    return f"{state.workload} {state.variant} b{state.batch_size}" + (f" ({knobs})" if knobs != "none" else "")


def measure(app: Any, minute: float, before: str) -> Row:
    source, state = app.source, app.state
    parent = proc_stats(os.getpid())
    pid = source.runner.pid
    workload = tree_stats(pid) if pid is not None else None
    gpu = source.sampler.latest
    values: dict[str, float | None] = {
        "parent_rss": parent.rss_mib if parent else None,
        "parent_fds": parent.fds if parent else None,
        "parent_threads": parent.threads if parent else None,
        "workload_rss": workload.rss_mib if workload else None,
        "workload_fds": workload.fds if workload else None,
        "workload_threads": workload.threads if workload else None,
        "gpu_mem": gpu.mem_used_mib if gpu is not None and source.gpu_info.available else None,
        "cuda_allocated": state.last_sample.cuda_allocated_mib if state.last_sample else None,
        "cuda_reserved": state.last_sample.cuda_reserved_mib if state.last_sample else None,
    }
    nvml, reserved = values["gpu_mem"], values["cuda_reserved"]
    values["gpu_outside"] = nvml - reserved if nvml is not None and reserved is not None else None
    steps = state.last_sample.steps if state.last_sample else 0
    return Row(minute, values, workload.processes if workload else 0, running_label(app), steps, before)


@dataclass(frozen=True)
class Base:
    """The configuration the soak comes back to."""

    workload: str
    variant: str
    batch_size: int

    @property
    def label(self) -> str:
        return f"{self.workload} {self.variant} b{self.batch_size}"


# -- the changes ----------------------------------------------------------------------------------------
def change_cycle(app: Any, base: Base) -> list[tuple[str, Callable[[], Any]]]:
    """What a user would do, in turn, every second change back to ``base``; each returns the
    dashboard's Notice (what the user would read)."""
    from gpudash.core.protocol import SetBatchSize, SetKnobs, SetVariant, SwitchWorkload
    from workloads.registry import FAMILIES

    controller = app.controller
    others = [f for f in FAMILIES if f != base.workload]
    visits = iter(range(10**9))

    def knobs_on() -> Any:
        text = CUDA_KNOBS if controller.state.device.startswith("cuda") else CPU_KNOBS
        return controller.send(SetKnobs(text), f"knobs {text}")

    def other_family() -> Any:
        return controller.requests.switch_workload(others[next(visits) % len(others)])

    def send(control: Any) -> Callable[[], Any]:
        return lambda: controller.send(control, str(control))

    return [
        ("batch ×2 (+)", lambda: controller.requests.scale_batch(True)),
        ("back: batch", send(SetBatchSize(base.batch_size))),
        ("knobs on", knobs_on),
        ("back: knobs off", send(SetKnobs("none"))),
        ("next variant (v)", controller.requests.next_variant),
        ("back: variant", send(SetVariant(base.variant))),
        ("another workload (w)", other_family),
        ("back: workload", send(SwitchWorkload(base.workload, base.variant, base.batch_size))),
    ]


def tour(changes: list[tuple[str, Callable[[], Any]]], families: int) -> list[tuple[str, Callable[[], Any]]]:
    """The opening tour: each change of the cycle once, then every other family (and back)."""
    other_family_and_back = changes[-2:]
    return [*changes[:-2], *other_family_and_back * max(1, families - 1)]


def note_trouble(app: Any, soak: Soak, seen: set[int]) -> None:
    """Errors and crashes since the last look (each once)."""
    for e in list(app.state.events):
        if id(e) in seen or e.kind not in ("error", "crashed"):
            continue
        seen.add(id(e))
        soak.trouble.append(f"t={e.time_s:.0f} s {e.kind}: {e.message or e.label}")


async def run_soak(args: argparse.Namespace, soak: Soak) -> None:
    from gpudash.core.protocol import RunConfig
    from gpudash.host.session import EngineSession
    from gpudash.tui.app import GpuDashApp
    from gpudash.tui.entry_points import prepare_for_child_processes

    prepare_for_child_processes()
    config = RunConfig(workload=args.workload, device=args.device, sample_interval_s=args.sample_interval)
    source = EngineSession(config, log_path=str(args.out_dir / "soak-child.log"))
    app = GpuDashApp(source, toasts=False)
    seen: set[int] = set()
    async with app.run_test(size=(120, 36)) as pilot:
        t0 = await _until_running(app, pilot)
        app.start_recording(str(args.out_dir / "soak.csv"))
        running = app.state.run.running
        assert running is not None, "the dashboard reported no running configuration"
        base = Base(running.workload, running.variant, running.batch_size)
        soak.base = base.label
        from workloads.registry import FAMILIES

        changes = change_cycle(app, base)
        opening = tour(changes, len(FAMILIES)) if args.tour_every > 0 else []
        end = t0 + args.minutes * 60
        next_change, next_measure, n = t0 + (args.tour_every if opening else args.change_every), t0, 0
        before = ""  # what ran before the last change
        while True:
            now = time.monotonic()
            if now >= next_measure:
                row = measure(app, (now - t0) / 60, before)
                soak.rows.append(row)
                _say(
                    f"minute {row.minute:5.1f}: "
                    + ", ".join(f"{k}={v:.1f}" for k, v in row.values.items() if v is not None)
                    + f"; {row.running}"
                )
                next_measure += args.measure_every
            if now >= end:
                break
            if now >= next_change:
                touring = n < len(opening)
                name, change = opening[n] if touring else changes[(n - len(opening)) % len(changes)]
                before = running_label(app)  # the like-for-like verdicts group by it
                notice = change()
                soak.changes.append(
                    f"t={now - t0:.0f} s {'tour: ' if touring else ''}{name}: {getattr(notice, 'text', notice)}"
                )
                n += 1
                next_change += args.tour_every if n < len(opening) else args.change_every
            note_trouble(app, soak, seen)
            if app.state.ended:  # a crash: say so, restart, go on (the table shows it)
                soak.trouble.append(f"t={now - t0:.0f} s workload ended ({app.state.status}); restarting")
                await pilot.press("r")
            await pilot.pause(1.0)
        app.action_record()  # stop the recording (the CSV stays)
        await pilot.press("q")
        await pilot.pause(0.5)


async def _until_running(app: Any, pilot: Any) -> float:
    """Wait for the first sample; the soak's clock starts then."""
    deadline = time.monotonic() + 300
    while app.state.last_sample is None:
        if time.monotonic() > deadline or app.state.ended:
            raise SystemExit(f"soak: the workload did not start ({app.state.status}); see the log")
        await pilot.pause(0.2)
    return time.monotonic()


def _say(text: str) -> None:
    print(f"soak: {text}", file=sys.stderr, flush=True)


def report(args: argparse.Namespace, soak: Soak) -> str:
    import torch

    gpu = torch.cuda.get_device_name(0) if args.device.startswith("cuda") and torch.cuda.is_available() else "none"
    head = (
        f"# gpudash soak: {args.minutes:g} min, a change every {args.change_every:g} s\n\n"
        f"{_dt.datetime.now().astimezone().isoformat(timespec='minutes')} · {platform.node()} · "
        f"{os.cpu_count()} CPUs · torch {torch.__version__} · device {args.device} · GPU {gpu} · "
        f"measured every {args.measure_every:g} s\n"
    )
    body = table(soak, args.warmup_minutes, soak.base)
    toured = sum(1 for c in soak.changes if " tour: " in c)
    notes = [
        "",
        f"changes: {len(soak.changes)} (the opening tour's {toured}, every {args.tour_every:g} s); "
        f"errors and crashes: {len(soak.trouble)}",
    ]
    notes += [f"- {t}" for t in soak.trouble[:20]]
    return "\n".join([head, body, *notes]) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=60.0, help="how long (default: 60)")
    p.add_argument("--change-every", type=float, default=60.0, metavar="S", help="seconds between changes (60)")
    p.add_argument(
        "--tour-every",
        type=float,
        default=20.0,
        metavar="S",
        help="seconds between the opening tour's changes (20; 0: no tour)",
    )
    add_measure_options(p)
    p.add_argument("-w", "--workload", default="encdec", help="the family it starts on (encdec)")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N (auto)")
    p.add_argument("--sample-interval", type=float, default=0.25, metavar="S", help="the dashboard's (0.25)")
    p.add_argument("--out-dir", type=Path, default=Path("soak-out"), help="CSV and log go here (./soak-out)")
    p.add_argument("--out", type=Path, help="also write the markdown report here")
    args = p.parse_args(argv)
    if args.measure_every is None:
        args.measure_every = args.change_every
    if args.warmup_minutes is None:
        args.warmup_minutes = default_warmup_minutes(args.minutes)
    if min(args.minutes, args.change_every, args.measure_every) <= 0 or min(args.warmup_minutes, args.tour_every) < 0:
        p.error("--minutes, --change-every and --measure-every must be > 0, --warmup-minutes and --tour-every ≥ 0")
    if not Path("/proc/self/status").exists():
        p.error("the soak reads /proc: Linux only")
    args.out_dir.mkdir(parents=True, exist_ok=True)
    soak = Soak()
    try:
        asyncio.run(run_soak(args, soak))
    except KeyboardInterrupt:
        _say("interrupted: the table so far")
    text = report(args, soak)
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
