"""A user's MLP trained with Adam, which counts its own memory by kind (issue 64's CPU check):
parameters, gradients and Adam's state from its tensors, and the activations autograd saves for
backward by hand — the first layer's input, each ReLU's output (the next layer's input too), the
output and the target the loss keeps: ``batch × (dim + 2 × hidden + 2)`` floats. On its last line:
``JOB memory params=P grads=G optimizer=O activations=A`` (bytes).

``--oom-at N``: its step N fails as a CUDA allocation too large for the GPU does (torch's
``OutOfMemoryError``, with the allocator's message), from the job's own line (the CPU has no
caching allocator to run out of). ``--thread``: it trains in a thread of its own (``trainer``),
which that error ends while the main thread goes on to exit 0.

``python memory_mlp.py --steps 40 [--batch 64 --dim 512 --hidden 1024] [--oom-at N] [--thread]``
"""

from __future__ import annotations

import argparse
import threading

import torch


def tensor_bytes(tensors: list[torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def widen(x: torch.Tensor) -> torch.Tensor:
    """Too large for the GPU: the allocator's error, as CUDA's caching allocator words it."""
    raise torch.OutOfMemoryError(
        "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which "
        "1.02 GiB is free. Of the allocated memory 76.1 GiB is allocated by PyTorch."
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--oom-at", type=int, default=0)
    parser.add_argument("--thread", action="store_true")
    args = parser.parse_args()
    if args.thread:
        trainer = threading.Thread(target=train, args=(args,), name="trainer")
        trainer.start()
        trainer.join()
    else:
        train(args)


def train(args: argparse.Namespace) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(args.dim, args.hidden),
        torch.nn.ReLU(),
        torch.nn.Linear(args.hidden, args.hidden),
        torch.nn.ReLU(),
        torch.nn.Linear(args.hidden, 1),
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(1, args.steps + 1):
        x, y = torch.randn(args.batch, args.dim), torch.randn(args.batch, 1)
        if step == args.oom_at:
            x = widen(x)
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    params = tensor_bytes(list(model.parameters()))
    grads = tensor_bytes([p.grad for p in model.parameters() if p.grad is not None])
    state = tensor_bytes([v for s in optimizer.state.values() for v in s.values() if torch.is_tensor(v)])
    activations = args.batch * (args.dim + 2 * args.hidden + 2) * 4
    print(f"JOB memory params={params} grads={grads} optimizer={state} activations={activations}", flush=True)


if __name__ == "__main__":
    main()
