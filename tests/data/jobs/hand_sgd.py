"""A user's training loop with no ``torch.optim``, as pytorch/examples' word_language_model and
regression write it: ``model.zero_grad()``, a forward, ``loss.backward()``, gradient clipping, and
the parameters updated by hand (``p.data.add_(p.grad, alpha=-lr)``, or with ``--no-grad`` under
``torch.no_grad()``). With ``--test-pass``, after the last step: a validation pass, the model saved,
loaded back, and tested, as word_language_model does (its seconds said). With ``--optimizer`` it
steps ``torch.optim.SGD`` instead of updating by hand. With ``--interrupt-at N``, the job sends
itself SIGINT inside step N's ``backward()`` (a user's Ctrl-C). With ``--accumulate K``, K
micro-batches' backward passes a step (gradient accumulation by hand); with ``--no-update``, no
update at all (backward passes only: no training); with ``--track PATH``, each iteration marked by
``gpudash.track(PATH)``'s ``step()``. Its last line: its own count and rate of training iterations."""

from __future__ import annotations

import argparse
import os
import signal
import tempfile
import time

import torch
from torch import nn


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--no-grad", action="store_true", help="update under torch.no_grad() (p.sub_(lr * p.grad))")
    p.add_argument("--test-pass", action="store_true", help="validate, save, reload and test after training")
    p.add_argument("--test-batches", type=int, default=400, help="batches of each pass after training")
    p.add_argument("--interrupt-at", type=int, default=0, help="SIGINT to itself inside this step's backward")
    p.add_argument("--optimizer", action="store_true", help="update with torch.optim.SGD instead of by hand")
    p.add_argument("--accumulate", type=int, default=1, help="micro-batches (backward passes) a step")
    p.add_argument("--no-update", action="store_true", help="backward passes, the parameters never updated")
    p.add_argument("--track", default="", help="mark each iteration with gpudash.track(PATH).step()")
    return p.parse_args()


class Interrupting(torch.autograd.Function):
    """Identity forward; its backward sends SIGINT to this process (inside ``loss.backward()``)."""

    @staticmethod
    def forward(ctx: object, x: torch.Tensor) -> torch.Tensor:
        return x.view_as(x)

    @staticmethod
    def backward(ctx: object, grad: torch.Tensor) -> torch.Tensor:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.5)  # the interrupt lands while backward still runs
        return grad


def evaluate(model: nn.Module, batches: int, batch: int) -> float:
    model.eval()
    total = 0.0
    with torch.no_grad():
        for _ in range(batches):
            x = torch.randn(batch, 64)
            total += float(nn.functional.mse_loss(model(x), x.sum(1, keepdim=True)))
    return total / batches


def main() -> None:
    args = parse()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, args.hidden), nn.Tanh(), nn.Linear(args.hidden, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr) if args.optimizer else None
    tracker = None
    if args.track:
        import gpudash

        tracker = gpudash.track(args.track, label="hand_sgd")
    start = time.perf_counter()
    for step in range(1, args.steps + 1):
        model.train()
        model.zero_grad()
        for _ in range(args.accumulate):
            x = torch.randn(args.batch, 64)
            out = model(x)
            if step == args.interrupt_at:
                out = Interrupting.apply(out)
            loss = nn.functional.mse_loss(out, x.sum(1, keepdim=True))
            loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        if tracker is not None:
            tracker.step(samples=args.batch * args.accumulate)
        if args.no_update:
            continue
        if optimizer is not None:
            optimizer.step()
        elif args.no_grad:
            with torch.no_grad():
                for p in model.parameters():
                    if p.grad is not None:
                        p.sub_(args.lr * p.grad)
        else:
            for p in model.parameters():
                if p.grad is not None:
                    p.data.add_(p.grad, alpha=-args.lr)
    took = time.perf_counter() - start
    if tracker is not None:
        tracker.close()
    if args.test_pass:
        began = time.perf_counter()
        print(f"valid loss {evaluate(model, args.test_batches, args.batch):.4f}", flush=True)
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "model.pt")
            torch.save(model.state_dict(), path)
            model.load_state_dict(torch.load(path))
        print(f"test loss {evaluate(model, args.test_batches, args.batch):.4f}", flush=True)
        print(f"test pass: {time.perf_counter() - began:.3f} s", flush=True)
    print(f"hand_sgd: {args.steps} steps in {took:.3f} s: {args.steps / took:.3f} steps/s", flush=True)


if __name__ == "__main__":
    main()
