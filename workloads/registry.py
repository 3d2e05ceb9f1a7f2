"""What workloads exist: families, variants, defaults and which variants need CUDA.

This module never imports torch, so ``gpudash list`` and ``gpudash --help`` stay instant;
``workloads.factory.build`` creates a workload from a family named here. The rows' types are
``workloads.catalog_types``'.
"""

from __future__ import annotations

import functools
import os
from typing import Any

from workloads import user_spec
from workloads.catalog_types import Defaults, FamilyInfo, Fix, VariantInfo, WorkloadError, by_name


def _ladder(
    *steps: tuple[str, str, Fix | None], extra: dict[str, dict[str, Any]] | None = None
) -> tuple[VariantInfo, ...]:
    """Variants that each add one fix to the one before (the input-pipeline ladder); ``extra``:
    further VariantInfo fields by variant name."""
    out: list[VariantInfo] = []
    fixes: frozenset[Fix] = frozenset()
    for name, summary, fix in steps:
        fixes = fixes | {fix} if fix is not None else fixes
        out.append(VariantInfo(name, summary, fixes=fixes, **(extra or {}).get(name, {})))
    return tuple(out)


# Written against the public API (gpudash.api) like a user's file: workloads.vision.
_ONE_STEP = "the training step on one stream"
PIPELINED_API = (
    "batch n+1 copied to the GPU (and through the frozen stage, if any) on its own stream while batch n trains"
)
_COPY_AHEAD = (
    VariantInfo("serial", _ONE_STEP),
    VariantInfo("pipelined", "batch n+1 copied to the GPU on its own stream while batch n trains", pipelined=True),
)
VISION_IMAGES = "224-pixel images on a GPU, 64 on the CPU"
API_IMAGE_SIZE = 64  # a placeholder the catalog's checks accept: the function's batches set the real size


def api_family(
    name: str, title: str, variants: tuple[VariantInfo, ...], cuda: int, cpu: int, source: str
) -> FamilyInfo:
    """A family run by workloads.user from the function ``source`` (``module:FUNCTION`` or
    ``FILE.py:FUNCTION``), written against gpudash.api: serial, and pipelined if it has two variants."""
    return FamilyInfo(
        name=name,
        title=title,
        module="workloads.user",
        class_name="UserWorkload",
        variants=variants,
        default_variant=variants[0].name,
        cuda_defaults=Defaults(batch_size=cuda, image_size=API_IMAGE_SIZE),
        cpu_defaults=Defaults(batch_size=cpu, image_size=API_IMAGE_SIZE),
        pipeline_toggle=("serial", "pipelined") if len(variants) == 2 else None,
        source=source,
    )


def reference_family(name: str, class_name: str, **fields: Any) -> FamilyInfo:
    """One of the reference families: its class ``class_name`` in the module ``workloads.<name>``;
    ``fields``: the rest of its ``FamilyInfo``."""
    return FamilyInfo(name=name, module=f"workloads.{name}", class_name=class_name, **fields)


def _vision_families() -> tuple[FamilyInfo, ...]:
    finetune_variants = (
        VariantInfo("serial", "frozen trunk then trained layer 4 and head, one stream"),
        VariantInfo(
            "pipelined", "frozen trunk on batch n+1 (its own stream) overlaps training on batch n", pipelined=True
        ),
    )
    catalog = {  # name: (title, variants, batch on a GPU, batch on the CPU)
        "resnet50": (f"torchvision ResNet-50, {VISION_IMAGES}", _COPY_AHEAD, 128, 4),
        "vit_b_16": (f"torchvision ViT-B/16 with AdamW, {VISION_IMAGES} (2 layers on the CPU)", _COPY_AHEAD, 64, 2),
        "finetune": (
            f"ResNet-50 fine-tuning: frozen stem and layers 1-3, trained layer 4 and head; {VISION_IMAGES}",
            finetune_variants,
            128,
            4,
        ),
    }
    return tuple(
        api_family(name, title, variants, cuda, cpu, f"workloads.vision:{name}")
        for name, (title, variants, cuda, cpu) in catalog.items()
    )


