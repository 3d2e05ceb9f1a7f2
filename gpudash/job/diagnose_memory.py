"""``gpudash diagnose --memory -- CMD``: the job run until its allocator's history of a few steps is
read (from the step after its activations' sample), then ended at a step boundary; on stdout what
its memory holds by kind, what fits, and the lines that held the recorded steps' peak. Never
imports torch or Textual."""

from __future__ import annotations

import json
import sys

from gpudash.core.protocol import EventKind, ExitCode, RunConfig
from gpudash.diagnosis.memory_peak import PeakAnswer
from gpudash.job.command import display
from gpudash.job.memory_history import FROM_STEP
from gpudash.job.session import JobSession

MEMORY_CAP_S = 600.0  # the most the run may take before its recording is read
STOP_NOTE = "ending the job after a step (--keep-running leaves it running)"


def diagnose_memory(config: RunConfig, *, as_json: bool, quiet: bool, keep_running: bool) -> int:
    """The answer on stdout (``--json``: one object); the job stopped after it unless ``keep_running``."""
    from gpudash.job.run import measuring_run

    if not quiet:
        print(
            f"gpudash: recording the allocator of {config.workload} ({display(config.job or ())}) over 2 steps "
            f"from its step {FROM_STEP} (CUDA): the lines that hold its peak, on stdout",
            file=sys.stderr,
            flush=True,
        )
    code, recording = measuring_run(
        config, "memory", quiet, keep_running, STOP_NOTE, duration_s=MEMORY_CAP_S, memory_peak=True
    )
    events = recording.memory_peaks if recording is not None else []
    session = recording.session if recording is not None else None
    if not events:
        steps = session.samples.steps if isinstance(session, JobSession) else 0
        why = f"the job ended after {steps} steps, before its allocator's history was read"
        print(f"gpudash: error: {why} (it needs {FROM_STEP + 2})", file=sys.stderr)
        return code or int(ExitCode.FAILED)
    event = events[0]
    if event.kind == EventKind.ERROR:
        print(f"gpudash: error: {event.message}", file=sys.stderr)
        return code or int(ExitCode.FAILED)
    answer = event.data
    assert isinstance(answer, PeakAnswer), "a memory window's answer carries its peak"  # (``session_windows``)
    if as_json:
        out = {"memory": answer.memory, "peak": answer.peak.as_dict(), "command": list(config.job or ())}
        print(json.dumps(out, indent=2))
    else:
        print("\n".join(filter(None, [answer.memory, *answer.lines])))
    return 0
