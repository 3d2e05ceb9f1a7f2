"""The gpudash dashboard: a Textual app over an ``EngineSource`` (live engine or a replayed CSV).

Threading: ``source.start()``, ``restart()`` and ``stop()`` may block (process spawn, joins),
so they run in thread workers that only hand results back through ``call_from_thread``;
``source.poll()`` never blocks and runs on a 10 Hz timer on the app's thread, feeding
``DashState``. A separate timer redraws the visible charts 3 times a second, and only when
something changed: data rate is not frame rate.

Torch is never imported here: the first frame does not wait for the child's torch import.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Any

from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Container
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import Footer, Static

from gpudash.protocol import (
    EventKind,
    Control,
    EngineSource,
    Event,
    Message,
    Pause,
    Resume,
    RunConfig,
    SetBatchSize,
    SetVariant,
    SwitchWorkload,
)
from gpudash.stats import DashState
from gpudash.tui.charts import CHARTS, MetricChart
from gpudash.tui.widgets import HelpScreen, MessageBar, PickScreen, PromptScreen, RunHeader, StatsPanel
from workloads.registry import FAMILIES, WorkloadError, parse_batch_size

STARTING = "starting workload (importing torch)…"
HINT = "? help · ctrl+p all commands"
CONTROL_ACTIONS = frozenset(
    {"toggle_pipeline", "cycle_variant", "switch_workload", "batch_double", "batch_half",
     "batch_typed", "pause_resume", "restart", "record"}
)
COMPACT_CHARTS = ("throughput", "step_time", "gpu_util", "power")
COMPACT_CHARTS_NO_GPU = ("throughput", "step_time", "syncs")
TALL = 40  # rows from which all six charts are shown

RecorderFactory = Callable[[str, dict[str, Any]], Any]


def _default_recorder(path: str, metadata: dict[str, Any]) -> Any:
    from gpudash.record import CsvRecorder  # the engine's recorder: same format as --record

    return CsvRecorder(path, metadata)


class GpuDashApp(App[int]):
    """Live charts of a training workload, its controls, and the before/after of every change."""

    CSS_PATH = "app.tcss"
    TITLE = "gpudash"
    ENABLE_COMMAND_PALETTE = True

    BINDINGS = [
        Binding("p", "toggle_pipeline", "Pipeline", tooltip="Toggle serial ↔ pipelined"),
        Binding("v", "cycle_variant", "Variant", tooltip="Next variant of this workload"),
        Binding("w", "switch_workload", "Workload", tooltip="Switch to another workload family"),
        Binding("plus,equals_sign", "batch_double", "Batch×2", key_display="+"),
        Binding("minus", "batch_half", "÷2", key_display="-"),
        Binding("b", "batch_typed", "Batch=", tooltip="Type a batch size"),
        Binding("space", "pause_resume", "Pause"),
        Binding("r", "restart", "Restart"),
        Binding("c", "record", "Record", tooltip="Start/stop recording to CSV"),
        Binding("question_mark,f1", "help", "Help", key_display="?"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(
        self,
        source: EngineSource,
        *,
        replay: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], datetime] = datetime.now,
        recorder_factory: RecorderFactory | None = None,
        maxlen: int = 600,
        poll_interval_s: float = 0.1,
        redraw_interval_s: float = 0.33,
        toasts: bool = True,
    ) -> None:
        super().__init__()
        self.source = source
        self.replay = bool(getattr(source, "replay", False)) if replay is None else replay
        self.clock = clock
        self.wall_clock = wall_clock
        self.recorder_factory = recorder_factory or _default_recorder
        self.poll_interval_s = poll_interval_s
        self.redraw_interval_s = redraw_interval_s
        self.toasts = toasts
        self.state = DashState(maxlen=maxlen, mode="whole" if self.replay else "window")
        cfg: RunConfig = getattr(source, "config", RunConfig())
        self.config = cfg
        self.state.workload = cfg.workload
        fam = FAMILIES.get(cfg.workload)
        self.state.variant = cfg.variant or (fam.default_variant if fam else "")
        self.state.batch_size = cfg.batch_size or 0
        self.device = cfg.device
        self.recorder: Any = None
        self.recording_path: str | None = None
        self.recorded_messages = 0
        self._bad_rows_shown = 0  # the replay's malformed-row count last told to the user
        self.sent: list[Control] = []  # every control sent, oldest first
        self._pending_batch: int | None = None
        self._source_ready = False  # source.start() has returned
        self._stopping = False
        self._drawn_version = -1
        self._drawn_size: tuple[tuple[int, int], ...] | None = None
        self._t0 = clock()
        self.first_frame_at: float | None = None
        self.redraws = 0

    # -- layout -----------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield RunHeader(id="header")
        yield MessageBar(id="messages")
        with Container(id="charts"):
            for spec in CHARTS:
                yield MetricChart(spec)
            yield Static(id="gpu-notice")
        yield StatsPanel(id="stats")
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        self.query_one(MessageBar).say(
            f"replaying {getattr(self.source, 'path', 'a recording')} (read-only) · {HINT}"
            if self.replay
            else f"{STARTING} · {HINT}"
        )
        self._apply_layout()
        self._redraw(force=True)
        self.call_after_refresh(self._first_frame)
        self.set_interval(self.poll_interval_s, self._drain)
        self.set_interval(self.redraw_interval_s, self._redraw)
        self.run_worker(self._start_source, thread=True, name="start-source", exit_on_error=False)

    def _first_frame(self) -> None:
        if self.first_frame_at is None:
            self.first_frame_at = time.perf_counter()

    def on_resize(self) -> None:
        self._apply_layout()
        self._redraw(force=True)

    def _gpu_available(self) -> bool:
        info = self.state.gpu_info
        return info is None or info.available

    def _apply_layout(self) -> None:
        gpu = self._gpu_available()
        tall = self.size.height >= TALL
        if gpu:
            shown = {s.id for s in CHARTS} if tall else set(COMPACT_CHARTS)
        else:
            shown = set(COMPACT_CHARTS_NO_GPU)
        for chart in self.query(MetricChart):
            chart.display = chart.spec.id in shown
        notice = self.query_one("#gpu-notice", Static)
        notice.display = not gpu
        if not gpu:
            info = self.state.gpu_info
            why = info.unavailable if info is not None else "unknown"
            notice.update(
                "GPU charts are empty: no NVML telemetry.\n\n"
                f"NVML unavailable: {why}\n\n"
                "Throughput and step times are measured as usual."
            )

    @property
    def visible_charts(self) -> list[MetricChart]:
        return [c for c in self.query(MetricChart) if c.display]

    # -- the source -------------------------------------------------------------------------------
    def _start_source(self) -> None:
        try:
            self.source.start()
        except Exception as exc:  # noqa: BLE001 - shown to the user, the UI stays up
            self.call_from_thread(self._source_failed, f"could not start: {exc}")
            return
        self.call_from_thread(self._source_started)

    def _source_started(self) -> None:
        self._source_ready = True
        cfg = getattr(self.source, "config", None)  # a replay knows its config only once opened
        if isinstance(cfg, RunConfig) and self.device == "auto" and cfg.device != "auto":
            self.device = cfg.device
        self._drain()

    def _source_failed(self, why: str) -> None:
        self.state.status, self.state.status_message = "crashed", why
        self.say(why, "error")

    def _drain(self) -> None:
        if not self._source_ready or self._stopping:
            return
        info = getattr(self.source, "gpu_info", None)
        if info is not None and info != self.state.gpu_info:
            self.state.gpu_info = info
            self._apply_layout()
        try:
            messages = self.source.poll()
        except Exception as exc:  # noqa: BLE001
            self.say(f"reading the workload's messages failed: {exc}", "error")
            return
        self.ingest(messages)
        bad = getattr(self.source, "bad_rows", 0) if self.replay else 0
        if isinstance(bad, int) and bad > self._bad_rows_shown:
            self._bad_rows_shown = bad
            self.say(f"replay: {bad} malformed row{'s' if bad != 1 else ''} skipped", "warning")

    def refresh_now(self) -> None:
        """Drain the source and redraw everything at once (tests, snapshots, benchmarks)."""
        self._drain()
        self._redraw(force=True)

    @property
    def source_ready(self) -> bool:
        return self._source_ready

    def ingest(self, messages: Iterable[Message]) -> None:
        """Feed messages to the state, the recording and the message bar (app thread only)."""
        for msg in messages:
            self.state.ingest(msg)
            if self.recorder is not None:
                try:
                    self.recorder.on_message(msg)
                    self.recorded_messages += 1
                except Exception as exc:  # noqa: BLE001 - a full disk must not stop the dashboard
                    self._stop_recording(f"recording stopped: {exc}", "error")
            if isinstance(msg, Event):
                self._on_event(msg)

    def _on_event(self, e: Event) -> None:
        dev = e.details.get("device") if getattr(e, "details", None) else None
        if dev:
            self.device = dev
        if e.kind in (EventKind.STARTED, EventKind.CHANGED) and e.details:
            d = e.details
            if d.get("workload"):
                self.state.workload = d["workload"]
            if d.get("variant"):
                self.state.variant = d["variant"]
            if d.get("batch_size", "").isdigit():
                self.state.batch_size = int(d["batch_size"])
        if e.kind == EventKind.STARTING:
            self.say(f"{STARTING} ({e.message})" if e.message else STARTING)
        elif e.kind == EventKind.STARTED:
            self.say(e.message or f"started {self.state.workload} / {self.state.variant}")
        elif e.kind == EventKind.CHANGED:
            if e.what == "batch_size":
                self._pending_batch = None
            self.say(f"{e.label} at {e.time_s:.1f} s — stats now compare against the previous config")
        elif e.kind == EventKind.ERROR:
            if e.what == "batch_size":
                self._pending_batch = None
            text = e.message or e.label
            self.say(f"✗ {text} — still running {self.state.variant}, batch {self.state.batch_size}",
                     "error", toast=not self.replay)
        elif e.kind == EventKind.PAUSED:
            self.say("paused (space resumes)")
        elif e.kind == EventKind.RESUMED:
            self.say("resumed")
        elif e.kind == EventKind.CRASHED:
            why = e.message or "the workload process died"
            self.say(f"✗ workload crashed: {why} — press r to restart", "error", toast=not self.replay)
        elif e.kind == EventKind.STOPPED:
            self.say((e.message or "the workload stopped") + ("" if self.replay else " — press r to restart"))
        self.refresh_bindings()

    # -- drawing --------------------------------------------------------------------------------
    def run_time_s(self) -> float:
        if self.replay:
            return self.state.time_s
        return max(self.state.time_s, self.clock() - self._t0)

    def status_text(self) -> str:
        s = self.state
        if self.replay:
            following = getattr(self.source, "follow", False)
            return "following (read-only)" if following else "replay (read-only)"
        if s.status == "starting":
            return STARTING
        if s.status == "crashed":
            return "crashed — r restarts"
        return s.status

    def _redraw(self, force: bool = False) -> None:
        try:
            header = self.query_one(RunHeader)
            stats = self.query_one(StatsPanel)
        except NoMatches:  # closing: the widgets are gone before the timers stop
            return
        size = tuple((c.size.width, c.size.height) for c in self.visible_charts)
        header.show(
            self.state,
            device=self.device,
            run_time_s=self.run_time_s(),
            status=self.status_text(),
            recording=self.recording_path,
            source_label=os.path.basename(getattr(self.source, "path", "")) if self.replay else None,
        )
        if not force and self.state.version == self._drawn_version and size == self._drawn_size:
            return
        self._drawn_version, self._drawn_size = self.state.version, size
        self.redraw_charts()
        stats.show(self.state)

    def redraw_charts(self) -> None:
        t0, t1 = self.state.time_range()
        note = None
        if self.state.status == "starting" and not self.replay:
            note = STARTING
        for chart in self.visible_charts:
            chart.update_from(self.state, t0, t1, note=note)
        self.redraws += 1

    def say(self, text: str, severity: str = "info", toast: bool = False) -> None:
        try:
            bar = self.query_one(MessageBar)
        except NoMatches:  # closing (see _redraw)
            return
        bar.say(text, severity)
        if toast and self.toasts:
            self.notify(text, severity="error" if severity == "error" else "information",
                        timeout=6 if severity == "error" else 3)

    # -- controls -------------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in CONTROL_ACTIONS and self.replay:
            return False  # hidden: a recording cannot be steered
        if action == "restart":
            return self.state.status in ("crashed", "stopped")
        if action == "pause_resume":
            return self.state.status not in ("crashed", "stopped")
        return True

    def send(self, control: Control, note: str) -> bool:
        if self.replay:
            self.say("replay: read-only", "warning")
            return False
        if not self._source_ready:
            self.say("the workload is still starting; try again in a moment", "warning")
            return False
        if self.state.status in ("crashed", "stopped") or not self.source.alive:
            self.say("the workload is not running — press r to restart", "warning")
            return False
        try:
            self.source.send(control)
        except Exception as exc:  # noqa: BLE001
            self.say(f"could not send the control: {exc}", "error", toast=True)
            return False
        self.sent.append(control)
        self.say(note)
        return True

    def _family(self):
        return FAMILIES.get(self.state.workload)

    def _on_cpu(self) -> bool:
        return self.device.startswith("cpu")

    def _cuda_refusal(self, variant: str) -> str | None:
        fam = self._family()
        if fam is None or not self._on_cpu():
            return None
        try:
            info = fam.variant(variant)
        except WorkloadError:
            return None
        if info.needs_cuda:
            return f"{fam.name}/{variant} needs CUDA; this run is on the CPU — staying on {self.state.variant}"
        return None

    def action_toggle_pipeline(self) -> None:
        fam = self._family()
        if fam is None or fam.pipeline_toggle is None:
            self.say(f"{self.state.workload or 'this workload'} has no serial ↔ pipelined pair; "
                     "v cycles its variants", "warning")
            return
        serial, piped = fam.pipeline_toggle
        target = serial if self.state.variant == piped else piped
        refusal = self._cuda_refusal(target)
        if refusal:
            self.say(refusal, "error", toast=True)
            return
        self.send(SetVariant(target), f"switching to {target}…")

    def action_cycle_variant(self) -> None:
        fam = self._family()
        if fam is None:
            self.say("the workload is not known yet", "warning")
            return
        names = list(fam.variant_names)
        i = names.index(self.state.variant) if self.state.variant in names else -1
        skipped = []
        for k in range(1, len(names) + 1):
            cand = names[(i + k) % len(names)]
            if cand == self.state.variant:
                break
            if self._cuda_refusal(cand):
                skipped.append(cand)
                continue
            note = f"switching to {cand}…"
            if skipped:
                note += f" (skipped {', '.join(skipped)}: needs CUDA)"
            self.send(SetVariant(cand), note)
            return
        self.say(f"no other variant of {fam.name} runs here"
                 + (f" ({', '.join(skipped)} need CUDA)" if skipped else ""), "warning")

    def action_switch_workload(self) -> None:
        choices = [(f.name, f.title) for f in FAMILIES.values()]

        def picked(name: str | None) -> None:
            if name and name != self.state.workload:
                self.send(SwitchWorkload(name), f"switching to workload {name}…")

        self.push_screen(PickScreen("Switch workload (enter picks, escape cancels)", choices,
                                    self.state.workload), picked)

    def _base_batch(self) -> int | None:
        b = self._pending_batch or self.state.batch_size
        if not b:
            self.say("the batch size is not known until the workload has started", "warning")
            return None
        return b

    def set_batch(self, value: object) -> None:
        try:
            n = parse_batch_size(value)
        except WorkloadError as exc:
            self.say(f"✗ {exc} — batch stays {self.state.batch_size}", "error", toast=True)
            return
        if self.send(SetBatchSize(n), f"batch size {self.state.batch_size} → {n} requested…"):
            self._pending_batch = n

    def action_batch_double(self) -> None:
        b = self._base_batch()
        if b is not None:
            self.set_batch(b * 2)

    def action_batch_half(self) -> None:
        b = self._base_batch()
        if b is None:
            return
        if b <= 1:
            self.say("✗ batch size is already 1, the smallest there is", "error", toast=True)
            return
        self.set_batch(b // 2)

    def action_batch_typed(self) -> None:
        def validate(text: str) -> str | None:
            try:
                parse_batch_size(text)
            except WorkloadError as exc:
                return str(exc)
            return None

        def done(value: str | None) -> None:
            if value is not None:
                self.set_batch(value)

        self.push_screen(PromptScreen(f"Batch size (now {self.state.batch_size or '?'})",
                                      placeholder="a whole number ≥ 1", validate=validate), done)

    def action_pause_resume(self) -> None:
        if self.state.paused:
            self.send(Resume(), "resuming…")
        else:
            self.send(Pause(), "pausing at the next step…")

    def action_restart(self) -> None:
        if self.replay:
            return
        if self.state.status not in ("crashed", "stopped"):
            self.say("the workload is running; restart is for after a crash or stop", "warning")
            return
        self.state.status = "starting"
        self._source_ready = False
        self.say("restarting the workload…")
        self.run_worker(self._restart_source, thread=True, name="restart-source", exit_on_error=False)

    def _restart_source(self) -> None:
        try:
            self.source.restart()
        except Exception as exc:  # noqa: BLE001
            self.call_from_thread(self._source_failed, f"restart failed: {exc}")
            return
        self.call_from_thread(self._source_started)

    # -- recording --------------------------------------------------------------------------------
    def default_record_path(self) -> str:
        stamp = self.wall_clock().strftime("%Y%m%d-%H%M%S")
        return f"gpudash-{self.state.workload or 'run'}-{stamp}.csv"

    def action_record(self) -> None:
        if self.replay:
            return
        if self.recorder is not None:
            self._stop_recording(f"saved {self.recording_path} ({self.recorded_messages} messages)")
            return

        def validate(text: str) -> str | None:
            p = Path(text.strip()).expanduser()
            if not text.strip():
                return "give a file name"
            if p.exists():
                return f"{p} exists; choose another name"
            if not p.parent.exists():
                return f"folder {p.parent} does not exist"
            return None

        def done(value: str | None) -> None:
            if value:
                self.start_recording(str(Path(value.strip()).expanduser()))

        self.push_screen(PromptScreen("Record this run to CSV (same format as gpudash --record)",
                                      value=self.default_record_path(), validate=validate), done)

    def recording_metadata(self) -> dict[str, Any]:
        extra = {
            "recorded_by": "gpudash dashboard",
            "device": self.device,
            "recording_started_at_run_s": round(self.state.time_s, 3),
            "running_at_start": {"workload": self.state.workload, "variant": self.state.variant,
                                 "batch_size": self.state.batch_size},
        }
        try:
            from gpudash.record import run_metadata
        except ImportError:  # pragma: no cover - the engine's recorder is part of gpudash
            info = self.state.gpu_info
            meta = {"config": asdict(self.config), "gpu": asdict(info) if info else None, **extra}
        else:
            meta = run_metadata(self.config, self.state.gpu_info, **extra)
        # A recording started mid-run never sees the child's "started" event: take what the
        # session kept of it, the same way CsvRecorder._note_started would have.
        d = getattr(self.source, "started_details", None) or {}
        if d:
            meta.update(
                torch_version=d.get("torch") or meta.get("torch_version"),
                cuda_version=d.get("cuda") or meta.get("cuda_version"),
                device=d.get("device") or meta.get("device"),
                device_name=d.get("device_name"),
                started=dict(d),
            )
        return meta

    def start_recording(self, path: str) -> None:
        try:
            self.recorder = self.recorder_factory(path, self.recording_metadata())
        except Exception as exc:  # noqa: BLE001
            self.recorder = None
            self.say(f"✗ cannot record to {path}: {exc}", "error", toast=True)
            return
        self.recording_path = path
        self.recorded_messages = 0
        self.say(f"● recording to {path} (c stops)")
        self._redraw(force=True)

    def _stop_recording(self, note: str, severity: str = "info") -> None:
        rec, self.recorder = self.recorder, None
        if rec is not None:
            try:
                rec.close()
            except Exception as exc:  # noqa: BLE001
                note, severity = f"closing the recording failed: {exc}", "error"
        self.recording_path = None
        self.say(note, severity, toast=True)
        self._redraw(force=True)

    # -- help, palette, quit ----------------------------------------------------------------------
    def key_help(self) -> list[tuple[str, str]]:
        out = []
        for b in self.BINDINGS:
            assert isinstance(b, Binding)
            if self.replay and b.action in CONTROL_ACTIONS:
                continue
            key = b.key_display or b.key.split(",")[0]
            text = "leave" if (self.replay and b.action == "quit") else _ACTION_HELP.get(b.action, b.description)
            out.append((key, text))
        out.append(("ctrl+p", "command palette: every action by name"))
        return out

    def action_help(self) -> None:
        charts = [(c.title, c.help) for c in CHARTS]
        self.push_screen(HelpScreen(self.key_help(), charts, self.replay,
                                    log_path=getattr(self.source, "log_path", None)))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for b in self.BINDINGS:
            assert isinstance(b, Binding)
            if b.action == "quit" or (self.replay and b.action in CONTROL_ACTIONS):
                continue
            key = b.key_display or b.key.split(",")[0]
            yield SystemCommand(
                f"{_ACTION_TITLE.get(b.action, b.description)} ({key})",
                _ACTION_HELP.get(b.action, b.description),
                getattr(self, f"action_{b.action}"),
            )

    async def action_quit(self) -> None:
        if self._stopping:
            return
        self._stopping = True
        if self.recorder is not None:
            self._stop_recording(f"saved {self.recording_path}")
        self.say("stopping the workload…")
        worker = self.run_worker(self.source.stop, thread=True, name="stop-source", exit_on_error=False)
        await worker.wait()
        self.exit(0)


_ACTION_TITLE = {
    "toggle_pipeline": "Toggle pipelining",
    "cycle_variant": "Next variant",
    "switch_workload": "Switch workload",
    "batch_double": "Batch size ×2",
    "batch_half": "Batch size ÷2",
    "batch_typed": "Type a batch size",
    "pause_resume": "Pause / resume",
    "restart": "Restart the workload",
    "record": "Start / stop recording to CSV",
    "help": "Help: keys and charts",
}
_ACTION_HELP = {
    "toggle_pipeline": "switch between the family's serial and pipelined variants",
    "cycle_variant": "switch to the next variant of this workload family",
    "switch_workload": "pick another workload family (encdec, augment, sync_loss, input_pipeline)",
    "batch_double": "double the batch size",
    "batch_half": "halve the batch size",
    "batch_typed": "type a batch size",
    "pause_resume": "pause the training loop at the next step, or resume it",
    "restart": "start the workload again after a crash or stop",
    "record": "record the run to a CSV file (same format as gpudash --record); again to stop",
    "help": "the keys and what every chart means",
    "quit": "stop the workload cleanly and leave",
}


# -- entry points ---------------------------------------------------------------------------------
def prepare_for_child_processes() -> None:
    """Start multiprocessing's resource tracker while ``sys.stderr`` is still the real one.

    Inside ``App.run()`` Textual swaps ``sys.stderr`` for an object whose ``fileno()`` is -1;
    the tracker, started lazily by the engine's first ``Queue``, passes that fd to its own
    process and fails with "bad value(s) in fds_to_keep". Call this before ``app.run()``.
    """
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()


def run_dashboard(config: RunConfig) -> int:
    """``gpudash``: the live dashboard over the engine. Returns the exit code."""
    from gpudash.session import EngineSession

    prepare_for_child_processes()
    source = EngineSession(config)  # the child's output goes to the session's log file
    app = GpuDashApp(source)
    try:
        code = app.run()
    finally:
        source.stop()
    return int(code or 0)


def run_replay(path: str, follow: bool) -> int:
    """``gpudash replay PATH``: the dashboard over a recorded CSV. Returns the exit code."""
    import sys

    from gpudash.replay import ReplaySource

    # `gpudash replay` (cli._cmd_replay) has already checked that PATH is a readable file;
    # a file gone since (or a directory) still ends here as an OSError with a message.
    source = ReplaySource(path, follow=follow)
    try:
        source.start()
    except OSError as exc:
        print(f"gpudash replay: cannot read {path}: {exc}", file=sys.stderr)
        return 2
    app = GpuDashApp(source, replay=True)
    try:
        code = app.run()
    finally:
        source.stop()
    return int(code or 0)

