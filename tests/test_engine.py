"""The engine: the step loop (in-process, with fakes and a real CPU workload), and the
workload child driven through ``EngineSession`` as the dashboard drives it."""

from __future__ import annotations

import os
import signal
import time
import warnings
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch

from gpudash.core.protocol import (
    Event,
    GpuInfo,
    Message,
    Pause,
    Resume,
    RunConfig,
    Sample,
    SetBatchSize,
    SetVariant,
    Stop,
    SwitchWorkload,
)
from gpudash.engine.events import plain
from gpudash.engine.loop import StepLoop
from gpudash.engine.measure import SYNC_WARNING, SyncCounter, percentile
from gpudash.host.session import EngineSession
from workloads.knobs import Knobs
from workloads.registry import WorkloadError, check_batch_size

# -- a fake workload: fast, scriptable ----------------------------------------------------------


@dataclass
class _Info:
    name: str = "fake"


class FakeWorkload:
    """Duck-typed Workload: each step sleeps a little; batches over ``oom_above`` run out of memory."""

    info = _Info()
    world_size = 1  # one process (no data parallelism)

    def __init__(self, batch_size: int = 4, variant: str = "a", oom_above: int | None = None) -> None:
        self.device = torch.device("cpu")
        self.batch_size = batch_size
        self.variant = variant
        self.knobs = Knobs()
        self.oom_above = oom_above
        self.last_loss: torch.Tensor | None = None
        self.steps = 0
        self.drains = 0
        self.closed = False

    @property
    def samples_per_step(self) -> int:
        return self.batch_size

    def step(self) -> None:
        if self.oom_above is not None and self.batch_size > self.oom_above:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 1 TiB")
        time.sleep(0.001)
        self.steps += 1
        self.last_loss = torch.tensor(1.0 / self.steps)

    def check_change(
        self, *, variant: str | None = None, batch_size: int | None = None, knobs: Knobs | None = None
    ) -> tuple[str, int, Knobs]:
        if variant is not None and variant not in ("a", "b"):
            raise WorkloadError(f"unknown variant {variant!r}")
        return (
            variant or self.variant,
            self.batch_size if batch_size is None else check_batch_size(batch_size),
            self.knobs if knobs is None else knobs,
        )

    def reconfigure(
        self, *, variant: str | None = None, batch_size: int | None = None, knobs: Knobs | None = None
    ) -> None:
        self.variant, self.batch_size, self.knobs = self.check_change(
            variant=variant, batch_size=batch_size, knobs=knobs
        )

    def drain(self) -> None:
        self.drains += 1

    def close(self) -> None:
        self.closed = True


@pytest.fixture(autouse=True)
def _controls_every_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """Look for controls at every step (the engine throttles it to every few ms), so the
    scripted controls below land at exact step counts."""
    import gpudash.engine.loop

    monkeypatch.setattr(gpudash.engine.loop, "CONTROL_CHECK_S", 0.0)


def scripted(controls: list[tuple[int, object]], loop_ref: list[StepLoop]) -> Callable[[float], object]:
    """A control source that hands out each control once the loop has issued N steps."""
    pending = deque(sorted(controls, key=lambda c: c[0]))

    def next_control(timeout: float) -> object:
        if pending and loop_ref[0].steps_issued >= pending[0][0]:
            return pending.popleft()[1]
        if timeout:
            time.sleep(min(timeout, 0.005))
        return None

    return next_control


def run_loop(workload: object, controls: list[tuple[int, object]], **kw: object) -> tuple[StepLoop, list[Message]]:
    got: list[Message] = []
    ref: list[StepLoop] = []
    loop = StepLoop(workload, emit=got.append, controls=scripted(controls, ref), sample_interval_s=0.02, **kw)  # type: ignore[arg-type]
    ref.append(loop)
    loop.run()
    return loop, got


def samples(msgs: list[Message]) -> list[Sample]:
    return [m for m in msgs if isinstance(m, Sample)]


def events(msgs: list[Message], kind: str | None = None) -> list[Event]:
    return [m for m in msgs if isinstance(m, Event) and (kind is None or m.kind == kind)]


def test_percentile() -> None:
    assert percentile([5.0], 95) == 5.0
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0], 50) == 3.0
    assert percentile([0.0, 10.0], 95) == pytest.approx(9.5)


