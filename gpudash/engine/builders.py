"""Building the workload inside the workload process: the builder the step loop calls at start
and at every switch of family, and what the "started" event says (``StartNote``). Shared by the
single-process child (``gpudash.engine.child``) and each rank of a data-parallel run
(``gpudash.engine.ranks``)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from gpudash.core.protocol import RunConfig
from gpudash.core.start_note import StartNote
from gpudash.engine.loop import StepLoop
from gpudash.engine.loop_state import Builder

if TYPE_CHECKING:  # pragma: no cover
    from workloads.base import Workload


def workload_builder(config: RunConfig, device: Any, rank: Any = None) -> Builder:
    """Builds workloads on ``device`` (as data-parallel ``rank``, a ``RankInfo``, when given); the
    run's image size applies to its first family only."""
    from workloads.base import WorkloadOptions
    from workloads.factory import build
    from workloads.knobs import Knobs

    def builder(name: str, variant: str | None, batch_size: int | None, knobs: Knobs | None = None) -> Workload:
        """A workload of family ``name`` (None: the family's default variant or batch, no knob)."""
        options = WorkloadOptions(
            variant=variant,
            batch_size=batch_size,
            image_size=config.image_size_for(name),
            workers=config.workers,
            seed=config.seed,
            knobs=knobs or Knobs(),
            distributed=rank,
        )
        return build(name, device, options)

    return builder


def start_note(torch: Any, loop: StepLoop, device: Any, nnodes: int | None = None) -> StartNote:
    """What the "started" event says beside its configuration: torch, CUDA, pid, GPU, the image size
    and the loader's workers (``nnodes``: a data-parallel run's nodes)."""
    workload = loop.workload
    workers = workload.describe()["workers"]
    name = uuid = None
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        name, uuid = str(props.name), str(getattr(props, "uuid", ""))
    return StartNote(
        torch=str(torch.__version__),
        cuda=str(torch.version.cuda or ""),
        pid=os.getpid(),
        device_name=name,
        gpu_uuid=uuid,
        image_size=int(workload.image_size),
        workers=workers if isinstance(workers, int) else None,
        nnodes=nnodes,
    )
