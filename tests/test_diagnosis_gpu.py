"""The diagnosis on a real GPU names the known bottleneck of each reference case (issue 27):
sync_loss sync-heavy is sync-bound, input_pipeline's baseline input-bound, encdec pipelined at
batch 1 with no knobs host/launch-bound, encdec at batch 32 with the best knobs GPU-bound."""

from __future__ import annotations

import pytest

from gpudash.core.protocol import Diagnose, Event, EventKind
from gpudash.diagnosis.judge import judged
from gpudash.diagnosis.verdict import Bound
from gpudash.engine.loop import StepLoop
from tests.helpers import verdict_of
from workloads.base import WorkloadOptions
from workloads.factory import build
from workloads.knobs import parse_knobs

pytestmark = pytest.mark.gpu
BEST = "amp=bf16,channels_last,cudnn_benchmark,cuda_graph"


def _diagnosed(name: str, variant: str, batch_size: int | None = None, knobs: str = "none", warmup: int = 40) -> Event:
    w = build(name, "cuda", WorkloadOptions(variant=variant, batch_size=batch_size, knobs=parse_knobs(knobs)))
    got: list[object] = []
    pending = [Diagnose(30)]

    def controls(_timeout: float) -> Diagnose | None:
        return pending.pop() if pending and loop.steps_issued >= warmup else None

    loop = StepLoop(w, emit=got.append, controls=controls, sample_interval_s=0.1)
    loop.run(steps=warmup + 60 + 5)
    w.close()
    errors = [m for m in got if isinstance(m, Event) and m.kind == EventKind.ERROR]
    assert not errors, errors[0].message
    (found,) = [m for m in got if isinstance(m, Event) and m.what == "diagnosis"]
    event = judged(found, None)  # as its source judges it (NVML's tick aside: the window's own figures)
    print(name, variant, batch_size, knobs, "→", event.message)
    return event


@pytest.mark.parametrize(
    ("name", "variant", "batch_size", "knobs", "bound"),
    [
        ("sync_loss", "sync-heavy", None, "none", Bound.SYNC),
        ("input_pipeline", "baseline", 32, "none", Bound.INPUT),  # input-bound at any batch; 32 is quick
        ("encdec", "pipelined", 1, "none", Bound.HOST),  # an H200's kernels: half its step; at 8, 85–97%
        ("encdec", "serial", 32, BEST, Bound.GPU_COMPUTE),
    ],
)
def test_the_diagnosis_names_each_reference_cases_known_bottleneck(
    name: str, variant: str, batch_size: int | None, knobs: str, bound: Bound
) -> None:
    event = _diagnosed(name, variant, batch_size, knobs)
    assert verdict_of(event).head.bound == bound, event.message
    evidence = verdict_of(event).evidence
    assert evidence.gpu_busy_pct is not None and evidence.syncs_per_step is not None
    if bound == Bound.SYNC:
        assert evidence.syncs_per_step >= 1
    assert 0.0 <= evidence.gpu_busy_pct <= 100.0  # one window's busy share: never clipped, never over
    if bound == Bound.HOST:  # the host takes longer to enqueue a step than the GPU takes to run it
        assert evidence.gpu_ms_per_step is not None and evidence.host_ms_per_step is not None
        assert evidence.gpu_ms_per_step < evidence.host_ms_per_step
    if bound == Bound.GPU_COMPUTE:
        assert evidence.gpu_busy_pct >= 90.0