def test_plain_details_are_plain_str() -> None:
    d = plain({"torch": torch.__version__, "n": 3})
    assert all(type(v) is str for v in d.values())  # unpickling a TorchVersion would import torch


def test_control_applied_at_step_boundary_then_samples_show_it() -> None:
    w = FakeWorkload()
    loop, msgs = run_loop(w, [(30, SetBatchSize(8)), (60, Stop())])
    (changed,) = events(msgs, "changed")
    assert (changed.what, changed.before, changed.after) == ("batch_size", "4", "8")
    assert changed.details["batch_size"] == "8"
    i = msgs.index(changed)
    before, after = samples(msgs[:i]), samples(msgs[i + 1 :])
    assert before and after
    assert {s.batch_size for s in before} == {4} and {s.batch_size for s in after} == {8}
    last = after[-1]
    assert last.steps == loop.steps_issued == 60  # the final sample counts every step
    assert last.samples == 30 * 4 + 30 * 8
    assert all(s.syncs_per_step is None for s in samples(msgs))  # not countable on the CPU
    assert last.loss == pytest.approx(1.0 / 60)


def test_failed_controls_are_error_events_and_the_run_goes_on() -> None:
    w = FakeWorkload()
    _, msgs = run_loop(w, [(10, SetBatchSize(0)), (10, SetVariant("nope")), (20, SetVariant("b")), (40, Stop())])
    errors = events(msgs, "error")
    assert [(e.what, e.after) for e in errors] == [("batch_size", "0"), ("variant", "nope")]
    assert "at least 1" in errors[0].message and "\n" not in errors[0].message
    (changed,) = events(msgs, "changed")
    assert (changed.what, changed.before, changed.after) == ("variant", "a", "b")
    assert samples(msgs)[-1].variant == "b" and samples(msgs)[-1].batch_size == 4


def test_refused_controls_neither_drain_nor_cut_the_sample_window() -> None:
    w = FakeWorkload()
    loop, msgs = run_loop(w, [(10, SetBatchSize(0)), (10, SetVariant("nope")), (20, Stop())])
    assert [e.what for e in events(msgs, "error")] == ["batch_size", "variant"]
    assert w.drains == 1  # only the final drain at the end of the run
    assert loop.steps_issued == 20 and samples(msgs)[-1].steps == 20


def test_pause_and_resume() -> None:
    w = FakeWorkload()
    _, msgs = run_loop(w, [(10, Pause()), (10, Resume()), (20, Stop())])
    kinds = [e.kind for e in events(msgs)]
    assert kinds == ["paused", "resumed"]
    assert w.steps == 20


def test_out_of_memory_after_a_change_reverts_it() -> None:
    w = FakeWorkload(oom_above=16)
    loop, msgs = run_loop(w, [(10, SetBatchSize(64)), (30, Stop())])
    changed, error = events(msgs, "changed")[0], events(msgs, "error")[0]
    assert changed.after == "64"
    assert error.what == "batch_size" and "out of memory" in error.message
    assert error.details["batch_size"] == "4"
    assert w.batch_size == 4 and loop.steps_issued == 30
    assert samples(msgs)[-1].batch_size == 4


def test_out_of_memory_without_a_change_is_a_crash() -> None:
    w = FakeWorkload(batch_size=64, oom_above=16)
    with pytest.raises(torch.cuda.OutOfMemoryError):
        run_loop(w, [])


def test_switch_workload_failure_rebuilds_the_old_one() -> None:
    built: list[tuple[str, object, object]] = []

    def builder(name: str, variant: object, batch: object, knobs: object = None) -> FakeWorkload:
        built.append((name, variant, batch))
        if name != "fake":
            raise WorkloadError(f"unknown workload {name!r}")
        return FakeWorkload(batch_size=int(batch or 4), variant=str(variant or "a"))

    w = FakeWorkload(batch_size=5)
    loop, msgs = run_loop(w, [(5, SwitchWorkload("nope")), (15, Stop())], builder=builder)
    (error,) = events(msgs, "error")
    assert error.what == "workload" and "unknown workload" in error.message
    assert w.closed and loop.workload is not w  # closed, then rebuilt as it was
    assert (loop.workload.batch_size, loop.workload.variant) == (5, "a")
    assert built == [("nope", None, None), ("fake", "a", 5)]


