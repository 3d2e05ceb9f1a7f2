"""gpudash's MFU of a GPT-2-style causal LM against the analytic count: 6·N·tokens plus attention.

Runs ``gpudash record CSV -w benchmarks/jobs/gpt2_workload.py:workload`` (GPT-2 small, bf16,
sequence 1024, as a user's workload file) and reads back what gpudash measured: its FLOPs a step
(counted once with torch's FLOP formulas on an eager step), its TFLOP/s and MFU over the GPU's dense
bf16 peak. The analytic count is the one the PaLM paper and nanoGPT use: per token, 6·N (N: the
parameters without the position embedding; the tied output layer counts through the token
embedding) plus 12·L·d·T for attention (L layers, width d, sequence T; causal masking not
discounted), times the tokens a step. The goal: gpudash's MFU within 10% of the analytic one at the
measured tokens/s. ``tiny``: a two-layer model on the CPU, with a peak of 1 TFLOP/s given."""

from __future__ import annotations

import os
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.cases.shared.gpudash_outputs import rows, run_gpudash
from benchmarks.harness.case import Unavailable
from benchmarks.harness.context import Run
from benchmarks.harness.params import param
from benchmarks.harness.result import Figure
from benchmarks.harness.stamp import ROOT

WORKLOAD = ROOT / "benchmarks" / "jobs" / "gpt2_workload.py"
TARGET_PCT = 10.0


@dataclass(frozen=True)
class Params:
    batch: int = param(8, "sequences a step")
    steps: int = param(300, "steps recorded")
    tiny: bool = param(False, "a two-layer model on the CPU, with a peak of 1 TFLOP/s given")


def record(csv_path: Path, p: Params) -> None:
    """``gpudash record`` of the workload (bf16 on CUDA; a peak given on the CPU)."""
    argv = ["record", str(csv_path), "-w", f"{WORKLOAD}:workload", "-b", str(p.batch), "--steps", str(p.steps), "-q"]
    argv += ["--device", "cpu", "--peak-tflops", "1"] if p.tiny else ["--knob", "amp=bf16"]
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    env.update({"MFU_CHECK_TINY": "1"} if p.tiny else {})
    run_gpudash(*argv, env=env)


def measured(csv_path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The "flops" event's row and the sample rows after the first quarter (warm-up)."""
    recorded = rows(csv_path, ("event", "sample"))
    event = next(r for r in recorded if r["row_kind"] == "event" and r["event_what"] == "flops")
    samples = [r for r in recorded if r["row_kind"] == "sample" and r["mfu_pct"] is not None and r["steps_per_s"] > 0]
    return event, samples[len(samples) // 4 :]


def pct(ours: float, theirs: float) -> str:
    return f"{100 * (ours / theirs - 1):+.2f}%"


def table(run: Run, p: Params, event: dict[str, Any], samples: list[dict[str, Any]]) -> None:
    """gpudash's figures against the analytic count, and the goal."""
    import torch

    from benchmarks.jobs import gpt2_workload as gpt

    shape = gpt.TINY if p.tiny else gpt.GPT2_SMALL
    with torch.device("meta"):
        per_token = gpt.analytic_flops_per_token(gpt.Gpt(**shape), shape)
    counted = float(samples[0]["flops_per_step"])
    tokens_s = statistics.fmean(float(s["samples_per_s"]) for s in samples) * shape["seq"]
    ours_tflops = statistics.fmean(float(s["tflops"]) for s in samples)
    ours_mfu = statistics.fmean(float(s["mfu_pct"]) for s in samples)
    peak = 100 * ours_tflops / ours_mfu
    analytic_tflops = per_token * tokens_s / 1e12
    analytic_mfu = 100 * analytic_tflops / peak
    off = 100 * (ours_mfu / analytic_mfu - 1)
    met = "met" if abs(off) <= TARGET_PCT else "not met"
    step = per_token * p.batch * shape["seq"]
    t = run.table(["figure", "gpudash", "analytic (6N + 12·L·d·T)", "difference"], ["---", "--:", "--:", "--:"])
    run.row(t, "FLOPs a step", f"{counted:.4g}", f"{step:.4g}", pct(counted, step))
    run.row(
        t,
        f"TFLOP/s at {tokens_s:.0f} tokens/s",
        f"{ours_tflops:.3g}",
        f"{analytic_tflops:.3g}",
        pct(ours_tflops, analytic_tflops),
    )
    said = f"{off:+.2f}% (target within ±{TARGET_PCT:g}%: {met})"
    run.row(t, f"MFU over {peak:g} TFLOP/s", f"{ours_mfu:.3g}%", f"{analytic_mfu:.3g}%", said)
    run.keep(
        "MFU off the analytic",
        Figure("value", f"MFU off the analytic: {said}", off, unit="%", target=f"within ±{TARGET_PCT:g}%", met=met),
    )
    run.line()
    run.line(f"gpudash's count: {event['event_message']}")


def measure(run: Run, p: Params) -> None:
    import torch

    if not p.tiny and not torch.cuda.is_available():
        raise Unavailable("needs CUDA (-p tiny=true runs a two-layer model on the CPU)")
    run.device = "cpu" if p.tiny else "cuda"
    from benchmarks.jobs import gpt2_workload as gpt

    shape = gpt.TINY if p.tiny else gpt.GPT2_SMALL
    run.comment(
        f"MFU check: {shape}, batch {p.batch}, {p.steps} steps"
        + (" (CPU, peak 1 TFLOP/s given)" if p.tiny else ", bf16")
    )
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "run.csv"
        record(path, p)
        event, samples = measured(path)
    table(run, p, event, samples)
