"""Pilot tests of a diagnosis' answer in the dashboard (``d``): the verdict in the stats panel's
border, the leading remedy in the message bar ("→ up to N× …; then …", within an 80-column
terminal) and every remedy in a toast, as ``gpudash diagnose`` prints them — for a family's run, a
user's job and a replay of the dashboard's recording (fake source, real evidence, no torch)."""

from __future__ import annotations

import csv
import dataclasses
import sys
from pathlib import Path

import pytest

from gpudash.core.protocol import DIAGNOSIS, Diagnose, Event, EventKind, RunConfig
from gpudash.core.running import Running
from gpudash.diagnosis import remedies
from gpudash.diagnosis.evidence import Evidence
from gpudash.diagnosis.judge import Findings, judged
from gpudash.diagnosis.rules import diagnose
from gpudash.diagnosis.verdict import Bound
from gpudash.recording.replay import ReplaySource
from gpudash.tui.app import GpuDashApp
from gpudash.tui.notices import LINE_WIDTH, diagnosis_notice, remedy_line
from gpudash.tui.stats_panel import StatsPanel
from tests.helpers import replayed_event, verdict_of
from tests.messages import present
from tests.test_remedies import sync_script

from .conftest import replay_loaded
from .dashboard import make_app, message, running_app
from .fakes import FakeSource, gpm_gpu, run_segment, started

NARROW = (80, 24)
FAMILY_LINE = "→ up to 1.8× (input): more loader workers, pin_memory…; then host/launch-bound"
JOB_LINE = "→ up to 1.8× (input): more DataLoader workers…; then host/launch-bound"
VERDICT = "input-bound: 45% of each step waits for the next batch (9 of 20 ms)"


def input_bound(job_settings: dict[str, str] | None = None) -> Evidence:
    """A window on a GPU: 9 of each 20 ms step wait for the next batch; the host enqueues the rest in
    10.5 ms under the profiler (21 ms a step there) for 8 ms of kernels: next, launch-bound."""
    return Evidence(
        steps=30,
        step_ms=20.0,
        input_ms=9.0,
        syncs_per_step=0.0,
        gpu_busy_pct=40.0,
        gpu_ms_per_step=8.0,
        host_ms_per_step=10.5,
        launch_delay_us=15.0,
        host_wait_ms=0.0,
        traced_step_ms=21.0,
        job_settings=job_settings,
    )


def diagnosis_event(t: float, e: Evidence, job: bool = False) -> Event:
    """As a live source gives it (``EngineSession``, ``JobSession``): the window's findings judged
    once, the verdict's line its message, the configuration in its details."""
    running = (
        Running("job:train.py", "", 8, device="cuda:0") if job else Running("encdec", "serial", 8, device="cuda:0")
    )
    findings = Findings(e, script=job, window_start_s=t - 2)
    return judged(Event(t, EventKind.MEASURED, what=DIAGNOSIS, data=findings, running=running), None)


def border(app: GpuDashApp) -> str:
    return str(app.query_one(StatsPanel).border_title or "")


