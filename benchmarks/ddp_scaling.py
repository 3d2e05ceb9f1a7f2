"""Data-parallel scaling efficiency per family: N-rank samples/s ÷ (N × one-rank samples/s).

    python benchmarks/ddp_scaling.py [--nproc 2] [-w encdec -w resnet50] [-b 8 -b 32] \
        [--knob amp=bf16 --knob channels_last --knob ddp_torch_defaults] \
        [--repeats 3 --seconds 10 --warmup 3] [--device cuda] [--out DIR] [--variant resnet50=serial]

For each family it runs ``gpudash sweep`` twice, the same configurations with ``--nproc 1`` and
with ``--nproc N`` (the batch size is per rank, so both process the same batch per rank and
step), and prints a table. With the same per-rank batch, the efficiency is the N-rank steps/s
over the one-rank steps/s; its interval and verdict are ``gpudash.stats.comparison.compare`` over the
batch means each ``sweep.csv`` carries. ``--knob`` puts a knob on every configuration of both (the
DDP ones, ``ddp_*``, on the N-rank sweep alone). Targets: ≥ 0.95 for encdec at batch 32 per rank
and for ResNet-50 (``resnet50``, batch 128 per rank) with its best knobs.
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpudash.stats.comparison import Estimate, compare  # noqa: E402
from gpudash.stats.fmt import fmt_ratio  # noqa: E402
from gpudash.sweep.readback import summaries_from_csv  # noqa: E402

DEFAULT_FAMILIES = ("encdec", "sync_loss", "augment", "input_pipeline", "resnet50")
VARIANT = {
    "encdec": "serial",
    "sync_loss": "fixed",
    "augment": "gpu-vectorized",
    "input_pipeline": "gpu-transform",
    "resnet50": "pipelined",
}
TARGETS = {("encdec", 32): 0.95, ("resnet50", 128): 0.95}  # scaling efficiency to reach, family and batch per rank


def sweep(family: str, batches: list[int], nproc: int, args: argparse.Namespace, out: Path) -> dict[int, Estimate]:
    """Run one sweep; its summary rows' steps/s by batch size."""
    cmd = [
        sys.executable,
        "-m",
        "gpudash",
        "sweep",
        "-w",
        family,
        "-v",
        args.variants.get(family, VARIANT[family]),
        "-b",
        ",".join(map(str, batches)),
        "--repeats",
        str(args.repeats),
        "--seconds",
        str(args.seconds),
        "--warmup",
        str(args.warmup),
        "--device",
        args.device,
        "--nproc",
        str(nproc),
        *[a for knob in args.knob or [] if nproc > 1 or not knob.startswith("ddp_") for a in ("--knob", knob)],
        "--out",
        str(out),
        "-q",
    ]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {done.stderr.strip().splitlines()[-1:]}")
    return {
        s.config.batch_size: rate
        for _, summaries in summaries_from_csv(out / "sweep.csv")
        for s in summaries
        if (rate := s.stats["steps_per_s"]) is not None
    }


def machine(sweep_json: Path) -> str:
    """The device, driver, torch and CUDA versions a sweep recorded, in one line."""
    m = json.loads(sweep_json.read_text())
    names = m.get("gpu_names") or [m.get("device_name") or m.get("device")]
    return (
        f"{' + '.join(map(str, names))} · driver {m.get('driver')} · torch {m.get('torch_version')} "
        f"(CUDA {m.get('cuda_version')}) · {m.get('cpu_count')} CPUs"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("-w", "--workload", action="append")
    p.add_argument("-b", "--batch-size", type=int, action="append")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--warmup", type=float, default=3.0)
    p.add_argument("--device", default="cuda")
    p.add_argument("--knob", action="append", help="a knob on every configuration (repeatable; ddp_* on N ranks only)")
    p.add_argument("--out", type=Path, help="keep the sweeps here (default: a temporary directory)")
    p.add_argument("--variant", action="append", default=[], help="FAMILY=VARIANT instead of the family's default")
    args = p.parse_args()
    args.variants = dict(v.split("=", 1) for v in args.variant)
    batches = args.batch_size or [8, 32]
    out = args.out or Path(tempfile.mkdtemp(prefix="gpudash-ddp-"))
    header = (
        f"# DDP scaling, {args.nproc} ranks vs 1 — {datetime.date.today()}, {args.repeats} repeats × {args.seconds:g} s"
    )
    print(f"{header} (warm-up {args.warmup:g} s); sweeps in {out}", flush=True)
    print("`python benchmarks/ddp_scaling.py " + " ".join(sys.argv[1:]) + "`", flush=True)
    print(f"knobs: {', '.join(args.knob) if args.knob else 'none'}", flush=True)
    for i, family in enumerate(args.workload or DEFAULT_FAMILIES):
        one = sweep(family, batches, 1, args, out / f"{family}-nproc1")
        many = sweep(family, batches, args.nproc, args, out / f"{family}-nproc{args.nproc}")
        if i == 0:  # the machine once, then the table, a family's rows as soon as they are measured
            print(machine(out / f"{family}-nproc{args.nproc}" / "sweep.json") + "\n")
            print(
                "| family | variant | batch per rank | 1 rank steps/s | N ranks steps/s | N ranks samples/s | "
                "scaling efficiency | verdict |"
            )
            print("|---|---|---:|---:|---:|---:|---:|---|")
        for b in batches:
            c = compare(one[b], many[b])
            verdict = f"per-rank rate vs one rank: {c.verdict}"
            if (target := TARGETS.get((family, b))) is not None:
                met = c.low is not None and c.low >= target
                missed = c.high is not None and c.high < target
                verdict += f"; target ≥ {target}: " + ("met" if met else "**not met**" if missed else "not decided")
            variant = args.variants.get(family, VARIANT[family])
            print(
                f"| {family} | {variant} | {b} | {one[b].mean:.1f} | {many[b].mean:.1f} | "
                f"{many[b].mean * b * args.nproc:.0f} | {fmt_ratio(c)} | {verdict} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
