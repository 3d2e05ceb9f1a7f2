"""What knobs exist: settings orthogonal to the variant, where each applies, and why not elsewhere.

The variant catalog's sibling table (``registry.py`` says *what* a step does; a knob says *how*
PyTorch runs it: precision, memory layout, autotuning, graph capture, compilation). Torch-free,
so the CLI, the dashboard and ``gpudash list`` read it without paying for torch; the knobs are
applied by ``workloads.tuning`` inside the workload process.

A run's knob settings are a ``Knobs`` value: the knobs that are not off, in catalog order. Its
text form (``amp=bf16,cuda_graph=on``; ``none`` for none) is what the CSV's ``knobs`` column,
the events and ``--knob`` speak.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from workloads.catalog_types import WorkloadError, by_name, one_of

if TYPE_CHECKING:  # pragma: no cover
    from workloads.catalog_types import VariantInfo

OFF = "off"
ON = "on"
NONE_TEXT = "none"  # the text form of "no knob on"


@dataclass(frozen=True)
class KnobInfo:
    """One knob: its values (the first is off), what it does and what it needs."""

    name: str
    summary: str
    values: tuple[str, ...] = (OFF, ON)
    needs_cuda: bool = False
    # What the first step after turning it on does that must stay out of the statistics
    # ("compiling", "capturing", "autotuning"); None: nothing slow.
    warmup: str | None = None
    needs_ddp: bool = False  # a DistributedDataParallel setting: only with --nproc 2 or more
    # It changes the number format of some arithmetic (bf16, TF32), so the loss moves: ``gpudash
    # tune --exact`` leaves it out. The others keep every format (their results may differ in the
    # last bits, as any change of kernel or summation order does).
    changes_precision: bool = False

    @property
    def default_on(self) -> str:
        """The value ``--knob NAME`` (without ``=VALUE``) and a checkbox mean."""
        return self.values[1]

    def check_value(self, value: str) -> str:
        if value not in self.values:
            raise WorkloadError(f"knob {self.name} takes one of: {', '.join(self.values)}; got {value!r}")
        return value

    def refusal(self, variant: VariantInfo, device: str, knobs: Knobs, world_size: int = 1) -> str | None:
        """Why this knob cannot be on for ``variant`` on ``device`` beside ``knobs`` in a run of
        ``world_size`` data-parallel ranks, or None."""
        if self.needs_cuda and device.split(":", 1)[0] != "cuda":
            return f"knob {self.name} needs CUDA ({self.summary})"
        if self.needs_ddp and world_size < 2:
            return f"knob {self.name} is a DistributedDataParallel setting: it needs --nproc 2 or more"
        if self.name in DDP_EXCLUDED and world_size > 1:
            return (
                f"knob {self.name} is not supported with --nproc > 1 here: DDP's gradient hooks would "
                "have to be compiled or captured with the model"
            )
        rule = _RULES.get(self.name)
        return rule(self, variant, knobs) if rule is not None else None


def _graph_rule(knob: KnobInfo, variant: VariantInfo, knobs: Knobs) -> str | None:
    if not variant.sync_free:
        return (
            f"knob cuda_graph needs a sync-free step: {variant.family}/{variant.name} makes the host "
            "wait inside its step, which a captured graph cannot do"
        )
    if variant.uncapturable is not None:
        return f"knob cuda_graph cannot capture {variant.family}/{variant.name}: {variant.uncapturable}"
    if knobs.get("compile") not in (None, OFF):
        return "knob cuda_graph cannot wrap a compiled model: use compile=reduce-overhead, which captures graphs itself"
    return None


def _compile_rule(knob: KnobInfo, variant: VariantInfo, knobs: Knobs) -> str | None:
    if knobs.get("cuda_graph") == ON:
        return "knob compile cannot run under cuda_graph: use compile=reduce-overhead, which captures graphs itself"
    return None


_RULES = {"cuda_graph": _graph_rule, "compile": _compile_rule}
TF32_NEVER = "never"  # the tf32 knob's strict-float32 value
DDP_EXCLUDED = ("cuda_graph", "compile")  # knobs refused in a data-parallel run (workloads.distributed)

KNOBS: dict[str, KnobInfo] = by_name(
    KnobInfo(
        "amp",
        "bf16 autocast of forward and loss (bf16 tensor cores; weights stay fp32)",
        values=(OFF, "bf16"),
        changes_precision=True,
    ),
    KnobInfo("channels_last", "NHWC memory layout for the convolutions' weights and inputs"),
    KnobInfo(
        "cudnn_benchmark",
        "cuDNN times its convolution algorithms once per shape and keeps the fastest",
        needs_cuda=True,
        warmup="autotuning",
    ),
    KnobInfo(
        "tf32",
        "on: TF32 for float32 matrix products too (convolutions use it by default); never: strict float32",
        values=(OFF, ON, TF32_NEVER),
        needs_cuda=True,
        changes_precision=True,
    ),
    KnobInfo(
        "cuda_graph",
        "capture each stage of the step once as a CUDA graph and replay it",
        needs_cuda=True,
        warmup="capturing",
    ),
    KnobInfo(
        "compile",
        "torch.compile the model(s), with the mode as value",
        values=(OFF, "default", "reduce-overhead", "max-autotune"),
        warmup="compiling",
    ),
    KnobInfo(
        "ddp_bucket_mb",
        "DDP gradient bucket size in MB (bucket_cap_mb; off: gpudash's 100 MB, 25: torch's default)",
        values=(OFF, "1", "5", "25"),
        needs_ddp=True,
    ),
    KnobInfo(
        "ddp_torch_defaults",
        "DDP as torch sets it up: gradients copied into the all-reduce buckets "
        "(off: gpudash's gradient_as_bucket_view)",
        needs_ddp=True,
    ),
    KnobInfo(
        "ddp_no_sync",
        "accumulate gradients over K steps under DDP's no_sync, all-reduce and step the optimizer on the K-th",
        values=(OFF, "2", "4", "8"),
        needs_ddp=True,
    ),
)


class Knobs(Mapping[str, str]):
    """Knob settings: name → value for every knob that is not off, in catalog order. Immutable."""

    def __init__(self, settings: Mapping[str, str] | Iterable[tuple[str, str]] = ()) -> None:
        given = dict(settings)
        for name, value in given.items():
            knob(name).check_value(value)
        self._items = tuple((n, given[n]) for n in KNOBS if n in given and given[n] != OFF)
        self._values = dict(self._items)

    def __getitem__(self, name: str) -> str:
        return self._values[name]

    def __iter__(self):  # noqa: ANN204 - Mapping's
        return (n for n, _ in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(self._items)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Knobs) and self._items == other._items

    def __repr__(self) -> str:
        return f"Knobs({self.text()!r})"

    def value(self, name: str) -> str:
        """The knob's value, ``off`` when it is not set."""
        knob(name)
        return self._values.get(name, OFF)

    def on(self, name: str) -> bool:
        return self.value(name) != OFF

    def with_value(self, name: str, value: str) -> Knobs:
        """These settings with one knob changed (``off`` removes it)."""
        return Knobs({**self._values, name: knob(name).check_value(value)})

    def items_text(self) -> list[str]:
        return [f"{n}={v}" for n, v in self._items]

    def text(self) -> str:
        """``amp=bf16,cuda_graph=on``, or ``none``: the CSV's and the events' form."""
        return ",".join(self.items_text()) or NONE_TEXT

    @property
    def warmups(self) -> tuple[str, ...]:
        """What the knobs that are on must do before their statistics count ("compiling", ...)."""
        return tuple(w for n in self if (w := KNOBS[n].warmup) is not None)

    def refusal(self, variant: VariantInfo, device: str, world_size: int = 1) -> str | None:
        """Why these settings cannot all be on for ``variant`` on ``device`` in a run of
        ``world_size`` ranks (the first reason), or None."""
        for name in self:
            why = KNOBS[name].refusal(variant, device, self, world_size)
            if why is not None:
                return why
        return None