def test_sync_counter_counts_only_sync_warnings_and_prints_none(capsys: pytest.CaptureFixture[str]) -> None:
    counter = SyncCounter()
    seen: list[str] = []
    old = warnings.showwarning
    warnings.showwarning = lambda m, *a, **k: seen.append(str(m))  # type: ignore[assignment]
    try:
        counter.install(None)
        for _ in range(3):  # the same warning, same place: "always", never deduplicated
            warnings.warn(SYNC_WARNING, UserWarning, stacklevel=1)
        warnings.warn("something else", UserWarning, stacklevel=1)
        counter.uninstall()
        warnings.warn(SYNC_WARNING, UserWarning, stacklevel=1)  # after uninstall: not counted
    finally:
        warnings.showwarning = old
    assert counter.count == 3
    assert seen == ["something else", SYNC_WARNING]
    assert capsys.readouterr().err == ""


def test_real_workload_in_process_on_cpu() -> None:
    from workloads.factory import build

    w = build("encdec", "cpu")
    got: list[Message] = []
    loop = StepLoop(w, emit=got.append, sample_interval_s=0.05)
    assert loop.run(steps=12) == "steps"
    last = samples(got)[-1]
    assert last.steps == 12 and last.samples == 12 * w.batch_size
    assert last.step_ms_p50 is not None and last.step_ms_p95 >= last.step_ms_p50
    assert last.loss is not None and last.loss > 0
    w.close()


# -- the child process, through EngineSession ---------------------------------------------------------


class Collector:
    """Polls a session and keeps everything; waits for conditions with a deadline."""

    def __init__(self, session: EngineSession) -> None:
        self.session = session
        self.msgs: list[Message] = []

    def wait(self, cond: Callable[[Message], bool], timeout: float = 60.0, what: str = "") -> Message:
        deadline = time.monotonic() + timeout
        start = len(self.msgs)
        while True:
            for m in self.msgs[start:]:
                if cond(m):
                    return m
            start = len(self.msgs)
            if time.monotonic() > deadline:
                tail = "\n".join(map(str, self.msgs[-10:]))
                raise AssertionError(f"timed out waiting for {what}; last messages:\n{tail}")
            self.msgs.extend(self.session.poll())
            time.sleep(0.02)

    def after(self, marker: Message) -> list[Message]:
        return self.msgs[self.msgs.index(marker) + 1 :]


def is_event(kind: str, what: str | None = None) -> Callable[[Message], bool]:
    return lambda m: isinstance(m, Event) and m.kind == kind and (what is None or m.what == what)


@pytest.fixture
def session(tmp_path: os.PathLike[str]) -> EngineSession:
    s = EngineSession(
        RunConfig(workload="encdec", device="cpu", sample_interval_s=0.1, gpu_interval_s=0.2),
        log_path=os.path.join(tmp_path, "child.log"),
    )
    yield s
    s.stop()


@pytest.mark.slow
def test_session_controls_mid_run(session: EngineSession) -> None:
    c = Collector(session)
    session.start()
    assert isinstance(session.gpu_info, GpuInfo)
    started = c.wait(is_event("started"), what="started")
    assert started.details["torch"] == torch.__version__ and started.details["device"] == "cpu"
    c.wait(lambda m: isinstance(m, Sample) and m.steps >= 3, what="a few steps")

    session.send(SetBatchSize(2))
    changed = c.wait(is_event("changed", "batch_size"), what="batch size change")
    assert (changed.before, changed.after) == ("4", "2")
    c.wait(lambda m: isinstance(m, Sample) and m.batch_size == 2 and m.steps_per_s > 0, what="rows at batch 2")
    assert all(m.batch_size == 2 for m in c.after(changed) if isinstance(m, Sample))

    session.send(SetVariant("pipelined"))  # needs CUDA streams: refused, the run goes on
    error = c.wait(is_event("error", "variant"), what="error event")
    assert "CUDA" in error.message
    c.wait(lambda m: isinstance(m, Sample) and m.time_s > error.time_s and m.steps_per_s > 0, what="rows after error")
    assert all(m.variant == "serial" for m in c.after(error) if isinstance(m, Sample))

    session.send(Pause())
    c.wait(is_event("paused"), what="paused")
    session.send(Resume())
    c.wait(is_event("resumed"), what="resumed")

    session.send(SwitchWorkload("sync_loss", "fixed"))
    switched = c.wait(lambda m: is_event("changed", "workload")(m) or is_event("error", "workload")(m), what="switch")
    assert switched.kind == "changed", switched.message
    assert switched.after == "sync_loss"
    c.wait(
        lambda m: isinstance(m, Sample) and m.workload == "sync_loss" and m.variant == "fixed", what="sync_loss rows"
    )

    session.stop()
    c.msgs.extend(session.poll())
    assert any(is_event("stopped")(m) for m in c.msgs)
    assert not any(is_event("crashed")(m) for m in c.msgs)
    assert not session.alive and session.runner.exitcode == 0


