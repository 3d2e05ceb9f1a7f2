"""A user's GPT-2-style training script (written outside gpudash): tokens from a DataLoader,
AdamW, manual attention. Prints its own peak allocated memory at the end."""
import argparse, math, time
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h = h
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.out = nn.Linear(4 * d, d)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q = q.view(B, T, self.h, C // self.h).transpose(1, 2)
        k = k.view(B, T, self.h, C // self.h).transpose(1, 2)
        v = v.view(B, T, self.h, C // self.h).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        mask = torch.ones(T, T, device=x.device, dtype=torch.bool).tril()
        att = att.masked_fill(~mask, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.proj(y)
        x = x + self.out(F.gelu(self.fc(self.ln2(x))))
        return x


class GPT(nn.Module):
    def __init__(self, vocab, d, h, layers, T):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(T, d)
        self.blocks = nn.ModuleList([Block(d, h) for _ in range(layers)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        T = idx.size(1)
        x = self.tok(idx) + self.pos(torch.arange(T, device=idx.device))
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln(x))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--snapshot", default="")
    p.add_argument("--samples", type=int, default=0, help="the dataset's size (default: 20 batches)")
    a = p.parse_args()
    dev = "cuda"
    torch.manual_seed(0)
    vocab = 50304
    data = torch.randint(0, vocab, (a.samples or a.batch * 20, a.seq + 1))
    loader = DataLoader(TensorDataset(data), batch_size=a.batch, shuffle=True, drop_last=True, pin_memory=True)
    model = GPT(vocab, 768, 12, a.layers, a.seq).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    step = 0
    t0 = None
    while step < a.steps:
        for (chunk,) in loader:
            chunk = chunk.to(dev, non_blocking=True)
            x, y = chunk[:, :-1], chunk[:, 1:]
            if a.snapshot and step == 3:
                torch.cuda.memory._record_memory_history(max_entries=200000)
            logits = model(x)
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.reshape(-1))
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            if a.snapshot and step == 4:
                import pickle
                with open(a.snapshot, "wb") as f:
                    pickle.dump(torch.cuda.memory._snapshot(), f)
                torch.cuda.memory._record_memory_history(enabled=None)
            step += 1
            if step == 5:
                torch.cuda.synchronize(); t0 = time.perf_counter()
            if step >= a.steps:
                break
    torch.cuda.synchronize()
    rate = (step - 5) / (time.perf_counter() - t0) if t0 and step > 5 else 0.0
    print(f"JOB max_memory_allocated={torch.cuda.max_memory_allocated()} steps_per_s={rate:.2f} loss={loss.item():.4f}")


if __name__ == "__main__":
    main()
