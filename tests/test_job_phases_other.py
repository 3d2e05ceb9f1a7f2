"""What a job does between its steps that no hook times is not a step's time (issue 61): a checkpoint
lasts from its first save until training resumes, however quick the save, and a long quiet stretch
between steps with no training in it is ``other``. The hooks' span keeper fed by hand first (the
session's tally and the dashboard's strip: tests/test_job_phases_other_tally.py), then
``tests/data/jobs/between_steps.py`` (its checkpoint work and its idling outside any save) run once
with a ``DataLoader`` and once without under ``gpudash record``."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from gpudash.boot.gpudash_boot import phase_signals
from gpudash.core.protocol import CHECKPOINT, EVALUATION, OTHER, PROFILING, TRAINING, Event, EventKind
from gpudash.recording.replay import ReplaySource, read_all
from gpudash.tui.phases import PhaseTimeline
from tests import printed
from tests.helpers import once_per_session
from tests.test_job import JOBS, job_line
from tests.test_job_phases import csv_rows, ended_phases, phases_module, record_job, summary_row

BETWEEN = str(JOBS / "between_steps.py")
STEP_S = 0.5  # the hand-fed steps' length


class Keeper:
    """The hooks' span keeper on this thread after a few 0.5 s steps of the training loader (1), and
    what it says to gpudash; ``t`` the last step's end (in the past: nothing closes after now)."""

    def __init__(self, module: Any, iterator: int = 1) -> None:
        self.said: list[dict[str, Any]] = []
        self.k = module.Phases(self.said.append, lambda: 0)
        self.k.thread = threading.get_ident()
        self.iterator = iterator
        self.t = time.monotonic() - 100.0
        self.k.at_step(self.t, iterator)
        for _ in range(5):
            self.step(STEP_S)
        self.said.clear()

    def step(self, seconds: float, *, batch_at: float | None = 0.001) -> float | None:
        """A step ending ``seconds`` after the last, its batch drawn ``batch_at`` after the last step."""
        if batch_at is not None and self.iterator:
            self.k.batch(self.iterator, self.t + batch_at, self.t + batch_at + 0.005, False)
        self.t += seconds
        return self.k.at_step(self.t, self.iterator)

    def save(self, start: float, end: float) -> None:
        self.k.spans.append((CHECKPOINT, self.t + start, self.t + end))  # as the wrapped torch.save leaves it


@pytest.fixture(scope="module")
def boot() -> Any:
    return phases_module()


