"""Data-parallel scaling efficiency per family: N-rank samples/s ÷ (N × one-rank samples/s).

For each family it runs ``gpudash sweep`` twice, the same configurations with ``--nproc 1`` and
with ``--nproc N`` (the batch size is per rank, so both process the same batch per rank and step).
With the same per-rank batch, the efficiency is the N-rank steps/s over the one-rank steps/s; its
interval and verdict are gpudash's ``compare`` over the batch means each ``sweep.csv`` carries.
``knobs`` go on every configuration of both (the DDP ones, ``ddp_*``, on the N-rank sweep alone).
Each family runs its variant the registry names for it (``VARIANT_ROLE``) unless ``variants`` says
otherwise. Goals: ≥ 0.95 for encdec at batch 32 per rank and ResNet-50 at 128 per rank."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from benchmarks.cases.shared.gpudash_outputs import run_gpudash, sidecar
from benchmarks.harness.context import Run
from benchmarks.harness.params import param
from benchmarks.harness.stats import Target, estimates, ratio_text
from gpudash.stats.comparison import Estimate

DEFAULT_FAMILIES = ("encdec", "sync_loss", "augment", "input_pipeline", "resnet50")
# each family's variant, by its role in the registry (``FamilyInfo.variants_by_role``; "vectorized":
# the first variant with the batched augmentation chain on one stream)
VARIANT_ROLE = {
    "encdec": "default",
    "sync_loss": "sync_free",
    "augment": "vectorized",
    "input_pipeline": "GPU_COLOUR",
    "resnet50": "pair_pipelined",
}
TARGETS = {("encdec", 32): 0.95, ("resnet50", 128): 0.95}  # scaling efficiency to reach, family and batch per rank


@dataclass(frozen=True)
class Params:
    nproc: int = param(2, "ranks of the N-rank sweep")
    workloads: tuple[str, ...] = param(DEFAULT_FAMILIES, "the families")
    batches: tuple[str, ...] = param(("8", "32"), "batch sizes per rank")
    repeats: int = param(3, "each sweep's repeats")
    seconds: float = param(10.0, "measured seconds a repeat")
    warmup: float = param(3.0, "warm-up seconds a repeat")
    device: str = param("cuda", "the device")
    knobs: tuple[str, ...] = param((), "knobs on every configuration (ddp_* on N ranks only)")
    out: str | None = param(None, "keep the sweeps here (default: a temporary folder)")
    variants: tuple[str, ...] = param((), "FAMILY=VARIANT instead of the family's own")


def variant_for(family: str, chosen: dict[str, str]) -> str:
    """The variant a family scales in: ``chosen``'s, else the one its role names (``VARIANT_ROLE``)."""
    from workloads.registry import FAMILIES

    if family in chosen:
        return chosen[family]
    info = FAMILIES[family]
    role = VARIANT_ROLE.get(family, "default")
    if role == "vectorized":
        return next(v.name for v in info.variants if v.vectorized and not v.pipelined)
    return info.variants_by_role()[role] or info.default_variant


def sweep(family: str, variant: str, nproc: int, p: Params, out: Path) -> dict[int, Estimate]:
    """Run one sweep; its summary rows' steps/s estimates by batch size."""
    from gpudash.sweep.readback import summaries_from_csv

    knobs = [a for knob in p.knobs if nproc > 1 or not knob.startswith("ddp_") for a in ("--knob", knob)]
    cmd = ["sweep", "-w", family, "-v", variant, "-b", ",".join(p.batches), "--repeats", str(p.repeats)]
    cmd += ["--seconds", str(p.seconds), "--warmup", str(p.warmup), "--device", p.device, "--nproc", str(nproc)]
    run_gpudash(*cmd, *knobs, "--out", str(out), "-q")
    return {
        s.config.batch_size: rate
        for _, summaries in summaries_from_csv(out / "sweep.csv")
        for s in summaries
        if (rate := s.stats["steps_per_s"]) is not None
    }


def machine(sweep_json: Path) -> str:
    """The device, driver, torch and CUDA versions a sweep recorded, in one line."""
    m = sidecar(sweep_json.with_suffix(".csv"))
    names = m.get("gpu_names") or [m.get("device_name") or m.get("device")]
    return (
        f"{' + '.join(map(str, names))} · driver {m.get('driver')} · torch {m.get('torch_version')} "
        f"(CUDA {m.get('cuda_version')}) · {m.get('cpu_count')} CPUs"
    )


def verdict(family: str, batch: int, verdict_text: str, low: float | None, high: float | None) -> str:
    said = f"per-rank rate vs one rank: {verdict_text}"
    target = TARGETS.get((family, batch))
    if target is None:
        return said
    judged = Target(target).judge(low, high)
    return said + f"; target ≥ {target}: " + {"met": "met", "not met": "**not met**"}.get(judged, "not decided")


def measure(run: Run, p: Params) -> None:
    chosen = dict(v.split("=", 1) for v in p.variants)
    out = Path(p.out) if p.out else Path(tempfile.mkdtemp(prefix="gpudash-ddp-"))
    timing = f"{p.repeats} repeats × {p.seconds:g} s (warm-up {p.warmup:g} s)"
    run.comment(f"DDP scaling, {p.nproc} ranks vs 1, {timing}; sweeps in {out}")
    run.data["knobs"] = ", ".join(p.knobs) if p.knobs else "none"
    run.line(f"knobs: {run.data['knobs']}")
    table = None
    for family in p.workloads:
        variant = variant_for(family, chosen)
        one = sweep(family, variant, 1, p, out / f"{family}-nproc1")
        many = sweep(family, variant, p.nproc, p, out / f"{family}-nproc{p.nproc}")
        if table is None:  # the machine once, then the table, a family's rows as soon as they are measured
            run.data["machine"] = machine(out / f"{family}-nproc{p.nproc}" / "sweep.json")
            run.line(run.data["machine"])
            run.line()
            cols = ["family", "variant", "batch per rank", "1 rank steps/s", "N ranks steps/s", "N ranks samples/s"]
            table = run.table([*cols, "scaling efficiency", "verdict"], ["---", "---", *["---:"] * 5, "---"])
        for b in (int(x) for x in p.batches):
            f = run.keep(f"{family} b{b}", estimates(f"{family} b{b}", one[b], many[b]))
            rate_1, rate_n = one[b].mean, many[b].mean
            said = verdict(family, b, str(f.verdict), f.low, f.high)
            run.row(
                table,
                family,
                variant,
                b,
                f"{rate_1:.1f}",
                f"{rate_n:.1f}",
                f"{rate_n * b * p.nproc:.0f}",
                ratio_text(f),
                said,
            )
