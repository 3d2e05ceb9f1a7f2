"""A user's GPT-style causal language model trained with AdamW (written as such scripts are: manual
attention, tokens from a DataLoader), which prints its own peak of allocated memory on its last line:
``JOB memory peak_allocated=N steps=S``. The attention's softmax keeps ``batch × heads × seq²`` floats
a layer for backward: with a long sequence, the line that holds the most at the peak.

``python gpt_memory.py --steps 12 [--batch 8 --layers 4 --seq 1024 --dim 512 --heads 8] [--device cuda]``
"""

from __future__ import annotations

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Block(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.fc, self.out = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in self.qkv(self.ln1(x)).split(c, 2))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
        att = att.masked_fill(torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1), float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, c)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class Gpt(nn.Module):
    def __init__(self, vocab: int, dim: int, heads: int, layers: int, seq: int) -> None:
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, dim), nn.Embedding(seq, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(dim), nn.Linear(dim, vocab, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.tok(idx) + self.pos(torch.arange(idx.size(1), device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    torch.manual_seed(0)
    tokens = torch.randint(0, args.vocab, (args.batch * 8, args.seq + 1))
    loader = DataLoader(TensorDataset(tokens), batch_size=args.batch, shuffle=True, drop_last=True)
    model = Gpt(args.vocab, args.dim, args.heads, args.layers, args.seq).to(args.device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    step = 0
    while step < args.steps:
        for (chunk,) in loader:
            chunk = chunk.to(args.device)
            logits = model(chunk[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), chunk[:, 1:].reshape(-1))
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            step += 1
            if step >= args.steps:
                break
    peak = torch.cuda.max_memory_allocated() if args.device.startswith("cuda") else 0
    print(f"JOB memory peak_allocated={peak} steps={step} loss={loss.item():.4f}", flush=True)


if __name__ == "__main__":
    main()
