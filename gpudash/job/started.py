"""What a job's "started" event says of it (``StartNote``): its torch, CUDA, device, optimizer, how its
steps are counted and its settings (``core.job_settings``), as its lead rank's hooks said them at its
first step, beside the run's configuration; the words for how its steps are counted; and the note
for a job that has not got that far (no word from it, or no step), with how to mark its steps.
Torch-free."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpudash.boot.gpudash_boot import wire
from gpudash.core.events import OPTIMIZER_STEPS
from gpudash.core.job_settings import settings_of
from gpudash.core.start_note import StartNote
from gpudash.job import command as job_command

COUNTED = {  # how a job's steps are counted (its hooks' word), as said
    wire.BY_OPTIMIZER: OPTIMIZER_STEPS,
    wire.BY_BACKWARD: "backward passes (no torch.optim: the parameters updated by hand)",
    wire.BY_TRACK: "gpudash.track()",
}
NO_STEP = "no torch.optim step, no backward pass followed by its parameters changing, no gpudash.track() step"
MARK_STEPS = (  # a job in which no step is seen: how to mark its steps (docs/track.md)
    "to mark its steps, call tracker.step() after each, with tracker = gpudash.track('steps.csv') "
    "made before its loop (docs/track.md)"
)


def counted_words(counted: str) -> str:
    """How the steps are counted, as said ("optimizer steps", …); "" where not said."""
    return COUNTED.get(counted, "")


def start_note(lead: dict[str, Any], pid: int | None, command: Sequence[str]) -> StartNote:
    """What the started event says beside its configuration: the lead rank's hello."""
    return StartNote(
        torch=str(lead.get("torch", "")),
        cuda=str(lead.get("cuda", "") or ""),
        pid=pid,
        device_name=str(lead.get("gpu_name", "") or ""),
        gpu_uuid=str(lead.get("gpu_uuid", "") or ""),
        optimizer=str(lead.get("optimizer", "")),
        steps=counted_words(str(lead.get("counted") or wire.BY_OPTIMIZER)),  # an older hooks': optimizer steps
        command=job_command.display(command),
        settings=settings_of(lead.get("settings")),
    )


def quiet_note(
    since_s: float, hello: bool, stepped: bool, no_hello_s: float, no_step_s: float, compiling: bool = False
) -> tuple[str, str] | None:
    """(key, words) of the note for a job that has said nothing, or never stepped, this long; None."""
    if not hello and since_s >= no_hello_s:
        return "hello", (
            f"no word from the job after {no_hello_s:.0f} s: it has not imported torch yet, or its "
            "Python skips sitecustomize (python -I, -E or -S)"
        )
    if hello and not stepped and since_s >= no_step_s and compiling:
        return "step", (
            f"no step seen yet after {no_step_s:.0f} s: the job called torch.compile, and a first compile "
            "can take minutes (its time is the compile phase once the first step ends)"
        )
    if hello and not stepped and since_s >= no_step_s:
        return "step", f"no step seen yet ({NO_STEP}): {MARK_STEPS}"
    return None