@pytest.mark.slow
def test_session_child_killed_then_restarted(session: EngineSession) -> None:
    with open(session.log_path, "w") as f:  # the log appends: an older run's last line is no clue
        f.write("RuntimeError: from an older run\n")
    c = Collector(session)
    session.start()
    c.wait(lambda m: isinstance(m, Sample) and m.steps >= 2, what="steps")
    session.send(SetBatchSize(3))
    c.wait(is_event("changed"), what="change")
    c.wait(lambda m: isinstance(m, Sample) and m.batch_size == 3, what="rows at batch 3")
    pid = session.runner.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    crashed = c.wait(is_event("crashed"), what="crashed")
    assert "SIGKILL" in crashed.message and "older run" not in crashed.message
    assert sum(1 for m in c.msgs if is_event("crashed")(m)) == 1
    assert not session.alive

    session.restart()  # a fresh child, in the last configuration seen running
    c.wait(is_event("started"), what="started again")
    again = c.wait(lambda m: isinstance(m, Sample) and m.steps >= 1, what="samples again")
    assert again.batch_size == 3
    assert session.runner.pid != pid


@pytest.mark.slow
def test_own_log_removed_after_a_clean_stop() -> None:
    s = EngineSession(RunConfig(workload="encdec", device="cpu", max_steps=3, sample_interval_s=0.1))
    c = Collector(s)
    try:
        s.start()
        c.wait(is_event("stopped"), what="stopped after 3 steps")
        assert os.path.exists(s.log_path)
    finally:
        s.stop()
    assert not os.path.exists(s.log_path)


@pytest.mark.skipif(os.path.exists("/dev/nvidia0"), reason="this machine has a GPU")
def test_own_log_kept_after_a_crash_and_named() -> None:
    s = EngineSession(RunConfig(workload="encdec", device="cuda", sample_interval_s=0.1))
    c = Collector(s)
    try:
        s.start()
        crashed = c.wait(is_event("crashed"), what="crashed: no CUDA here")
    finally:
        s.stop()
    try:
        assert s.log_path in crashed.message
        assert os.path.exists(s.log_path)
    finally:
        os.unlink(s.log_path)