def knob(name: str) -> KnobInfo:
    """The knob called ``name``, or a one-line WorkloadError naming the choices."""
    return one_of(KNOBS, name, "knob")


def parse_knob(text: str) -> tuple[str, str]:
    """``amp=bf16`` → ("amp", "bf16"); ``cuda_graph`` → ("cuda_graph", "on"); checked."""
    name, sep, value = text.strip().partition("=")
    info = knob(name.strip())
    return info.name, info.check_value(value.strip()) if sep else info.default_on


def parse_knobs(text: str) -> Knobs:
    """The text form back (``none`` or empty: no knob); raises WorkloadError on a bad entry."""
    text = text.strip()
    if text in ("", NONE_TEXT):
        return Knobs()
    return Knobs(parse_knob(part) for part in text.split(",") if part.strip())


def describe() -> str:
    """A plain-text table of the knobs, for ``gpudash list``."""
    lines = ["knobs (--knob NAME[=VALUE]; k in the dashboard)"]
    for k in KNOBS.values():
        values = "|".join(k.values)
        cuda = "  [needs CUDA]" if k.needs_cuda else "  [needs --nproc >= 2]" if k.needs_ddp else ""
        lines.append(f"  {k.name:<16} {values:<40} {k.summary}{cuda}")
    lines.append("  cuda_graph: only sync-free variants; not with compile (compile=reduce-overhead captures graphs)")
    lines.append("  with --nproc > 1 (DDP): no cuda_graph, no compile")
    return "\n".join(lines)


def label_of(variant: str, knobs: Knobs) -> str:
    """``pipelined+amp=bf16+cuda_graph``: the variant and its knobs as ``sweep -v`` and ``tune
    --current`` take them."""
    return "+".join([variant, *(f"{n}={v}" if v != "on" else n for n, v in knobs.items())])