def toasts_of(app: GpuDashApp, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The text of every toast the app pops up from now on."""
    told: list[str] = []
    monkeypatch.setattr(app, "notify", lambda text, **_: told.append(str(text)))
    return told


async def diagnosed(app: GpuDashApp, src: FakeSource, pilot, event: Event) -> None:
    """``d`` pressed on a running run, then the window's answer."""
    await running_app(pilot, app, src, until=18.0)
    await pilot.press("d")
    assert src.sent == [Diagnose()]
    src.push(event, *run_segment(20.0, 22.0, 200.0, steps0=4000))
    app.refresh_now()
    await pilot.pause()


async def test_an_input_bound_diagnosis_shows_what_each_fix_is_worth(monkeypatch: pytest.MonkeyPatch) -> None:
    src = FakeSource()
    app = make_app(src, toasts=True)
    toasts = toasts_of(app, monkeypatch)
    async with app.run_test(size=NARROW) as pilot:
        await diagnosed(app, src, pilot, diagnosis_event(20.0, input_bound()))
        assert f" diagnosis: {VERDICT} — make the input pipeline faster" in border(app)  # the verdict
        assert message(app) == FAMILY_LINE and len(FAMILY_LINE) <= LINE_WIDTH
        shown = app.export_screenshot().replace("\u00a0", " ").replace("&#160;", " ")
        assert "then host/launch-bound" in shown  # whole in the message bar at 80 columns
    (toast,) = toasts  # every remedy, in gpudash's knobs, as `gpudash diagnose` prints them
    assert toast.splitlines() == [
        f"{VERDICT} — make the input pipeline faster: more loader workers, pin_memory, decode or augment on the GPU",
        "  up to 1.8× (input): more loader workers, pin_memory, decode or augment on the GPU; then "
        "host/launch-bound at 11 ms a step: cuda_graph or compile=reduce-overhead, or a larger batch, up to 1.4× more",
        "  up to 1.2× (host): cuda_graph or compile=reduce-overhead, or a larger batch; then input-bound at 17 ms "
        "a step: more loader workers, pin_memory, decode or augment on the GPU, up to 2.1× more",
    ]
    _, lines = remedies.answer(input_bound(), diagnose(input_bound()), script=False)
    assert toast.splitlines()[1:] == lines  # the CLI's lines, from one source


async def test_a_jobs_diagnosis_shows_its_remedies_in_a_scripts_words(monkeypatch: pytest.MonkeyPatch) -> None:
    """A job's remedies leave out what its loader already does (pin_memory=True here)."""
    src = FakeSource(RunConfig(workload="job:train.py", variant="", job=(sys.executable, "train.py")))
    app = make_app(src, toasts=True)
    toasts = toasts_of(app, monkeypatch)
    evidence = input_bound({"num_workers": "0", "pin_memory": "True", "persistent_workers": "False"})
    async with app.run_test(size=NARROW) as pilot:
        await diagnosed(app, src, pilot, diagnosis_event(20.0, evidence, job=True))
        assert f" diagnosis: {VERDICT} — make the input pipeline faster" in border(app)
        assert message(app) == JOB_LINE
    (toast,) = toasts
    assert (
        "  up to 1.8× (input): make the input pipeline faster: more DataLoader workers (num_workers, now 0), " in toast
    )
    assert "pin_memory" not in toast and "torch.compile(mode='reduce-overhead')" in toast


async def test_a_replay_of_the_recording_shows_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CSV keeps the diagnosis' judgement whole in the row's ``event_data``: the replay tells the
    same line and keeps the same verdict and remedies, with NVML's and GPM's ticks in the file."""
    out = tmp_path / "run.csv"
    src = FakeSource()
    app = make_app(src)
    async with app.run_test(size=NARROW) as pilot:
        await running_app(pilot, app, src, until=12.0)
        app.start_recording(str(out))
        src.push(*run_segment(12.0, 18.0, 200.0, steps0=2200), gpm_gpu(18.0, 60.0, 5.0, 30.0))
        await diagnosed(app, src, pilot, diagnosis_event(20.0, input_bound()))
        live_line, live_verdict = message(app), border(app)
        await pilot.press("c")
    (row,) = [r for r in csv.DictReader(out.open()) if r["event_what"] == DIAGNOSIS]
    assert row["event_message"].startswith(VERDICT)
    assert [r.limit for r in verdict_of(replayed_event(row)).remedies] == ["input", "host"]
    replay = make_app(ReplaySource(str(out)))
    said: list[str] = []
    monkeypatch.setattr(replay, "say", lambda text, *_: said.append(text))
    async with replay.run_test(size=NARROW) as pilot:
        await replay_loaded(pilot, replay)
        replay.refresh_now()
        await pilot.pause()
        assert live_line == FAMILY_LINE and FAMILY_LINE in said
        assert border(replay) == live_verdict
        assert present(replay.state.last_diagnosis).message.startswith(VERDICT)
        assert verdict_of(replay.state.last_diagnosis) == verdict_of(diagnosis_event(20.0, input_bound()))


def test_the_leading_remedy_fits_the_line_and_keeps_whole_words() -> None:
    (sync,) = remedies.remedies(sync_script(), Bound.SYNC, script=True)  # issue 56's sync script
    assert remedy_line(sync) == "→ up to 1.1× (syncs): keep the step free of .item()…; then host/launch-bound"
    wide = remedy_line(sync, width=200)
    assert wide.endswith("; then host/launch-bound (up to 3.8× more)") and "asynchronously" in wide
    assert all(len(remedy_line(sync, width=w)) <= w for w in range(40, 120))


async def test_a_replayed_diagnosis_without_its_judgement_shows_its_verdict(tmp_path: Path) -> None:
    """A recording from before the ``event_data`` column has the verdict's line alone: its replay
    tells that line, with NVML's and GPM's ticks before it (nothing is judged again)."""
    from gpudash.recording.record import CsvRecorder

    out = tmp_path / "headless.csv"
    recorder = CsvRecorder(str(out), {})
    for msg in (started(1.0), *run_segment(1.0, 18.0, 200.0), gpm_gpu(18.0, 60.0, 5.0, 30.0)):
        recorder.on_message(msg)
    recorder.on_message(dataclasses.replace(diagnosis_event(20.0, input_bound()), data=None))
    recorder.close()
    app = make_app(ReplaySource(str(out)))
    async with app.run_test(size=NARROW) as pilot:
        await replay_loaded(pilot, app)
        app.refresh_now()
        await pilot.pause()
        assert message(app).startswith(VERDICT)
        assert f" diagnosis: {VERDICT} — make the input pipeline faster" in border(app)


@pytest.mark.parametrize("after", ["", "16", "[" * 5000 + "]" * 5000, '[{"limit": "input", "up_to": "inf"}]', "[1]"])
def test_a_diagnosis_row_whose_after_is_not_its_remedies_tells_its_verdict(after: str) -> None:
    """A recording is a hostile file: an ``event_after`` is never read as remedies (they are the judgement's)."""
    e = diagnosis_event(20.0, input_bound())
    notice = diagnosis_notice(Event(20.0, EventKind.MEASURED, what=DIAGNOSIS, after=after, message=e.message), False)
    assert notice.text == e.message and not notice.toast
