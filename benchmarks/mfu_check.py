"""gpudash's MFU of a GPT-2-style causal LM against the analytic count: 6·N·tokens plus attention.

    python benchmarks/mfu_check.py            # GPT-2 small (124M), bf16, sequence 1024, batch 8 (needs CUDA)
    python benchmarks/mfu_check.py --tiny     # a two-layer model on the CPU, with a peak given

Runs ``gpudash record CSV -w benchmarks/mfu_check.py:workload`` (the model below, as a user's
workload file) and reads back what gpudash measured: its FLOPs a step (counted once with
torch's FLOP formulas on an eager step), its TFLOP/s and MFU over the GPU's dense bf16 peak. The analytic
count is the one the PaLM paper and nanoGPT use: per token, 6·N (N: the parameters without the
position embedding; the tied output layer counts through the token embedding) plus 12·L·d·T for
attention (L layers, width d, sequence T; causal masking not discounted), times the tokens a step
(batch × T). Prints both, per step and per second, and whether gpudash's MFU is within 10% of the
analytic one at the measured tokens/s (the target).
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

from gpudash.api import Training

ROOT = Path(__file__).resolve().parents[1]
GPT2_SMALL = {"vocab": 50304, "width": 768, "layers": 12, "heads": 12, "seq": 1024}
TINY = {"vocab": 512, "width": 64, "layers": 2, "heads": 4, "seq": 32}
SHAPE = TINY if os.environ.get("MFU_CHECK_TINY") else GPT2_SMALL
TARGET_PCT = 10.0


class Block(nn.Module):
    """Pre-norm attention and MLP, GPT-2's."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.up, self.down = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = (
            z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in self.qkv(self.ln1(x)).chunk(3, -1)
        )
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.down(F.gelu(self.up(self.ln2(x))))


class Gpt(nn.Module):
    """A GPT-2-style causal LM with the output layer tied to the token embedding."""

    def __init__(self, vocab: int, width: int, layers: int, heads: int, seq: int) -> None:
        super().__init__()
        self.tokens, self.positions = nn.Embedding(vocab, width), nn.Embedding(seq, width)
        self.blocks = nn.Sequential(*(Block(width, heads) for _ in range(layers)))
        self.ln = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.tokens.weight

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        return self.head(self.ln(self.blocks(self.tokens(idx) + self.positions(pos))))


def analytic_flops_per_token(model: Gpt, shape: dict[str, int]) -> float:
    """6·N + 12·L·d·T: N without the position embedding (PaLM's and nanoGPT's count)."""
    n = sum(p.numel() for p in model.parameters()) - model.positions.weight.numel()
    return 6 * n + 12 * shape["layers"] * shape["width"] * shape["seq"]


def workload(batch_size: int, device: torch.device) -> Training:
    """The model as a gpudash workload: random tokens, next-token cross-entropy, AdamW; bf16 on CUDA."""
    model = Gpt(**SHAPE)
    seq, vocab = SHAPE["seq"], SHAPE["vocab"]

    def batch(gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        tokens = torch.randint(0, vocab, (batch_size, seq + 1), generator=gen)
        return tokens[:, :-1], tokens[:, 1:]

    def loss_fn(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1))

    return Training(model=model, loss_fn=loss_fn, optimizer=torch.optim.AdamW(model.parameters(), lr=1e-4), batch=batch)


def record(csv_path: Path, batch: int, steps: int, tiny: bool) -> None:
    """``gpudash record`` of the workload above (bf16 on CUDA; a peak given on the CPU)."""
    argv = [sys.executable, "-m", "gpudash", "record", str(csv_path), "-w", f"{__file__}:workload", "-b", str(batch)]
    argv += ["--steps", str(steps), "-q"]
    argv += ["--device", "cpu", "--peak-tflops", "1"] if tiny else ["--knob", "amp=bf16"]
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    env.update({"MFU_CHECK_TINY": "1"} if tiny else {})
    subprocess.run(argv, check=True, env=env, cwd=ROOT)


def measured(csv_path: Path) -> tuple[dict[str, str], list[dict[str, str]]]:
    """The "flops" event's details row and the sample rows after the first quarter (warm-up)."""
    with open(csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    event = next(r for r in rows if r["row_kind"] == "event" and r["event_what"] == "flops")
    samples = [r for r in rows if r["row_kind"] == "sample" and r["mfu_pct"] and float(r["steps_per_s"]) > 0]
    return event, samples[len(samples) // 4 :]


def table(args: argparse.Namespace, event: dict[str, str], samples: list[dict[str, str]]) -> list[str]:
    """The comparison, as Markdown rows."""
    model = Gpt(**SHAPE)
    per_token = analytic_flops_per_token(model, SHAPE)
    tokens_per_step = args.batch * SHAPE["seq"]
    counted = float(samples[0]["flops_per_step"])
    tokens_s = statistics.fmean(float(s["samples_per_s"]) for s in samples) * SHAPE["seq"]
    ours_tflops = statistics.fmean(float(s["tflops"]) for s in samples)
    ours_mfu = statistics.fmean(float(s["mfu_pct"]) for s in samples)
    peak = 100 * ours_tflops / ours_mfu
    analytic_tflops = per_token * tokens_s / 1e12
    analytic_mfu = 100 * analytic_tflops / peak
    off = 100 * (ours_mfu / analytic_mfu - 1)
    verdict = "met" if abs(off) <= TARGET_PCT else "NOT met"
    analytic_step = per_token * tokens_per_step
    return [
        "| figure | gpudash | analytic (6N + 12·L·d·T) | difference |",
        "|---|--:|--:|--:|",
        f"| FLOPs a step | {counted:.4g} | {analytic_step:.4g} | {_pct(counted, analytic_step)} |",
        f"| TFLOP/s at {tokens_s:.0f} tokens/s | {ours_tflops:.3g} | {analytic_tflops:.3g} | "
        f"{_pct(ours_tflops, analytic_tflops)} |",
        f"| MFU over {peak:g} TFLOP/s | {ours_mfu:.3g}% | {analytic_mfu:.3g}% | {off:+.2f}% "
        f"(target within ±{TARGET_PCT:g}%: {verdict}) |",
        "",
        f"gpudash's count: {event['event_message']}",
    ]


def _pct(ours: float, theirs: float) -> str:
    return f"{100 * (ours / theirs - 1):+.2f}%"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--tiny", action="store_true", help="a two-layer model on the CPU, with --peak-tflops 1")
    args = p.parse_args()
    if args.tiny:
        global SHAPE
        SHAPE = TINY
        args.batch, args.steps = 2, 40
    elif not torch.cuda.is_available():
        raise SystemExit("mfu_check.py needs CUDA (or --tiny)")
    device = torch.cuda.get_device_name() if torch.cuda.is_available() and not args.tiny else "cpu"
    print(
        f"# MFU check on {device}; torch {torch.__version__}, python {platform.python_version()}, "
        f"{dt.datetime.now(dt.timezone.utc).isoformat(timespec='seconds')}"
    )
    print(
        f"# {SHAPE}, batch {args.batch}, {args.steps} steps"
        + (" (CPU, peak 1 TFLOP/s given)" if args.tiny else ", bf16")
    )
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "run.csv"
        record(path, args.batch, args.steps, args.tiny)
        event, samples = measured(path)
    print("\n".join(table(args, event, samples)))


if __name__ == "__main__":
    main()