def _clock(boot: Any, monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The span keeper's clock (``time.monotonic`` in its module), moved by the test: ``[now]``."""
    clock = [1000.0]
    monkeypatch.setattr(boot, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    return clock


@pytest.fixture
def keeper(boot: Any) -> Keeper:
    return Keeper(boot)


# -- the hooks' quiet stretches, inside the job -----------------------------------------------------
def test_a_quick_save_then_other_checkpoint_work_is_one_checkpoint_until_the_next_batch(keeper: Keeper) -> None:
    keeper.save(0.001, 0.021)  # 20 ms: shorter than a span counts alone
    train = keeper.step(1.5 + STEP_S, batch_at=1.5)  # its upload until the next batch, then the step's 0.5 s
    assert train == pytest.approx(STEP_S, abs=0.01)
    assert ended_phases(keeper.said) == {CHECKPOINT: pytest.approx(1.499, abs=0.01)}


def test_a_quiet_stretch_over_three_median_steps_between_steps_is_other_and_a_shorter_one_the_steps(
    keeper: Keeper,
) -> None:
    assert keeper.step(2.0 + STEP_S, batch_at=2.0) == pytest.approx(STEP_S, abs=0.01)  # 2 s: over 3 × 0.5 s
    assert ended_phases(keeper.said) == {OTHER: pytest.approx(2.0, abs=0.01)}
    keeper.said.clear()
    assert keeper.step(1.0 + STEP_S, batch_at=1.0) == pytest.approx(1.0 + STEP_S)  # 1 s: under 3 × 0.5 s
    assert keeper.said == []


def test_a_profiler_windows_stop_and_write_are_profiling_and_a_quiet_stretch_after_them_other(keeper: Keeper) -> None:
    """gpudash's own window, stopped and its trace written at a step's end (0.2 s: a quiet stretch
    over three median steps), is neither the next step's training nor the job's ``other``."""
    keeper.k.ours(keeper.t, keeper.t + 0.2)  # as the hooks leave it after the window's at_step
    assert keeper.step(0.2 + STEP_S, batch_at=0.201) == pytest.approx(STEP_S, abs=0.01)
    assert ended_phases(keeper.said) == {PROFILING: pytest.approx(0.2)}
    keeper.said.clear()
    keeper.k.ours(keeper.t, keeper.t + 0.2)  # the job then idles 2 s before its next batch: that is its own
    assert keeper.step(2.2 + STEP_S, batch_at=2.2) == pytest.approx(STEP_S, abs=0.01)
    assert ended_phases(keeper.said) == {PROFILING: pytest.approx(0.2), OTHER: pytest.approx(2.0, abs=0.01)}
    keeper.said.clear()
    keeper.k.ours(keeper.t, keeper.t + 0.03)  # a window's start: 30 ms, under a span's 50 ms
    assert keeper.step(0.03 + STEP_S, batch_at=0.031) == pytest.approx(0.03 + STEP_S)  # the step's, said as nothing
    assert keeper.said == []


def test_no_other_before_three_steps_are_known_nor_at_the_end(boot: Any) -> None:
    young = Keeper(boot)
    young.k.recent.clear()  # the job's first steps: no median yet
    assert young.step(2.0 + STEP_S, batch_at=2.0) == pytest.approx(2.0 + STEP_S) and young.said == []
    keeper = Keeper(boot)
    keeper.k.batch(1, keeper.t + 2.0, keeper.t + 2.01, False)  # the loop draws a batch 2 s after its last step ...
    keeper.k.finish()  # ... and ends: what comes after the last step is its teardown
    assert keeper.said == []


def test_training_work_in_a_stretch_makes_it_the_steps_a_batch_drawn_at_once_or_a_wait_on_the_gpu(
    boot: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    keeper = Keeper(boot)
    keeper.k.batch(1, keeper.t + 0.001, keeper.t + 0.002, False)  # the next batch drawn at once ...
    assert keeper.step(2.0 + STEP_S, batch_at=None) == pytest.approx(2.0 + STEP_S)  # ... then 2 s: the step's
    assert keeper.said == []
    clock = _clock(boot, monkeypatch)  # the keeper's own clock, moved here: a busy machine stretches no step
    for waits in (False, True):  # 20 ms steps, then 0.5 s before the next batch
        said: list[dict[str, Any]] = []
        k = boot.Phases(said.append, lambda: 0)
        k.thread = threading.get_ident()
        for _ in range(6):
            k.batch(1, clock[0], clock[0], False)
            clock[0] += 0.02
            k.at_step(clock[0], 1)
        if waits:
            k.waited()  # a wait on the GPU right after the step (a loss.item()): training work
        clock[0] += 0.5
        k.batch(1, clock[0], clock[0], False)
        train = k.at_step(clock[0], 1)
        assert train is not None
        if waits:
            assert train >= 0.5 and said == []
        else:
            assert train < 0.25 and ended_phases(said)[OTHER] >= 0.49


def test_what_follows_an_evaluation_until_training_resumes_is_other(keeper: Keeper) -> None:
    t = keeper.t
    for i in range(3):  # an evaluation loop over a loader of its own, which ends
        keeper.k.batch(2, t + 0.01 + 0.1 * i, t + 0.05 + 0.1 * i, False)
    keeper.k.batch(2, t + 0.31, t + 0.32, True)
    train = keeper.step(2.32 + STEP_S, batch_at=2.32)  # 2 s after it (its logs), then the step's 0.5 s
    assert train == pytest.approx(STEP_S + 0.01, abs=0.005)  # (and the 10 ms before the evaluation's first batch)
    assert ended_phases(keeper.said) == {EVALUATION: pytest.approx(0.31, abs=0.01), OTHER: pytest.approx(2.0, abs=0.01)}


def test_on_a_gpu_whose_syncs_are_not_counted_a_quiet_stretch_is_never_other(boot: Any) -> None:
    blind = Keeper(boot)
    blind.k.cuda = True  # a wait on the GPU would look quiet
    assert blind.step(2.0 + STEP_S, batch_at=2.0) == pytest.approx(2.0 + STEP_S) and blind.said == []
    counted = Keeper(boot)
    counted.k.cuda, counted.k.syncs = True, type("Syncs", (), {"job_owns_mode": False})()
    assert counted.step(2.0 + STEP_S, batch_at=2.0) == pytest.approx(STEP_S, abs=0.01)
    assert ended_phases(counted.said) == {OTHER: pytest.approx(2.0, abs=0.01)}


class FakeTorch:
    """What the forward watch uses of torch: its global forward pre-hooks, grad mode, ``compile``."""

    def __init__(self) -> None:
        self.hooks: dict[int, Any] = {}
        self.grad = True
        module = SimpleNamespace(register_module_forward_pre_hook=self._register)
        self.nn = SimpleNamespace(modules=SimpleNamespace(module=module))

    def _register(self, hook: Any) -> Any:
        key = max(self.hooks, default=0) + 1
        self.hooks[key] = hook
        return SimpleNamespace(remove=lambda: self.hooks.pop(key, None))

    def is_grad_enabled(self) -> bool:
        return self.grad

    def forward(self, *, training: bool, grad: bool = True) -> None:
        """A module called (its ``_call_impl``, which runs the global pre-hooks first)."""
        self.grad = grad
        for hook in list(self.hooks.values()):
            hook(SimpleNamespace(training=training), ())

    def compile(self, model: Any) -> Any:
        return model


def test_without_a_loader_the_training_forward_ends_the_stretch_and_torch_compile_turns_the_watch_off(
    boot: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = _clock(boot, monkeypatch)
    torch = FakeTorch()
    said: list[dict[str, Any]] = []
    k = boot.Phases(said.append, lambda: 0)
    k.thread = threading.get_ident()
    k.watch_forwards(torch)
    for _ in range(6):  # 20 ms steps of a job without a DataLoader: each step's end arms the watch
        clock[0] += 0.02
        k.at_step(clock[0], 0)
    assert len(torch.hooks) == 1
    clock[0] += 0.5  # its upload
    k.mode(False)  # model.eval(), as the wrapped Module.train says it
    torch.forward(training=False, grad=False)  # a forward in eval mode: other work, not training (the watch off)
    assert torch.hooks == {}
    k.mode(True)  # model.train(): training resumes, its forward will say when
    torch.forward(training=True)  # the training forward: the watch off
    torch.forward(training=True)  # (a second module call: nothing watches it)
    assert torch.hooks == {}
    clock[0] += 0.001
    train = k.at_step(clock[0], 0)
    assert train is not None and train < 0.25 and ended_phases(said)[OTHER] >= 0.49
    phase_signals.note_compile(torch, k.stop_forward_watch)  # as its signals put it in
    clock[0] += 0.02
    k.at_step(clock[0], 0)
    assert len(torch.hooks) == 1
    torch.compile(object())  # compiled code must never meet a global module hook: off for good
    assert torch.hooks == {}
    clock[0] += 0.02
    k.at_step(clock[0], 0)
    assert torch.hooks == {}


# -- a real script through gpudash record, once with a DataLoader and once without --------------------
STEPS, SAVE_EVERY, IDLE_EVERY = 20, 8, 5
JOB = (
    *("--steps", str(STEPS), "--step-s", "0.08"),
    *("--save-every", str(SAVE_EVERY), "--after-save-s", "0.5"),  # 0.5 s of checkpoint work after each save
    *("--idle-every", str(IDLE_EVERY), "--idle-s", "0.6"),  # 0.6 s of other work: over 3 steps of 0.08 s
)
IDLES = sum(1 for k in range(1, STEPS) if k % SAVE_EVERY and not k % IDLE_EVERY)  # its stretches of other work: 3


@pytest.fixture(scope="module", params=["loader", "no-loader"])
def recorded(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any, Any]:
    """``between_steps.py`` recorded once for every xdist worker (the second time without a
    ``DataLoader``: its forward is what says training resumed): the CSV, the command's output, the
    sidecar."""
    extra = ("--no-loader",) if request.param == "no-loader" else ()
    return once_per_session(
        tmp_path_factory,
        f"between-steps-{request.param}",
        lambda: record_job(tmp_path_factory.mktemp(request.param), "run", BETWEEN, *JOB, *extra),
    )


@pytest.mark.slow
def test_the_rate_is_the_scripts_own_training_rate(recorded: tuple[Path, Any, Any]) -> None:
    out, done, meta = recorded
    own = job_line(done.stdout)
    mean, _, _ = summary_row(out)
    assert mean == pytest.approx(float(own["steps_per_s"]), rel=0.15)  # with the 2.8 s of stretches as steps': 0.35×
    assert meta["goodput_pct"] == pytest.approx(100 * float(own["train_s"]) / meta["wall_s"], abs=5.0)


@pytest.mark.slow
def test_the_checkpoint_holds_the_work_after_its_save_and_other_the_idling(recorded: tuple[Path, Any, Any]) -> None:
    out, done, meta = recorded
    own = job_line(done.stdout)
    assert meta["phases"][CHECKPOINT] == pytest.approx(float(own["ckpt_s"]), rel=0.15)  # 2 × (save + 0.5 s)
    rows = [r for r in csv_rows(out, "event") if r["event_kind"] == "phase" and r["event_after"]]
    others = [float(r["event_after"]) for r in rows if r["event_what"] == OTHER]
    assert len(others) == IDLES and sum(others) == pytest.approx(float(own["idle_s"]), rel=0.15)
    assert meta["phases"][OTHER] >= 0.9 * float(own["idle_s"])
    assert done.stderr.count("s between steps, no training seen in it") == IDLES  # record's phase lines
    said = [g for e in printed.event_lines(done.stderr, "measured") if (g := printed.goodput(e.text))]
    assert said and {CHECKPOINT, OTHER} <= set(said[0].phases), said


@pytest.mark.slow
def test_a_replay_reads_the_other_spans(recorded: tuple[Path, Any, Any]) -> None:
    out, _, _ = recorded
    replayed = [m for m in read_all(ReplaySource(out)) if isinstance(m, Event) and m.kind == EventKind.PHASE]
    timeline = PhaseTimeline()
    for m in replayed:
        timeline.on_event(m)
    assert sum(1 for span in timeline.spans if span.phase == OTHER) == IDLES


@pytest.mark.slow
def test_a_profiler_windows_own_time_is_profiling_and_not_the_jobs_goodput(tmp_path: Path) -> None:
    """``record --trace-every`` of a job of thousands of operators a step: the window's stop and its
    trace's writing at a step's end are said as gpudash's (``profiling``), not as the job's
    ``other``, and goodput is training's share of the job's own time."""
    job = (str(JOBS / "many_ops.py"), "--steps", "500", "--depth", "400")
    out, done, meta = record_job(tmp_path, "profiled", *job, options=("--trace-every", "1", "--trace-steps", "10"))
    told = [e for e in printed.event_lines(done.stderr, "phase") if e.text.startswith("profiling ")]
    assert told and "gpudash's profiler window" in told[0].text, done.stderr[-2000:]
    assert any(e.text.startswith("10 steps traced") for e in printed.event_lines(done.stderr, "measured"))
    seconds = meta["phases"]
    assert seconds[PROFILING] >= 0.05  # the stop and the write of 10 steps' trace of ~2,400 operators each
    job_s = meta["wall_s"] - seconds[PROFILING] - seconds["suspended"]
    rounding = 100 * 0.002 / job_s + 0.005  # four figures written to the millisecond, goodput to 0.01
    assert meta["goodput_pct"] == pytest.approx(100 * seconds[TRAINING] / job_s, abs=rounding)
