"""The engine: the step loop (in-process, with fakes and a real CPU workload), and the
workload child driven through ``EngineSession`` as the dashboard drives it."""

from __future__ import annotations

import time
import warnings
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch

from gpudash.boot.gpudash_boot.sync_watch import SYNC_WARNING
from gpudash.core.protocol import (
    Control,
    Event,
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
from gpudash.engine.loop import ControlSource, StepLoop
from gpudash.engine.loop_state import Builder
from gpudash.engine.measure import SyncCounter, percentile
from tests.messages import events_of, present, samples_of
from workloads.base import Workload
from workloads.catalog_types import WorkloadError
from workloads.knobs import Knobs
from workloads.registry import check_batch_size

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


def scripted(controls: list[tuple[int, Control]], loop_ref: list[StepLoop]) -> ControlSource:
    """A control source that hands out each control once the loop has issued N steps."""
    pending = deque(sorted(controls, key=lambda c: c[0]))

    def next_control(timeout: float) -> Control | None:
        if pending and loop_ref[0].steps_issued >= pending[0][0]:
            return pending.popleft()[1]
        if timeout:
            time.sleep(min(timeout, 0.005))
        return None

    return next_control


FakeBuilder = Callable[[str, "str | None", "int | None", "Knobs | None"], object]


def run_loop(
    workload: object,
    controls: list[tuple[int, Control]],
    builder: FakeBuilder | None = None,
    max_steps: int | None = None,
) -> tuple[StepLoop, list[Message]]:
    """Run ``workload`` (a fake or a real one) in the step loop until ``Stop`` or ``max_steps``."""
    got: list[Message] = []
    ref: list[StepLoop] = []
    loop = StepLoop(
        workload,  # type: ignore[arg-type]  # FakeWorkload is duck-typed, not a Workload subclass
        emit=got.append,
        controls=scripted(controls, ref),
        builder=builder,  # type: ignore[arg-type]  # it builds FakeWorkloads
        sample_interval_s=0.02,
        max_steps=max_steps,
    )
    ref.append(loop)
    loop.run()
    return loop, got


samples, events = samples_of, events_of


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
    kinds = [e.kind for e in events(msgs) if e.what != "flops"]  # (the fake's step has no FLOP count)
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

    def builder(name: str, variant: str | None, batch: int | None, knobs: Knobs | None = None) -> FakeWorkload:
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
    warnings.showwarning = lambda m, *a, **k: seen.append(str(m))
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
    assert last.step_ms_p50 is not None and present(last.step_ms_p95) >= last.step_ms_p50
    assert last.loss is not None and last.loss > 0
    w.close()


def test_time_stages_measures_each_stage_alone_and_the_run_goes_on() -> None:
    """The overlap bound of a two-stage family: each stage timed alone on request, as an event;
    a family without two stages says so, and training continues either way."""
    from gpudash.core.protocol import EventKind, TimeStages
    from gpudash.core.stage_times import StageTimes
    from gpudash.core.textfmt import plain
    from workloads.base import WorkloadOptions
    from workloads.factory import build

    w = build("encdec", "cpu", WorkloadOptions(batch_size=2))
    loop, msgs = run_loop(w, [(3, TimeStages(steps=2))], max_steps=8)
    measured = [m for m in msgs if isinstance(m, Event) and m.kind == EventKind.MEASURED and m.what != "flops"]
    assert len(measured) == 1
    times = measured[0].data
    assert isinstance(times, StageTimes) and (times.stage1, times.stage2) == ("encode", "train")
    assert times.stage1_ms > 0 and times.stage2_ms > 0
    assert times.bound == pytest.approx(1000 / max(times.stage1_ms, times.stage2_ms))
    assert measured[0].message == f"{times.describe()}: overlap bound {plain(times.bound)} steps/s"
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

    def recording_builder(config: RunConfig, device: object, rank: object = None) -> Builder:
        build = real_builder(config, device, rank)

        def recorded(name: str, variant: str | None, batch: int | None, knobs: Knobs | None) -> Workload:
            alive_at_build.append([ref() is not None for ref in built])  # no gc.collect() here: the engine's
            workload = build(name, variant, batch, knobs)
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
    assert [e.kind for e in events(channel.messages) if e.what != "flops"][:2] == ["started", "changed"]
    assert first_alive_after_switch == [False]
    assert alive_at_build == [[], [False]]  # the switch never held both families


def test_out_of_memory_in_another_family_frees_it_before_the_previous_one_is_built_again() -> None:
    """A switch whose new family runs out of memory in its first steps goes back to the previous
    family, and the failed workload is gone before that one is built: holding both could run out
    of memory again."""
    import weakref

    failed: list[weakref.ref] = []
    alive_when_rebuilt: list[bool] = []

    def builder(name: str, variant: str | None, batch: int | None, knobs: Knobs | None = None) -> FakeWorkload:
        if name == "big":
            w = FakeWorkload(batch_size=64, oom_above=16)
            w.info = _Info("big")
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

    def builder(name: str, variant: str | None, batch: int | None, knobs: Knobs | None = None) -> FakeWorkload:
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
