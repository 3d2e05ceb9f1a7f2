"""What the dashboard says of model FLOPs utilisation, without Textual: each configuration's
"flops" event (what its step's count was, in what dtype, over which peak — or why MFU is blank)
and the header's figure (MFU and TFLOP/s of the latest sample, or MFU blank with its reason;
never a 0 for a figure that is not known)."""

from __future__ import annotations

from gpudash.core.flops_note import FlopsNote
from gpudash.core.peaks import PRECISION_KNOBS
from gpudash.core.protocol import FLOPS, Event, EventKind, Sample, config_key
from gpudash.core.textfmt import fmt_num


class FlopsCounts:
    """The "flops" events (what each configuration's model FLOPs count was, or why MFU is blank),
    by the configuration of the sample that follows each (the count is made before its steps)."""

    KEPT = 32

    def __init__(self) -> None:
        self.by_config: dict[tuple[str, str, int, str], Event] = {}
        self.pending: Event | None = None  # told, its configuration's first sample not yet seen

    def on_event(self, e: Event) -> None:
        if e.kind == EventKind.MEASURED and e.what == FLOPS:
            self.pending = e

    def on_sample(self, s: Sample) -> None:
        if self.pending is not None:
            key = config_key(s)
            self.by_config.pop(key, None)
            self.by_config[key] = self.pending  # the newest last
            self.pending = None
            while len(self.by_config) > self.KEPT:
                del self.by_config[next(iter(self.by_config))]

    def of(self, s: Sample | None) -> Event | None:
        """The count of ``s``'s configuration: its own; one of its workload, variant, batch size and
        precision knobs (knobs that change no arithmetic, such as compile, reuse a count); before
        any sample, the one told."""
        if s is None:
            return self.pending
        key = config_key(s)
        if key in self.by_config:
            return self.by_config[key]
        alike = [e for k, e in self.by_config.items() if k[:3] == key[:3] and _precision(k[3]) == _precision(key[3])]
        return alike[-1] if alike else self.pending


def _precision(knobs: str) -> tuple[str, ...]:
    """The settings of a knobs text that change a step's dtype (``amp``, ``tf32``): a count is kept by them."""
    return tuple(sorted(item for item in knobs.split(",") if item.split("=", 1)[0] in PRECISION_KNOBS))


def mfu_blank_reason(e: Event | None) -> str | None:
    """Why MFU is blank, as a "flops" event's note says (None: it is not, or no event says)."""
    return (e.data.blank or None) if e is not None and isinstance(e.data, FlopsNote) else None


def mfu_figure(s: Sample | None, e: Event | None) -> tuple[str, str | None] | None:
    """The header's MFU: ("MFU 41.2% · 402 TFLOP/s", None), or what is known and why MFU is blank:
    ("402 TFLOP/s · MFU blank", "no dense peak known for …"); None where nothing is known (no count
    yet, an old recording)."""
    mfu = s.mfu_pct if s is not None else None
    tflops = s.tflops if s is not None else None
    rate = [f"{fmt_num(tflops)} TFLOP/s"] if tflops is not None else []
    if mfu is not None:
        return " · ".join([f"MFU {mfu:.1f}%", *rate]), None
    if not rate and e is None:
        return None
    why = mfu_blank_reason(e) or ("its FLOPs not counted yet" if e is None else None)
    return " · ".join([*rate, "MFU blank" if why else "MFU –"]), why