def test_terminate_reaches_the_childs_own_workers() -> None:
    """Escalation signals the child's process group: forked loader workers die with it."""
    import subprocess

    from gpudash.host.runner import WorkloadRunner

    proc = subprocess.Popen(
        ["sh", "-c", "sleep 60 & echo $!; wait"], start_new_session=True, stdout=subprocess.PIPE, text=True
    )
    try:
        worker = int(proc.stdout.readline())  # type: ignore[union-attr]
        WorkloadRunner._signal_group(proc, signal.SIGTERM)  # type: ignore[arg-type]
        proc.wait(timeout=10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with open(f"/proc/{worker}/stat") as f:
                    if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                        break  # dead, not yet reaped by its new parent
            except (FileNotFoundError, ProcessLookupError):
                break
            time.sleep(0.02)
        else:
            raise AssertionError("the worker outlived its group's SIGTERM")
    finally:
        proc.kill()
        proc.wait()


def test_time_stages_measures_each_stage_alone_and_the_run_goes_on() -> None:
    """The overlap bound of a two-stage family: each stage timed alone on request, as an event;
    a family without two stages says so, and training continues either way."""
    from gpudash.core.protocol import EventKind, TimeStages
    from workloads.base import WorkloadOptions
    from workloads.factory import build

    w = build("encdec", "cpu", WorkloadOptions(batch_size=2))
    loop, msgs = run_loop(w, [(3, TimeStages(steps=2))], max_steps=8)
    measured = [m for m in msgs if isinstance(m, Event) and m.kind == EventKind.MEASURED]
    assert len(measured) == 1
    d = measured[0].details
    assert d["stage1"] == "encode" and d["stage2"] == "train"
    t1, t2 = float(d["stage1_ms"]), float(d["stage2_ms"])
    assert t1 > 0 and t2 > 0
    assert float(d["overlap_bound_steps_per_s"]) == pytest.approx(1000 / max(t1, t2), rel=1e-3)
    assert loop.steps_issued == 8
    w.close()

    w = build("sync_loss", "cpu", WorkloadOptions(batch_size=2, image_size=16))
    loop, msgs = run_loop(w, [(2, TimeStages(steps=2))], max_steps=5)
    errors = [m for m in msgs if isinstance(m, Event) and m.kind == EventKind.ERROR]
    assert len(errors) == 1 and "no two stages" in errors[0].message
    assert loop.steps_issued == 5
    w.close()


def test_a_switch_of_family_in_the_child_frees_the_first_workload(monkeypatch: pytest.MonkeyPatch) -> None:
    """The workload child, after a switch to another family, holds nothing of the first one: on
    an H100 a leftover reference kept encdec's model and data (577 MiB) for the rest of the run.
    And the first is freed before the second is built, so a switch never needs both in memory."""
    import gc
    import weakref

    from gpudash.engine import child

    built: list[weakref.ref] = []
    real_builder = child.workload_builder

    def recording_builder(config: RunConfig, device: object, rank: object = None) -> Callable[..., object]:
        build = real_builder(config, device, rank)

        def recorded(*args: object) -> object:
            alive_at_build.append([ref() is not None for ref in built])  # no gc.collect() here: the engine's
            workload = build(*args)
            built.append(weakref.ref(workload))
            return workload

        return recorded

    monkeypatch.setattr(child, "workload_builder", recording_builder)
    alive_at_build: list[list[bool]] = []
    first_alive_after_switch: list[bool] = []

    class Channel:
        """What ``_run_child`` talks to (the real one wraps the parent's queues)."""

        def __init__(self) -> None:
            self.messages: list[Message] = []

        def emit(self, message: Message) -> None:
            self.messages.append(message)

        def next_control(self, timeout: float) -> object:
            if len(built) == 1 and any(isinstance(m, Sample) for m in self.messages):
                return SwitchWorkload("sync_loss", batch_size=2)
            if len(built) == 2 and not first_alive_after_switch:
                gc.collect()
                first_alive_after_switch.append(built[0]() is not None)
                return Stop()
            return None

    channel = Channel()
    config = RunConfig(workload="encdec", device="cpu", batch_size=2, image_size=16, sample_interval_s=0.01)
    child._run_child(config, channel, time.monotonic())  # type: ignore[arg-type]
    assert [e.kind for e in events(channel.messages)][:2] == ["started", "changed"]
    assert first_alive_after_switch == [False]
    assert alive_at_build == [[], [False]]  # the switch never held both families


def test_out_of_memory_in_another_family_frees_it_before_the_previous_one_is_built_again() -> None:
    """A switch whose new family runs out of memory in its first steps goes back to the previous
    family, and the failed workload is gone before that one is built: holding both could run out
    of memory again."""
    import weakref

    failed: list[weakref.ref] = []
    alive_when_rebuilt: list[bool] = []

    def builder(name: str, variant: object, batch: object, knobs: object = None) -> FakeWorkload:
        if name == "big":
            w = FakeWorkload(batch_size=64, oom_above=16)
            w.info = _Info("big")  # type: ignore[misc]
            failed.append(weakref.ref(w))
            return w
        alive_when_rebuilt.extend(ref() is not None for ref in failed)
        return FakeWorkload(batch_size=int(batch or 4), variant=str(variant or "a"))

    loop, msgs = run_loop(FakeWorkload(batch_size=5), [(5, SwitchWorkload("big")), (15, Stop())], builder=builder)
    (error,) = events(msgs, "error")
    assert error.what == "workload" and "out of memory" in error.message
    assert loop.workload.info.name == "fake" and loop.workload.batch_size == 5
    assert alive_when_rebuilt == [False]


def test_a_family_that_fails_to_build_is_freed_before_the_previous_one_is_built_again() -> None:
    """What a failed build had allocated (held by the exception's traceback while it is being
    handled) is gone before the last good workload is built again."""
    import weakref

    half_built: list[weakref.ref] = []
    alive_when_rebuilt: list[bool] = []

    def builder(name: str, variant: object, batch: object, knobs: object = None) -> FakeWorkload:
        if name == "big":
            model = FakeWorkload(batch_size=64)  # what the build had made when it ran out of memory
            half_built.append(weakref.ref(model))
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 1 TiB")
        alive_when_rebuilt.extend(ref() is not None for ref in half_built)
        return FakeWorkload(batch_size=int(batch or 4), variant=str(variant or "a"))

    loop, msgs = run_loop(FakeWorkload(batch_size=5), [(5, SwitchWorkload("big")), (15, Stop())], builder=builder)
    (error,) = events(msgs, "error")
    assert error.what == "workload" and "out of memory" in error.message
    assert loop.workload.batch_size == 5 and alive_when_rebuilt == [False]


# -- CUDA step timing in groups (the timer's arithmetic, with events faked at torch's boundary) ----
class _GpuClock:
    """A fake GPU: each event completes when the host says the GPU got that far (``now_ms``)."""

    def __init__(self) -> None:
        self.issued_ms = 0.0  # when the GPU will have finished what was issued so far
        self.now_ms = 0.0


class _Event:
    def __init__(self, gpu: _GpuClock, enable_timing: bool = False) -> None:
        self.gpu, self.at = gpu, None

    def record(self, stream: object = None) -> None:
        self.at = self.gpu.issued_ms

    def query(self) -> bool:
        return self.at is not None and self.at <= self.gpu.now_ms

    def elapsed_time(self, end: _Event) -> float:
        assert self.query() and end.query()  # the timer only ever asks about completed events
        return end.at - self.at


def _fake_torch(gpu: _GpuClock) -> object:
    from types import SimpleNamespace

    return SimpleNamespace(
        cuda=SimpleNamespace(Event=lambda enable_timing=False: _Event(gpu, enable_timing), current_stream=lambda: None)
    )


@pytest.mark.parametrize(("step_ms", "group"), [(1.0, 25), (0.05, 256), (25.0, 1)])
def test_fast_steps_are_timed_in_groups_and_every_step_is_counted(step_ms: float, group: int) -> None:
    """A 1 ms step gets one event per 25 steps (recording one costs tens of µs on an H100), each step
    of a group its mean time; a 25 ms step is timed alone; no step is lost, even at a reset."""
    from gpudash.engine.measure import CudaStepTimer

    gpu = _GpuClock()
    timer = CudaStepTimer(_fake_torch(gpu))
    times: list[float | None] = []
    for _ in range(1000):
        timer.begin()
        gpu.issued_ms += step_ms
        timer.end()
        gpu.now_ms = gpu.issued_ms - 3 * step_ms  # the GPU runs three steps behind the host
        times += timer.poll()
    assert timer.group == group
    gpu.now_ms = gpu.issued_ms  # the drain
    times += timer.reset()
    assert len(times) == 1000 and timer.group == 1
    timed = [t for t in times if t is not None]
    assert times[0] is None and len(timed) > 1000 - group - 2  # unknown: the first, and after the last event
    assert all(t == pytest.approx(step_ms) for t in timed)


def test_a_reset_that_keeps_the_pace_goes_on_in_groups_and_one_after_a_change_starts_at_one() -> None:
    """A later ``run()`` of the same configuration issues its steps in groups at once (its first
    steps one at a time, each with its event, would cost a launch-bound step ~1%); after a change
    the group is one step until a step of the new configuration is timed."""
    from gpudash.engine.measure import CudaStepTimer

    gpu = _GpuClock()
    timer = CudaStepTimer(_fake_torch(gpu))
    for _ in range(100):
        gpu.issued_ms += 1.0
        timer.end()
        gpu.now_ms = gpu.issued_ms
        timer.poll()
    assert timer.group == 25
    timer.reset(keep_pace=True)
    assert timer.group == 25 and timer.burst() == 25
    timer.reset()
    assert timer.group == 1 and timer.burst() == 1
