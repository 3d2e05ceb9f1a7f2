"""A GPT-2-style causal LM as a user's workload file (``gpudash record -w benchmarks/jobs/gpt2_workload.py:workload``),
the model ``mfu_check`` measures: GPT-2 small (124M, sequence 1024); with ``MFU_CHECK_TINY`` set, a
two-layer model a CPU runs in seconds."""

from __future__ import annotations

import os

import torch
from torch import nn
from torch.nn import functional as F

from gpudash.api import Training

GPT2_SMALL = {"vocab": 50304, "width": 768, "layers": 12, "heads": 12, "seq": 1024}
TINY = {"vocab": 512, "width": 64, "layers": 2, "heads": 4, "seq": 32}
SHAPE = TINY if os.environ.get("MFU_CHECK_TINY") else GPT2_SMALL


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
    """The model as a gpudash workload: random tokens, next-token cross-entropy, AdamW."""
    model = Gpt(**SHAPE)
    seq, vocab = SHAPE["seq"], SHAPE["vocab"]

    def batch(gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        tokens = torch.randint(0, vocab, (batch_size, seq + 1), generator=gen)
        return tokens[:, :-1], tokens[:, 1:]

    def loss_fn(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1))

    return Training(model=model, loss_fn=loss_fn, optimizer=torch.optim.AdamW(model.parameters(), lr=1e-4), batch=batch)
