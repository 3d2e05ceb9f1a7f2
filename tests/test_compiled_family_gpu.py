"""gpudash's own families under the ``compile`` knob (inductor, on a GPU: marked ``gpu``) report their
compiles as a user's job does (``gpudash.engine.compile_events``): a batch change recompiles the
model (``dynamic=False``), said as a ``recompile`` event with the batch's sizes."""

from __future__ import annotations

import pytest

from gpudash.core.compile_note import CompileNote
from gpudash.core.compile_table import RECOMPILE
from gpudash.core.protocol import Control, Event, Message, SetBatchSize, Stop

pytestmark = [pytest.mark.gpu, pytest.mark.slow]


def test_a_batch_change_of_a_compiled_family_is_a_recompile_with_its_sizes() -> None:
    from gpudash.engine.loop import StepLoop
    from workloads.base import WorkloadOptions
    from workloads.factory import build
    from workloads.knobs import Knobs

    w = build("encdec", "cuda", WorkloadOptions(variant="serial", batch_size=8, knobs=Knobs({"compile": "default"})))
    got: list[Message] = []
    loop = StepLoop(w, emit=got.append, sample_interval_s=0.1)
    loop.run(steps=20)
    controls: list[Control] = [SetBatchSize(16)]
    done = {"at": 0}

    def next_control(timeout: float) -> Control | None:
        if controls:
            return controls.pop()
        if not done["at"] and loop.workload.batch_size == 16:
            done["at"] = loop.steps_issued + 30
        if done["at"] and loop.steps_issued >= done["at"]:
            done["at"] = 1 << 62
            return Stop()
        return None

    loop.controls = next_control
    try:
        loop.run(duration_s=300)
    finally:
        w.close()
    recompiles = [m for m in got if isinstance(m, Event) and m.what == RECOMPILE]
    assert recompiles, [m.message for m in got if isinstance(m, Event)]
    reasons = [e.data.reason for e in recompiles if isinstance(e.data, CompileNote)]
    assert any(": 8 → 16" in reason for reason in reasons), [e.message for e in recompiles]
    print("\n".join(e.message for e in recompiles))


def test_a_batch_change_under_cuda_graph_is_said_as_a_capture_again() -> None:
    from gpudash.engine.compile_events import RECAPTURE
    from gpudash.engine.loop import StepLoop
    from workloads.base import WorkloadOptions
    from workloads.factory import build
    from workloads.knobs import Knobs

    options = WorkloadOptions(variant="serial", batch_size=8, knobs=Knobs({"cuda_graph": "on"}))
    w = build("encdec", "cuda", options)
    got: list[Message] = []
    loop = StepLoop(w, emit=got.append, sample_interval_s=0.1)
    loop.run(steps=20)
    loop.apply(SetBatchSize(16))
    loop.run(steps=20)
    w.close()
    (again,) = [m for m in got if isinstance(m, Event) and m.what == RECAPTURE]
    assert again.message.startswith("cuda_graph captured the step again for batch_size 16 (capture 2; the change took ")
