"""What a job's session says as the job ends: the run's last windows, the ranks' verdict, the
memory's last figures and the phases' tally (once its run has started); an out-of-memory error,
where the job died of one; and the event that says how it ended — stopped (by gpudash, by a Ctrl-C,
or by itself with code 0) or crashed (a signal, a code, or why it could not run). Torch-free."""

from __future__ import annotations

import time
from typing import Any

from gpudash.core.protocol import OUT_OF_MEMORY, EventKind
from gpudash.core.run_facts import RunFacts
from gpudash.diagnosis.out_of_memory import explained
from gpudash.job.launch import JobProcess
from gpudash.job.session_parts import SessionOut, SessionParts
from gpudash.job.shape_steps import shape_fix


def say_final_figures(parts: SessionParts) -> None:
    """Each rank's last windows, the ranks' verdict, the memory's last figures, the phases' tally
    (the run's own last windows are the session's, stamped as the others)."""
    out = parts.out.messages
    out.extend(parts.world.closed(parts.samples, time.monotonic() - parts.t0))
    if (ranks := parts.world.verdict_event(time.monotonic() - parts.t0)) is not None:
        out.append(ranks)
    if (memory := parts.memory.final(time.monotonic() - parts.t0, *parts.peak_batch())) is not None:
        out.append(memory)
    if (shapes := parts.samples.shapes.event(time.monotonic() - parts.t0, shape_fix(parts.compiles.table))) is not None:
        out.append(shapes)  # a compiled job's steps at a new shape: out of its steady rate, their cost said
    parts.watch.ended(time.monotonic())


def say_how_it_ended(
    out: SessionOut, process: JobProcess, code: int, why: str, oom: dict[str, Any] | None, ctrl_c: bool = False
) -> None:
    """The out-of-memory error that ended it (a thread's: the job may end 0), then "stopped" or
    "crashed". ``ctrl_c``: the user's Ctrl-C came to gpudash, which passed it on."""
    if oom is not None and (code != 0 or oom.get("thread")):
        facts = RunFacts.of({k: v for k, v in oom.items() if k != "k" and v is not None})
        out.event(EventKind.ERROR, what=OUT_OF_MEMORY, message=explained(oom), data=facts)
    stopped = process.stopped_by_gpudash
    ctrl_c = ctrl_c or (process.killed_by() == "SIGINT" and process.terminal.job_group is not None)
    if code == 0 or stopped or ctrl_c:
        how = "interrupted (Ctrl-C)" if ctrl_c else "stopped by gpudash" if stopped else "exited with code 0"
        out.event(EventKind.STOPPED, message=f"the job {how}", details={"exit_code": str(code)})
    else:
        signal_name = process.killed_by()
        killed = f"the job was killed by {signal_name} (exit status {code})" if signal_name else ""
        message = why or killed or f"the job exited with code {code}"
        out.event(EventKind.CRASHED, message=message, details={"exit_code": str(code)})
