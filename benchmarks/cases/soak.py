"""Soak: the dashboard (through Textual's Pilot, recording to CSV) over the real engine for an hour,
a change every minute, and whether anything grows.

The run opens with a tour: every change of the cycle once, every other family visited once, a
change every ``tour_every`` seconds (20), so that what a process loads once and keeps (each
family's imports, the JPEG cache, cuDNN's and the allocator's first pools) is loaded inside the
warm-up, not counted as growth. Then a change every ``change_every`` seconds. A Pilot-driven app
never renders its frames to escape codes, so what a real terminal costs the dashboard is not
measured here: ``soak_dashboard`` soaks it in tmux. Every second change goes back to the
configuration the run started in (the base): batch ×2 and back, knobs on and off, the next variant
and back, another workload family (each in turn) and back. Just before each change it samples,
from /proc: the RSS, open fds and threads of this process (the dashboard, its recorder and the NVML
thread) and of the workload process with its children (DataLoader workers), the GPU's memory in use
(NVML), what the workload's CUDA caching allocator holds (allocated and reserved) and the rest
(NVML − reserved). Per column, the verdict "flat within 5% after the first 5 minutes" (a sixth of a
shorter run), judged by ``tests/soaks.py``; the allocator's columns also like for like. Ctrl-C
keeps what was measured so far."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from benchmarks.harness.case import BadParameter, Unavailable
from benchmarks.harness.context import Run
from benchmarks.harness.params import as_dict, param
from tests.soaks import Row, Soak, default_warmup_minutes, proc_stats, table, tree_stats

CPU_KNOBS = "channels_last=on"  # what "knobs on" sets, by device type
CUDA_KNOBS = "amp=bf16,channels_last=on,cudnn_benchmark=on"


def running_label(app: Any) -> str:
    """What runs now, as the table shows it: "encdec serial b8 (channels_last=on)"."""
    running, knobs = app.state.run.running, app.controller.knobs.text
    if running is None:
        return "(nothing runs)"
    return f"{running.workload} {running.variant} b{running.batch_size}" + (f" ({knobs})" if knobs != "none" else "")


def sample(app: Any, minute: float, before: str) -> Row:
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


async def run_soak(args: Any, soak: Soak) -> None:
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
                row = sample(app, (now - t0) / 60, before)
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


@dataclass(frozen=True)
class Params:
    minutes: float = param(60.0, "how long")
    change_every: float = param(60.0, "seconds between changes")
    tour_every: float = param(20.0, "seconds between the opening tour's changes (0: no tour)")
    measure_every: float | None = param(None, "seconds between measurements (none: just before each change)")
    warmup_minutes: float | None = param(None, "left out of the verdicts (none: 5, or a sixth of a shorter run)")
    workload: str = param("encdec", "the family it starts on")
    device: str = param("auto", "auto, cpu, cuda, cuda:N")
    sample_interval: float = param(0.25, "the dashboard's sample interval, seconds")
    out_dir: str = param("soak-out", "the recording and the workload's log go here")


def settings(p: Params) -> Any:
    """The parameters with their defaults filled in, checked."""
    args = SimpleNamespace(**as_dict(p))
    args.measure_every = p.measure_every or p.change_every
    args.warmup_minutes = default_warmup_minutes(p.minutes) if p.warmup_minutes is None else p.warmup_minutes
    if min(p.minutes, p.change_every, args.measure_every) <= 0 or min(args.warmup_minutes, p.tour_every) < 0:
        raise BadParameter("minutes, change_every and measure_every must be > 0, warmup_minutes and tour_every ≥ 0")
    if not Path("/proc/self/status").exists():
        raise Unavailable("the soak reads /proc: Linux only")
    args.out_dir = Path(p.out_dir)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    return args


def measure(run: Run, p: Params) -> None:
    args = settings(p)
    soak = Soak()
    try:
        asyncio.run(run_soak(args, soak))
    except KeyboardInterrupt:
        _say("interrupted: the table so far")
    run.comment(f"gpudash soak: {p.minutes:g} min, a change every {p.change_every:g} s, device {p.device}")
    run.line(f"measured every {args.measure_every:g} s")
    run.line()
    for line in table(soak, args.warmup_minutes, soak.base).splitlines():
        run.line(line)
    toured = sum(1 for c in soak.changes if " tour: " in c)
    run.line()
    run.line(
        f"changes: {len(soak.changes)} (the opening tour's {toured}, every {p.tour_every:g} s); "
        f"errors and crashes: {len(soak.trouble)}"
    )
    for t in soak.trouble[:20]:
        run.line(f"- {t}")
