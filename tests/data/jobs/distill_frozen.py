"""A user's distillation: a frozen teacher (``requires_grad_(False)``, in eval mode, called under
``no_grad``) and a student trained with Adam; the teacher's embedding is tied to its output layer
(one storage, two modules), and it holds a module the step never calls (a head for another task).
On its last line ``JOB memory frozen=F params=P`` (bytes): the teacher's parameters that the step
uses, each storage once, and the student's.

``python distill_frozen.py --steps 30 [--device cuda]``
"""

from __future__ import annotations

import argparse

import torch


class Teacher(torch.nn.Module):
    def __init__(self, vocab: int = 512, width: int = 256) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, width)
        self.body = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.GELU())
        self.out = torch.nn.Linear(width, vocab, bias=False)
        self.out.weight = self.embed.weight  # tied: one storage
        self.unused_head = torch.nn.Linear(width, 1000)  # never called in a step

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.out(self.body(self.embed(tokens)))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    teacher = Teacher().eval().requires_grad_(False).to(args.device)
    student = torch.nn.Sequential(torch.nn.Embedding(512, 64), torch.nn.Linear(64, 512)).to(args.device)
    opt = torch.optim.Adam(student.parameters(), lr=1e-3)
    for _ in range(args.steps):
        tokens = torch.randint(0, 512, (16, 32), device=args.device)
        with torch.no_grad():
            target = teacher(tokens).softmax(-1)
        loss = torch.nn.functional.cross_entropy(student(tokens).flatten(0, 1), target.flatten(0, 1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    used = [teacher.embed.weight, *teacher.body.parameters()]  # the tied output layer's weight is the embedding's
    frozen = sum(p.numel() * p.element_size() for p in used)
    params = sum(p.numel() * p.element_size() for p in student.parameters())
    print(f"JOB memory frozen={frozen} params={params}", flush=True)


if __name__ == "__main__":
    main()
