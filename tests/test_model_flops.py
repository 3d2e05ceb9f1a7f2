"""Model FLOPs utilisation in the step loop (``gpudash.engine.model_flops``): each configuration's
step counted once, eagerly, without training anything; every sample's TFLOP/s and MFU from it; one
"flops" event per configuration saying what was counted or why MFU is blank."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gpudash.boot.gpudash_boot.flop_count import count_step_flops
from gpudash.core.flops_note import FlopsNote
from gpudash.core.protocol import FLOPS, Event, EventKind, Message, SetBatchSize, Stop
from gpudash.engine.loop import StepLoop
from gpudash.engine.model_flops import flop_text
from tests.messages import samples_of
from tests.test_engine import FakeWorkload, run_loop, scripted
from workloads.base import Workload, WorkloadOptions
from workloads.factory import build


def flops_events(msgs: list[Message]) -> list[Event]:
    return [m for m in msgs if isinstance(m, Event) and m.kind == EventKind.MEASURED and m.what == FLOPS]


def encdec(batch: int = 4) -> Workload:
    torch.manual_seed(0)
    return build("encdec", "cpu", WorkloadOptions(batch_size=batch, seed=0))


def run(
    w: Workload,
    steps: int,
    *,
    peak: float | None,
    controls: list | None = None,
    count: bool = True,
    exact: bool = False,
) -> list:
    """Run ``w`` until a Stop after ``steps`` steps issued (when the loop next looks: a step or a few
    more under load); ``exact``: the loop stops itself after exactly ``steps``."""
    got: list[Message] = []
    ref: list[StepLoop] = []
    loop = StepLoop(
        w,
        emit=got.append,
        controls=scripted([*(controls or []), *([] if exact else [(steps, Stop())])], ref),
        sample_interval_s=0.02,
        peak_tflops=peak,
        count_flops=count,
        max_steps=steps if exact else None,
    )
    ref.append(loop)
    loop.run()
    return got


def test_every_sample_carries_the_counted_flops_their_rate_and_mfu_over_the_peak_given() -> None:
    w = encdec()
    with w.probe_step() as step:
        direct = count_step_flops(step, torch)
    msgs = run(w, 40, peak=0.5)
    (event,) = flops_events(msgs)
    note = event.data
    assert isinstance(note, FlopsNote) and note.flops_per_step == pytest.approx(direct.total, rel=1e-5)
    assert note.dtype == "fp32" and note.peak_source == "--peak-tflops" and note.blank == ""
    assert f"{flop_text(direct.total)} a step (fp32 100%)" in event.message
    timed = [s for s in samples_of(msgs) if s.steps_per_s > 0]
    assert timed
    for s in timed:
        assert s.flops_per_step == direct.total
        tflops = direct.total * s.steps_per_s / 1e12
        assert s.tflops == pytest.approx(tflops) and s.mfu_pct == pytest.approx(100 * tflops / 0.5)
    w.close()


def test_counting_trains_nothing_the_run_trains_exactly_as_without_it() -> None:
    trained = []
    for count in (False, True):
        w = encdec()
        run(w, 12, peak=None, count=count, exact=True)  # the same 12 steps each time, however loaded the machine
        trained.append([p.detach().clone() for p in w.trained_parameters()])
        w.close()
    assert all(torch.equal(a, b) for a, b in zip(*trained, strict=True))


def test_a_new_batch_size_is_counted_once_and_going_back_counts_nothing_again() -> None:
    w = encdec(batch=2)
    msgs = run(w, 30, peak=None, controls=[(10, SetBatchSize(4)), (20, SetBatchSize(2))])
    events = flops_events(msgs)
    assert len(events) == 2  # batch 2, batch 4; back at 2 the first count stands
    small, large = (e.data.flops_per_step for e in events if isinstance(e.data, FlopsNote))
    # the model's arithmetic grows with the batch
    assert small is not None and large == pytest.approx(2 * small, rel=0.01)
    by_batch = {s.batch_size: s.flops_per_step for s in samples_of(msgs) if s.steps_per_s > 0}
    assert by_batch == {2: small, 4: large}
    w.close()


def test_on_the_cpu_without_a_peak_mfu_is_blank_with_the_reason_and_the_rate_stays() -> None:
    w = encdec()
    msgs = run(w, 20, peak=None)
    (event,) = flops_events(msgs)
    assert "MFU blank: no GPU" in event.message and "--peak-tflops" in event.message
    assert "peak_tflops" not in event.details
    timed = [s for s in samples_of(msgs) if s.steps_per_s > 0]
    assert all(s.mfu_pct is None and s.tflops is not None and s.tflops > 0 for s in timed)
    w.close()


def test_a_step_that_cannot_be_counted_leaves_mfu_blank_with_why_and_the_run_goes_on() -> None:
    loop, msgs = run_loop(FakeWorkload(), [], max_steps=20)  # a workload without a probe step
    (event,) = flops_events(msgs)
    assert event.message.startswith("MFU blank: could not count the step's FLOPs")
    assert loop.steps_issued == 20
    assert all(s.flops_per_step is None and s.mfu_pct is None for s in samples_of(msgs))


@pytest.mark.parametrize(
    ("flops", "text"), [(3.1e12, "3.1 TFLOP"), (2.31e8, "231 MFLOP"), (4.2e15, "4.2 PFLOP"), (12.0, "12 FLOP")]
)
def test_flop_counts_read_with_their_prefix(flops: float, text: str) -> None:
    assert flop_text(flops) == text


@pytest.mark.gpu
def test_a_bf16_family_on_the_gpu_has_its_mfu_over_the_tables_bf16_peak(tmp_path: Path) -> None:
    import csv
    import subprocess
    import sys

    from gpudash.core.peaks import peak_of

    path = tmp_path / "run.csv"
    argv = ["record", str(path), "-w", "encdec", "-b", "32", "--knob", "amp=bf16", "--steps", "400", "-q"]
    subprocess.run([sys.executable, "-m", "gpudash", *argv], check=True, timeout=300)
    rows = list(csv.DictReader(path.open(newline="")))
    (event,) = [r for r in rows if r["event_what"] == FLOPS]
    peak = peak_of(torch.cuda.get_device_name())
    assert peak is not None, "run this on a GPU of the peaks table"
    assert "(bf16 " in event["event_message"] and f"{peak.part} bf16 dense" in event["event_message"]
    timed = [r for r in rows if r["row_kind"] == "sample" and float(r["steps_per_s"]) > 0]
    for r in timed:
        tflops, mfu = float(r["tflops"]), float(r["mfu_pct"])
        assert 0 < mfu < 100 and mfu == pytest.approx(100 * tflops / (peak.bf16 or 0.0), rel=1e-4)
