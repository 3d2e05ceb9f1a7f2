"""A profiler window's figures in a diagnosis' ``Evidence``: the GPU's busy time, the host's, the
launch delay and the waits a traced step holds, the exposed collectives as ms of the job's own
(untraced) step, and a rank's collectives split into transfer and wait. Torch-free."""

from __future__ import annotations

from dataclasses import replace

from gpudash.diagnosis.evidence import Evidence
from gpudash.engine.comm_split import RankComm
from gpudash.engine.trace_figures import TraceFigures, traced_step_ms


def with_trace(evidence: Evidence, fig: TraceFigures | None, comm: RankComm | None = None) -> Evidence:
    """The evidence with the profiler window's figures (busy and idle from its own steps); None:
    no window, the evidence as it is. The exposed collectives become ms of the job's (untraced)
    step: the traced steps' share of it, never more than the step. ``comm``: this rank's
    collectives matched across the ranks' windows (``gpudash.engine.comm_split``) — their transfer
    and wait, ms a step as measured (the data moves at its speed under the profiler)."""
    if fig is None:
        return evidence
    kinds = fig.comm_exposed_kinds_of(evidence.step_ms)
    out = replace(
        evidence,
        gpu_busy_pct=fig.gpu_busy_pct,
        gpu_ms_per_step=fig.gpu_ms_per_step,
        host_ms_per_step=fig.host_ms_per_step,
        launch_delay_us=fig.launch_delay_us,
        comm_exposed_ms=fig.comm_exposed_ms_of(evidence.step_ms),
        comm_exposed_kinds=_rounded(kinds) or None,
        host_wait_ms=fig.host_wait_ms_per_step,
        host_gaps_ms=fig.host_gaps_ms_per_step,
        traced_step_ms=traced_step_ms(fig),
    )
    return out if comm is None else with_comm(out, comm)


def with_comm(evidence: Evidence, comm: RankComm) -> Evidence:
    """The evidence with this rank's collectives split into transfer and wait (ms a step, never more
    than the step)."""
    step = evidence.step_ms
    return replace(
        evidence,
        comm_transfer_ms=min(comm.transfer_ms, step),
        comm_transfer_exposed_ms=min(comm.transfer_exposed_ms, step),
        comm_transfer_kinds=_rounded({k: min(ms, step) for k, ms in comm.kinds_exposed_ms.items()}) or None,
        comm_wait_ms=min(comm.wait_exposed_ms, step),
        comm_last_rank=comm.last_rank,
        comm_busbw_gbps=comm.busbw_gbps,
    )


def _rounded(kinds: dict[str, float]) -> dict[str, float]:
    """Each collective kind's exposed ms, to the µs, largest first (``Evidence.comm_exposed_kinds``)."""
    return {kind: round(ms, 3) for kind, ms in sorted(kinds.items(), key=lambda kv: kv[1], reverse=True)}
