"""A user's GAN, as such scripts go: a generator and a discriminator, each with its own Adam, both
stepped every iteration on one DataLoader batch (the discriminator first). It counts its own memory
across both models and both optimizers and prints, on its last line, ``JOB memory params=P
grads=G optimizer=O`` (bytes).

``python gan_memory.py --steps 40 [--batch 32]``
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import torch
from torch.utils.data import DataLoader, TensorDataset


def tensor_bytes(tensors: Sequence[torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--batch", type=int, default=32)
    args = parser.parse_args()
    torch.manual_seed(0)
    generator = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 32))
    discriminator = torch.nn.Sequential(torch.nn.Linear(32, 128), torch.nn.ReLU(), torch.nn.Linear(128, 1))
    opt_g = torch.optim.Adam(generator.parameters(), lr=2e-4)
    opt_d = torch.optim.Adam(discriminator.parameters(), lr=2e-4)
    loader = DataLoader(TensorDataset(torch.randn(4096, 32)), batch_size=args.batch, shuffle=True, drop_last=True)
    bce = torch.nn.BCEWithLogitsLoss()
    step = 0
    while step < args.steps:
        for (real,) in loader:
            ones, zeros = torch.ones(real.size(0), 1), torch.zeros(real.size(0), 1)
            fake = generator(torch.randn(real.size(0), 16))
            d_loss = bce(discriminator(real), ones) + bce(discriminator(fake.detach()), zeros)
            opt_d.zero_grad()
            d_loss.backward()
            opt_d.step()
            g_loss = bce(discriminator(fake), ones)
            opt_g.zero_grad()
            g_loss.backward()
            opt_g.step()
            step += 1
            if step >= args.steps:
                break
    params = [p for m in (generator, discriminator) for p in m.parameters()]
    grads = [p.grad for p in params if p.grad is not None]
    state = [v for o in (opt_g, opt_d) for s in o.state.values() for v in s.values() if torch.is_tensor(v)]
    print(f"JOB memory params={tensor_bytes(params)} grads={tensor_bytes(grads)} optimizer={tensor_bytes(state)}")


if __name__ == "__main__":
    main()
