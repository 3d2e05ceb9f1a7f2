"""The dashboard's knobs as a run steers them (``KnobSteering``): the knobs running and asked
for, why the catalog refuses a setting here, and the knob controls (``k``'s panel, the palette).

A part of ``gpudash.tui.controller.DashController`` (its ``knobs``), apart because it is a job of
its own; it reads the controller's state through ``SteeredRun`` and sends through its ``send``.
Textual-free.
"""

from __future__ import annotations

from typing import Protocol

from gpudash.core import protocol
from gpudash.core.protocol import Control, RunConfig
from gpudash.tui.notices import Notice, error, warning
from gpudash.tui.state import DashState
from workloads.catalog_types import FamilyInfo, WorkloadError  # torch-free
from workloads.knobs import KNOBS, OFF, Knobs, parse_knobs  # torch-free


class SteeredRun(Protocol):
    """What the knobs read of the run and send through (``DashController``'s)."""

    state: DashState
    config: RunConfig
    replay: bool
    pending_knobs: Knobs | None  # asked for, not yet answered

    def send(self, control: Control, note: str) -> Notice: ...

    def family(self) -> FamilyInfo | None: ...


class KnobSteering:
    """The knobs of ``run`` as the dashboard sees and steers them."""

    def __init__(self, run: SteeredRun) -> None:
        self.run = run

    @property
    def text(self) -> str:
        """The knobs running, in their text form (the run state's)."""
        return self.run.state.run.knobs

    @property
    def running(self) -> Knobs:
        """The knobs running now (none while the text is not this version's)."""
        try:
            return parse_knobs(self.text)
        except WorkloadError:
            return Knobs()

    def label(self) -> str:
        """The running knobs for the header: "amp=bf16, channels_last" (an on/off knob by name)."""
        return knobs_label(self.text)

    def base(self) -> Knobs:
        """What a knob change starts from: the settings asked for last, else the running ones."""
        pending = self.run.pending_knobs
        return pending if pending is not None else self.running

    def refusal(self, knobs: Knobs, name: str | None = None) -> str | None:
        """Why ``knobs`` (or knob ``name`` beside them) cannot run on this variant and device;
        None when they can, or when that is not known yet (the workload itself will say)."""
        run = self.run
        fam, device = run.family(), run.state.device
        if fam is None or device == "auto":
            return None
        try:
            variant = fam.variant(run.state.run.variant)
        except WorkloadError:
            return None
        ranks = run.config.nproc * run.config.nnodes
        return (
            knobs.refusal(variant, device, ranks)
            if name is None
            else KNOBS[name].refusal(variant, device, knobs, ranks)
        )

    def refusals(self) -> dict[str, str | None]:
        """Each knob's reason it cannot be on here whatever the others are (the panel disables it)."""
        return {name: self.refusal(Knobs(), name) for name in KNOBS}

    def ask_all(self, knobs: Knobs) -> Notice:
        """Ask for every knob at once (one rebuild), checked first against the catalog."""
        return self._ask(knobs, protocol.SetKnobs(knobs.text()))

    def ask(self, name: str, value: str) -> Notice:
        """Ask for one knob's value (``off`` turns it off); the others stay as they are."""
        try:
            knobs = self.base().with_value(name, value)
        except WorkloadError as exc:
            return error(f"✗ {exc}")
        return self._ask(knobs, protocol.SetKnob(name, value))

    def toggle(self, name: str) -> Notice:
        """An on/off knob to the other state."""
        value = OFF if self.base().on(name) else KNOBS[name].default_on
        return self.ask(name, value)

    def _ask(self, knobs: Knobs, control: protocol.SetKnob | protocol.SetKnobs) -> Notice:
        if self.run.replay:
            return warning("replay: read-only")
        base = self.base()
        if knobs == base:
            return Notice(f"knobs already {knobs.text()}")
        why = self.refusal(knobs)
        if why:
            return error(f"✗ {why} — knobs stay {base.text()}")
        slow = " and ".join(dict.fromkeys(knobs.warmups))
        note = f"knobs {base.text()} → {knobs.text()} requested…" + (f" ({slow} first)" if slow else "")
        return self.run.send(control, note)


def knobs_label(text: str) -> str:
    """``amp=bf16,channels_last=on`` → ``amp=bf16, channels_last``: an on/off knob by its name."""
    parts = [p[: -len("=on")] if p.endswith("=on") else p for p in text.split(",") if p.strip()]
    return ", ".join(parts) or "none"
