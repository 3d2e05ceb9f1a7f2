"""The dashboard's knobs and the catalog's view of what runs: the knobs running and asked for,
why the catalog refuses a setting here, and the knob controls (``k``'s panel, the palette).

``KnobSteering`` is a part of ``gpudash.tui.controller.DashController``, apart because it is a job
of its own; it reads the controller's state and sends through its ``send``. Textual-free.
"""

from __future__ import annotations

from gpudash.core import protocol
from gpudash.core.protocol import Control, RunConfig
from gpudash.tui.notices import Notice, error, warning
from gpudash.tui.state import DashState
from workloads.knobs import KNOBS, OFF, Knobs, parse_knobs  # torch-free
from workloads.registry import FamilyInfo, WorkloadError, family  # torch-free


class KnobSteering:
    """The knobs of a run as the dashboard sees and steers them (``DashController``'s)."""

    state: DashState
    config: RunConfig
    replay: bool
    pending_knobs: Knobs | None  # asked for, not yet answered

    def send(self, control: Control, note: str) -> Notice:
        """Send ``control`` to the workload (``DashController.send``)."""
        raise NotImplementedError

    @property
    def knobs_text(self) -> str:
        """The knobs running, in their text form (the run state's)."""
        return self.state.run.knobs

    def family(self) -> FamilyInfo | None:
        """What runs now, as the catalog knows it (a workload of the user's own too); None: unknown."""
        try:
            return family(self.state.run.workload)
        except WorkloadError:
            return None

    @property
    def knobs(self) -> Knobs:
        """The knobs running now (none while the text is not this version's)."""
        try:
            return parse_knobs(self.knobs_text)
        except WorkloadError:
            return Knobs()

    def knobs_label(self) -> str:
        """The running knobs for the header: "amp=bf16, channels_last" (an on/off knob by name)."""
        return knobs_label(self.knobs_text)

    def knobs_base(self) -> Knobs:
        """What a knob change starts from: the settings asked for last, else the running ones."""
        return self.pending_knobs if self.pending_knobs is not None else self.knobs

    def knob_refusal(self, knobs: Knobs, name: str | None = None) -> str | None:
        """Why ``knobs`` (or knob ``name`` beside them) cannot run on this variant and device;
        None when they can, or when that is not known yet (the workload itself will say)."""
        fam, device = self.family(), self.state.device
        if fam is None or device == "auto":
            return None
        try:
            variant = fam.variant(self.state.run.variant)
        except WorkloadError:
            return None
        ranks = self.config.nproc * self.config.nnodes
        return (
            knobs.refusal(variant, device, ranks)
            if name is None
            else KNOBS[name].refusal(variant, device, knobs, ranks)
        )

    def knob_refusals(self) -> dict[str, str | None]:
        """Each knob's reason it cannot be on here whatever the others are (the panel disables it)."""
        return {name: self.knob_refusal(Knobs(), name) for name in KNOBS}

    def set_knobs(self, knobs: Knobs) -> Notice:
        """Ask for every knob at once (one rebuild), checked first against the catalog."""
        return self._ask_knobs(knobs, protocol.SetKnobs(knobs.text()))

    def set_knob(self, name: str, value: str) -> Notice:
        """Ask for one knob's value (``off`` turns it off); the others stay as they are."""
        try:
            knobs = self.knobs_base().with_value(name, value)
        except WorkloadError as exc:
            return error(f"✗ {exc}")
        return self._ask_knobs(knobs, protocol.SetKnob(name, value))

    def toggle_knob(self, name: str) -> Notice:
        """An on/off knob to the other state."""
        value = OFF if self.knobs_base().on(name) else KNOBS[name].default_on
        return self.set_knob(name, value)

    def _ask_knobs(self, knobs: Knobs, control: protocol.SetKnob | protocol.SetKnobs) -> Notice:
        if self.replay:
            return warning("replay: read-only")
        base = self.knobs_base()
        if knobs == base:
            return Notice(f"knobs already {knobs.text()}")
        why = self.knob_refusal(knobs)
        if why:
            return error(f"✗ {why} — knobs stay {base.text()}")
        slow = " and ".join(dict.fromkeys(knobs.warmups))
        note = f"knobs {base.text()} → {knobs.text()} requested…" + (f" ({slow} first)" if slow else "")
        return self.send(control, note)


def knobs_label(text: str) -> str:
    """``amp=bf16,channels_last=on`` → ``amp=bf16, channels_last``: an on/off knob by its name."""
    parts = [p[: -len("=on")] if p.endswith("=on") else p for p in text.split(",") if p.strip()]
    return ", ".join(parts) or "none"
