"""A user's GPT training script, shaped as a well-known one writes it: a decoder of causal attention
blocks, batches cut from a token tensor in the loop (no DataLoader), ``torch.compile`` (``--compile``),
bf16 autocast on a GPU, gradient accumulation (under torchrun: DDP, its all-reduce only on the last
micro-step through ``require_backward_grad_sync``), a loss read with ``.item()`` every
``--log-interval`` steps, and every ``--eval-interval`` steps an ``estimate_loss()`` whose
``--eval-iters`` batches each call ``.item()``, then ``torch.save`` of a checkpoint. Its last line
gives its own figures: ``JOB steps=… train_s=… eval_s=… steps_per_s=… params=… tokens_per_step=…
flops_per_step=…`` (``steps_per_s``: its steps from ``STEADY_FROM`` over their own seconds, the
evaluations and saves left out; the analytic count, 6N + 12·L·d·T a token, N the parameters less the
position embedding's).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import torch
from torch import nn
from torch.nn import functional as F

SHAPE = {"batch": 8, "block": 256, "layers": 4, "embd": 256, "heads": 4, "vocab": 4096}
LOOP = {"steps": 200, "grad-accum": 2, "log-interval": 10, "eval-interval": 50, "eval-iters": 20}
STEADY_FROM = 20  # its own steady rate: over the steps from this one (the first compiles, warms up)


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    for name, default in {**SHAPE, **LOOP}.items():
        p.add_argument(f"--{name}", type=int, default=default)
    p.add_argument("--compile", action="store_true")
    return p.parse_args()


class Block(nn.Module):
    """Pre-norm: causal self-attention (``scaled_dot_product_attention``), then an MLP 4× as wide."""

    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads, self.ln1, self.ln2 = heads, nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__()
        self.wte, self.wpe = nn.Embedding(args.vocab, args.embd), nn.Embedding(args.block, args.embd)
        self.blocks = nn.ModuleList(Block(args.embd, args.heads) for _ in range(args.layers))
        self.ln_f = nn.LayerNorm(args.embd)
        self.lm_head = nn.Linear(args.embd, args.vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # tied, as the script does

    def forward(
        self, idx: torch.Tensor, targets: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        loss = None if targets is None else F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss


def setup() -> tuple[bool, str, int | None]:
    """Under torchrun: its process group (NCCL on GPUs, else gloo) and this rank's device."""
    if int(os.environ.get("RANK", -1)) == -1:
        return False, "cuda" if torch.cuda.is_available() else "cpu", None
    torch.distributed.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    local = int(os.environ["LOCAL_RANK"])
    device = f"cuda:{local}" if torch.cuda.is_available() else "cpu"
    if device != "cpu":
        torch.cuda.set_device(device)
    return True, device, local


def built(args: argparse.Namespace, device: str, local: int | None) -> tuple[GPT, nn.Module]:
    """The model, and what the loop calls: compiled (``--compile``), then DDP under torchrun."""
    raw = GPT(args).to(device)
    model: nn.Module = raw
    if args.compile:
        model = torch.compile(model)  # type: ignore[assignment]
    if local is not None:
        model = nn.parallel.DistributedDataParallel(model, device_ids=[local] if device != "cpu" else None)
    return raw, model


def main() -> None:
    args = parse()
    ddp, device, local = setup()
    master = not ddp or torch.distributed.get_rank() == 0
    torch.manual_seed(1337)
    data = torch.randint(args.vocab, (200_000,))
    on_gpu = device.startswith("cuda")
    ctx = torch.autocast("cuda" if on_gpu else "cpu", dtype=torch.bfloat16, enabled=on_gpu)  # bf16 on a GPU

    def get_batch() -> tuple[torch.Tensor, torch.Tensor]:
        ix = torch.randint(len(data) - args.block - 1, (args.batch,))
        x = torch.stack([data[i : i + args.block] for i in ix])
        y = torch.stack([data[i + 1 : i + 1 + args.block] for i in ix])
        return x.to(device, non_blocking=True), y.to(device, non_blocking=True)

    raw, model = built(args, device, local if ddp else None)
    params = sum(p.numel() for p in raw.parameters()) - raw.wpe.weight.numel()
    optimizer = torch.optim.AdamW(raw.parameters(), lr=3e-4)

    @torch.no_grad()
    def estimate_loss() -> float:
        model.eval()
        losses = torch.zeros(args.eval_iters)
        for k in range(args.eval_iters):
            x, y = get_batch()
            with ctx:
                _, loss = model(x, y)
            losses[k] = loss.item()
        model.train()
        return float(losses.mean())

    checkpoint = os.path.join(tempfile.mkdtemp(), "ckpt.pt")
    x, y = get_batch()
    eval_s, took = 0.0, []  # the evaluations' and saves' seconds; each step's own
    for step in range(args.steps):
        began = time.perf_counter()
        if step % args.eval_interval == 0 and master:
            estimate_loss()
            torch.save({"model": raw.state_dict(), "optimizer": optimizer.state_dict(), "step": step}, checkpoint)
            eval_s += time.perf_counter() - began
            began = time.perf_counter()
        for micro in range(args.grad_accum):
            if ddp:
                model.require_backward_grad_sync = micro == args.grad_accum - 1
            with ctx:
                _, loss = model(x, y)
                loss = loss / args.grad_accum
            x, y = get_batch()
            loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if step % args.log_interval == 0 and master:
            print(f"step {step}: loss {loss.item() * args.grad_accum:.4f}", flush=True)
        took.append(time.perf_counter() - began)
    if master:
        said(args, params, took, eval_s)
    if ddp:
        torch.distributed.destroy_process_group()


def said(args: argparse.Namespace, params: int, took: list[float], eval_s: float) -> None:
    """The script's own last line: its steps, seconds (``took``: each step's), its steady rate and the
    analytic FLOPs of a step."""
    train_s, steady_s = sum(took), sum(took[STEADY_FROM:])
    steady = len(took[STEADY_FROM:]) / steady_s if steady_s > 0 else 0.0
    tokens = args.batch * args.block * args.grad_accum
    flops = (6 * params + 12 * args.layers * args.embd * args.block) * tokens
    print(
        f"JOB steps={args.steps} train_s={train_s:.4f} eval_s={eval_s:.4f} steps_per_s={steady:.3f} "
        f"params={params} tokens_per_step={tokens} flops_per_step={flops}",
        flush=True,
    )


if __name__ == "__main__":
    main()
