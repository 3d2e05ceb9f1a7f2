"""The catalogs' types, torch-free: a family's row (``FamilyInfo``: its variants, defaults and
limits), a variant's (``VariantInfo``: what it is, as the code asks it; the input-pipeline
ladder's ``Fix``), a table by name (``by_name``, ``one_of``) and ``WorkloadError``, the one-line
refusal of a configuration that cannot run. ``workloads.registry`` and ``workloads.knobs`` build
their tables from these.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import Enum
from typing import Protocol, TypeVar

T = TypeVar("T")


class _Named(Protocol):
    @property
    def name(self) -> str: ...


N = TypeVar("N", bound=_Named)


def by_name(*items: N) -> dict[str, N]:
    """A table of ``items`` by their names, in their order (the families, the knobs)."""
    return {item.name: item for item in items}


class WorkloadError(ValueError):
    """A workload configuration that cannot run: the message is one line, meant for the user."""


def one_of(table: Mapping[str, T], name: str, what: str) -> T:
    """``table[name]``, or a one-line WorkloadError naming the unknown ``what`` and the choices."""
    try:
        return table[name]
    except KeyError:
        raise WorkloadError(f"unknown {what} {name!r}; choose one of: {', '.join(table)}") from None


class Fix(Enum):
    """One fix of the input-pipeline ladder; each variant of the ladder adds one to the one before."""

    ALL_CPUS = "one DataLoader worker per available CPU"
    SHIFT_DILATION = "dilation as a boolean OR of shifted copies"
    CROP_FIRST = "crop the PIL image before converting it to a tensor"
    BATCH_COLOUR = "colour conversion and scaling per batch in collate"
    GPU_COLOUR = "colour conversion and scaling per batch on the GPU"  # uint8 through the loader
    GPU_DECODE = "JPEG decoding (nvjpeg), crop and mask per batch on the GPU"  # JPEG bytes through the loader


NEEDS_STREAMS = "needs CUDA streams to overlap its two stages"


@dataclass(frozen=True)
class VariantInfo:
    """One variant: what it is, as the code asks it (never by name outside its family's module)."""

    name: str
    summary: str
    pipelined: bool = False  # two stages overlapped on two CUDA streams (TwoStagePipeline)
    host_augment: bool = False  # augmentation per sample in DataLoader workers, on the CPU
    vectorized: bool = False  # the batched augmentation chain (one rotation for the batch)
    sync_free: bool = True  # a step never makes the host wait for the GPU
    fixes: frozenset[Fix] = frozenset()  # the input-pipeline fixes applied (cumulative)
    cuda_only: str | None = None  # why it needs CUDA other than for streams ("needs CUDA: ..."); None: no reason
    uncapturable: str | None = None  # why its step cannot be captured as a CUDA graph; None: it can
    family: str = ""  # set by FamilyInfo

    @property
    def needs_cuda(self) -> bool:
        return self.pipelined or self.cuda_only is not None

    def refusal(self, device: str) -> str | None:
        """Why this variant cannot run on ``device`` ("cpu", "cuda", "cuda:1"), or None.

        The one reason every caller shows (CLI, workload, dashboard, demo); each adds its
        own advice (the CLI names --device cuda, the dashboard what keeps running)."""
        if self.needs_cuda and device.split(":", 1)[0] != "cuda":
            return f"{self.family}/{self.name} {self.cuda_only or NEEDS_STREAMS}"
        return None


@dataclass(frozen=True)
class Defaults:
    batch_size: int
    image_size: int
    workers: int | None = None


@dataclass(frozen=True)
class FamilyInfo:
    name: str
    title: str
    module: str
    class_name: str
    variants: tuple[VariantInfo, ...]
    default_variant: str
    cuda_defaults: Defaults
    cpu_defaults: Defaults
    # (serial, pipelined) pair toggled by the dashboard's "pipelining" key, if the family has one.
    pipeline_toggle: tuple[str, str] | None = None
    # The largest batch this family takes, whatever the memory: refused before anything is built.
    max_batch_size: int = 4096
    # Samples in an epoch when a step draws from a finite dataset with drop_last (None: endless).
    dataset_size: int | None = None
    # ``package.module:FUNCTION`` or ``FILE.py:FUNCTION`` of a workload written against gpudash.api
    # (workloads.user runs it); None for the reference families, which have their own classes.
    source: str | None = None

    def __post_init__(self) -> None:
        named = tuple(replace(v, family=self.name) for v in self.variants)
        object.__setattr__(self, "variants", named)

    @property
    def variant_names(self) -> tuple[str, ...]:
        return tuple(v.name for v in self.variants)

    def variant(self, name: str) -> VariantInfo:
        for v in self.variants:
            if v.name == name:
                return v
        raise WorkloadError(
            f"unknown variant {name!r} for workload {self.name!r}; choose one of: {', '.join(self.variant_names)}"
        )

    def defaults(self, device_type: str) -> Defaults:
        return self.cuda_defaults if device_type == "cuda" else self.cpu_defaults

    def batch_refusal(self, batch_size: int, ranks: int = 1) -> str | None:
        """Why ``batch_size`` is over this family's fixed limits, or None: the dataset (a batch
        larger than an epoch never comes, with drop_last; with ``ranks`` data-parallel ranks,
        each draws from its share) and the hard cap. Torch-free: checked before anything is built."""
        if self.dataset_size is not None:
            share = self.dataset_size // max(ranks, 1)
            if batch_size > share:
                whose = "the dataset" if ranks <= 1 else f"each of {ranks} ranks' share of the dataset"
                return f"batch {batch_size} is larger than {whose} ({share} samples)"
        if batch_size > self.max_batch_size:
            return f"batch {batch_size} is over {self.name}'s limit of {self.max_batch_size}"
        return None

    def refusal(self, variant: str, device: str) -> str | None:
        """Why ``variant`` cannot run on ``device``: unknown, or needs what the device lacks."""
        try:
            return self.variant(variant).refusal(device)
        except WorkloadError as exc:
            return str(exc)

    def variants_by_role(self) -> dict[str, str]:
        """Its variants by what they are (a preset names them so): ``default``; ``pair_serial`` and
        ``pair_pipelined``, its pipeline pair; ``sync_free``, the first whose step never makes the
        host wait; and by each input-pipeline fix's name (``BATCH_COLOUR``…), the first rung with it."""
        roles = {"default": self.default_variant}
        if self.pipeline_toggle is not None:
            roles["pair_serial"], roles["pair_pipelined"] = self.pipeline_toggle
        roles["sync_free"] = next((v.name for v in self.variants if v.sync_free), "")
        for fix in Fix:
            roles[fix.name] = next((v.name for v in self.variants if fix in v.fixes), "")
        return roles

    def pipeline_target(self, variant: str) -> str | None:
        """The other half of the serial ↔ pipelined pair from ``variant``; None without a pair."""
        if self.pipeline_toggle is None:
            return None
        serial, piped = self.pipeline_toggle
        return serial if variant == piped else piped
