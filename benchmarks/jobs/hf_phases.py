"""A user's Hugging Face ``Trainer`` script with evaluation and checkpoints: a GPT-2 built from a
config (nothing downloaded) on random token ids, ``eval_strategy="steps"`` and ``save_steps``. A
callback of its own times its optimizer steps — each step's end to the next, the evaluation and
the save after a step left out — and it prints them last:
``JOB steps=… train_s=… steps_per_s=…``. ``--tiny``: a model small enough for a CPU test."""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from typing import Any

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments


class RandomTokens(torch.utils.data.Dataset[dict[str, torch.Tensor]]):
    def __init__(self, n: int, length: int, vocab: int) -> None:
        self.ids = torch.randint(0, vocab, (n, length))

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


class StepClock(TrainerCallback):
    """The script's own training time: a step's time is the time between two step ends — on the
    GPU's clock, CUDA events recorded at each (host time on the CPU) — and a step after an
    evaluation or a save is left out."""

    def __init__(self, pace_s: float = 0.0) -> None:
        self.pace_s = pace_s  # seconds of extra work a step (a CPU test's steps long enough to time)
        self.ends: list[Any] = []  # each step's end: a CUDA event, or a host time
        self.skip: set[int] = set()  # the steps whose interval holds an evaluation or a save

    def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        time.sleep(self.pace_s)
        if torch.cuda.is_available() and not args.use_cpu:
            end = torch.cuda.Event(enable_timing=True)
            end.record()
            self.ends.append(end)
        else:
            self.ends.append(time.monotonic())

    def _skip(self) -> None:  # evaluation or a save after the step: the next interval is not a step's
        self.skip.add(len(self.ends) + 1)

    def on_evaluate(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        self._skip()

    def on_save(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        self._skip()

    def timed(self) -> tuple[int, float]:
        """(steps timed, their seconds): every step but the first and those after an evaluation or a save."""
        if self.ends and not isinstance(self.ends[0], float):
            torch.cuda.synchronize()
            seconds = [self.ends[i - 1].elapsed_time(self.ends[i]) / 1e3 for i in range(1, len(self.ends))]
        else:
            seconds = [self.ends[i] - self.ends[i - 1] for i in range(1, len(self.ends))]
        kept = [s for i, s in enumerate(seconds, start=2) if i not in self.skip]
        return len(kept), sum(kept)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=120)
    p.add_argument("--eval-steps", type=int, default=20)
    p.add_argument("--save-steps", type=int, default=40)
    p.add_argument("--tiny", action="store_true", help="a model and data small enough for the CPU")
    p.add_argument("--pace", type=float, default=0.0, help="seconds of extra work each step")
    a = p.parse_args()
    torch.manual_seed(0)
    cuda = torch.cuda.is_available() and not a.tiny
    layers, width, length, batch = (1, 32, 32, 4) if a.tiny else (6, 512, 256, 16)
    config = GPT2Config(vocab_size=1024, n_positions=length, n_embd=width, n_layer=layers, n_head=4)
    model = GPT2LMHeadModel(config)
    clock = StepClock(a.pace)
    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(
            output_dir=out,
            max_steps=a.steps,
            per_device_train_batch_size=batch,
            per_device_eval_batch_size=batch,
            learning_rate=1e-4,
            report_to=[],
            eval_strategy="steps",
            eval_steps=a.eval_steps,
            save_steps=a.save_steps,
            save_strategy="steps",
            logging_steps=10,
            use_cpu=not cuda,
            bf16=cuda,
            dataloader_num_workers=2,
            disable_tqdm=True,
        )
        train = RandomTokens(batch * a.steps, length, 1024)
        evaluation = RandomTokens(batch * (4 if a.tiny else 24), length, 1024)
        trainer = Trainer(model=model, args=args, train_dataset=train, eval_dataset=evaluation, callbacks=[clock])
        trainer.train()
    steps, train_s = clock.timed()
    rate = steps / train_s if train_s else 0.0
    print(f"JOB steps={len(clock.ends)} train_s={train_s:.4f} steps_per_s={rate:.4f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