FAMILIES: dict[str, FamilyInfo] = by_name(
    reference_family(
        "encdec",
        "EncDecWorkload",
        title="Frozen encoder, trained decoder: serial vs dual-stream pipeline",
        variants=(
            VariantInfo("serial", "encoder then decoder train step, one stream"),
            VariantInfo(
                "pipelined",
                "encoder on batch n+1 (stream E) overlaps decoder training on batch n (stream D)",
                pipelined=True,
            ),
        ),
        default_variant="serial",
        cuda_defaults=Defaults(batch_size=8, image_size=256),
        cpu_defaults=Defaults(batch_size=4, image_size=32),
        pipeline_toggle=("serial", "pipelined"),
    ),
    reference_family(
        "augment",
        "AugmentWorkload",
        title="CPU vs GPU vs pipelined GPU augmentation",
        variants=(
            VariantInfo("cpu", "per-sample torchvision v2 transforms in DataLoader workers", host_augment=True),
            VariantInfo("gpu", "batch chain on the device, per-image rotation loop (the article's)", sync_free=False),
            VariantInfo("gpu-vectorized", "batch chain on the device, one batched rotation, no syncs", vectorized=True),
            VariantInfo(
                "pipelined",
                "vectorized augmentation of batch n+1 on its own stream while the model trains on batch n",
                pipelined=True,
                vectorized=True,
            ),
            VariantInfo(
                "pipelined-loop",
                "the per-image rotation loop pipelined: its host syncs stall the pipeline",
                pipelined=True,
                sync_free=False,
            ),
        ),
        default_variant="cpu",
        cuda_defaults=Defaults(batch_size=32, image_size=256, workers=8),
        cpu_defaults=Defaults(batch_size=8, image_size=32, workers=2),
        pipeline_toggle=("gpu-vectorized", "pipelined"),
    ),
    reference_family(
        "sync_loss",
        "SyncLossWorkload",
        title="Host-device syncs in a masked loss",
        variants=(
            VariantInfo(
                "sync-heavy", "nonzero, unique, numel and boolean masks: the host waits 6 times a step", sync_free=False
            ),
            VariantInfo("fixed", "where, sort + count_nonzero, ignore_index: no host syncs"),
        ),
        default_variant="sync-heavy",
        cuda_defaults=Defaults(batch_size=32, image_size=256),
        cpu_defaults=Defaults(batch_size=4, image_size=64),
    ),
    reference_family(
        "input_pipeline",
        "InputPipelineWorkload",
        title="A CPU-bound input pipeline, fixed step by step",
        variants=_ladder(
            ("baseline", "scipy convolve2d dilation, 4 DataLoader workers", None),
            ("workers", f"+ {Fix.ALL_CPUS.value}", Fix.ALL_CPUS),
            ("dilation", f"+ {Fix.SHIFT_DILATION.value}", Fix.SHIFT_DILATION),
            ("reorder", f"+ {Fix.CROP_FIRST.value}", Fix.CROP_FIRST),
            ("batch-transform", f"+ {Fix.BATCH_COLOUR.value}", Fix.BATCH_COLOUR),
            ("gpu-transform", f"+ {Fix.GPU_COLOUR.value}", Fix.GPU_COLOUR),
            ("gpu-decode", f"+ {Fix.GPU_DECODE.value}", Fix.GPU_DECODE),
            extra={
                "gpu-decode": {
                    "cuda_only": "needs CUDA: nvjpeg decodes its JPEGs on the GPU",
                    "uncapturable": "nvjpeg's batched decode allocates its outputs and waits on the host "
                    "for its own stream at every call",
                }
            },
        ),
        default_variant="baseline",
        cuda_defaults=Defaults(batch_size=256, image_size=256),
        cpu_defaults=Defaults(batch_size=16, image_size=64),
        dataset_size=10_000,  # workloads.input_pipeline.OneJpegDataset
    ),
    *_vision_families(),
)

DEFAULT_FAMILY = "encdec"


MIN_IMAGE_SIZE, MAX_IMAGE_SIZE = 16, 1024


def parse_batch_size(value: object) -> int:
    """A batch size from user input (int or text), or a one-line WorkloadError (the edge's check)."""
    try:
        n = int(str(value).strip())
    except ValueError:
        raise WorkloadError(f"batch size must be a whole number, got {value!r}") from None
    return check_batch_size(n)


def check_batch_size(n: int) -> int:
    """A batch size the workloads accept (the workload's own check), or a one-line WorkloadError."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise WorkloadError(f"batch size must be a whole number, got {n!r}")
    if n < 1:
        raise WorkloadError(f"batch size must be at least 1, got {n}")
    return n


def check_image_size(n: int) -> int:
    """Image sizes are powers of two: the models halve the image down to 1x1."""
    if not (MIN_IMAGE_SIZE <= n <= MAX_IMAGE_SIZE) or n & (n - 1):
        raise WorkloadError(f"image size must be a power of two from {MIN_IMAGE_SIZE} to {MAX_IMAGE_SIZE}, got {n}")
    return n


def family(name: str) -> FamilyInfo:
    """The family called ``name``: a built-in family, an installed workload (an entry point of
    the group ``gpudash.workloads``) or ``FILE.py:FUNCTION`` / ``package.module:FUNCTION`` for a
    workload of the user's own; or a one-line WorkloadError."""
    if name in FAMILIES:
        return FAMILIES[name]
    if ":" in name:
        return user_family(name)
    installed = user_spec.entry_points()
    if name in installed:
        return user_family(installed[name], name)
    choices = ", ".join([*FAMILIES, *installed])
    raise WorkloadError(f"unknown workload {name!r}; choose one of: {choices}; or your own, as FILE.py:FUNCTION")


# A workload of the user's own (gpudash.api, workloads.user) without declared batch sizes
# (``@gpudash.api.workload``): these, on a GPU and on the CPU.
USER_BATCH_SIZES = {"cuda": 32, "cpu": 8}


def user_family(spec: str, installed_as: str | None = None) -> FamilyInfo:
    """The family of a workload of the user's own, ``FILE.py:FUNCTION`` or ``package.module:FUNCTION``
    (``installed_as``: its entry point's name, which then names the family): its form, its file
    and its ``@workload(...)`` declaration checked here, one line each; the function itself when
    the workload process imports it. Read again when the file changes (a dashboard left open)."""
    if not is_user_spec(spec):
        raise WorkloadError(f"{spec!r}: a workload of your own is FILE.py:FUNCTION or package.module:FUNCTION")
    try:
        path = user_spec.source_file(spec)
        return _user_family(spec, installed_as, path, os.stat(path).st_mtime_ns)
    except (user_spec.SpecError, OSError) as exc:
        raise WorkloadError(str(exc)) from None


@functools.lru_cache(maxsize=32)
def _user_family(spec: str, installed_as: str | None, path: str, _mtime_ns: int) -> FamilyInfo:
    """``user_family``'s work, once per version of the file (``_mtime_ns`` is the cache's key)."""
    said = user_spec.declared(spec, path)
    source, _, function = spec.rpartition(":")
    variants = (
        VariantInfo("serial", "your training step, on one stream"),
        VariantInfo("pipelined", PIPELINED_API, pipelined=True),
    )
    cuda = said.batch_size or USER_BATCH_SIZES["cuda"]
    cpu = said.cpu_batch_size or said.batch_size or USER_BATCH_SIZES["cpu"]
    title = f"{said.name or 'your workload'}: {function}() of {source}"
    return api_family(installed_as or spec, title, variants, cuda, cpu, source=spec)


is_user_spec = user_spec.is_user_spec


def describe(only: str | None = None) -> str:
    """A plain-text table of every family (or only the one named) and its variants, and the
    installed workloads (entry points), for ``gpudash list``."""
    lines: list[str] = []
    for info in FAMILIES.values():
        if only is not None and info.name != only:
            continue
        c, p = info.cuda_defaults, info.cpu_defaults
        lines.append(f"{info.name}  —  {info.title}")
        images = "" if info.source else f", image {c.image_size}"
        cpu_images = "" if info.source else f", image {p.image_size}"
        lines.append(f"  defaults: batch {c.batch_size}{images} on CUDA; batch {p.batch_size}{cpu_images} on the CPU")
        for v in info.variants:
            mark = "*" if v.name == info.default_variant else " "
            cuda = "  [needs CUDA]" if v.needs_cuda else ""
            lines.append(f"  {mark} {v.name:<16} {v.summary}{cuda}")
        lines.append("")
    installed = user_spec.entry_points()
    if only is None and installed:
        lines.append(f"installed workloads (entry points, group {user_spec.ENTRY_POINT_GROUP}):")
        lines.extend(f"  {name:<18} {value}" for name, value in installed.items())
        lines.append("")
    lines.append("* = default variant; your own: -w FILE.py:FUNCTION (docs/your-model.md)")
    return "\n".join(lines)
