"""A user's Hugging Face Trainer script: a tiny GPT-2 built from a config (nothing downloaded),
random token ids, on the CPU."""

from __future__ import annotations

import sys
import tempfile

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments


class RandomTokens(torch.utils.data.Dataset):
    def __init__(self, n: int, length: int) -> None:
        self.ids = torch.randint(0, 128, (n, length))

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def main() -> int:
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 12
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=128, n_positions=32, n_embd=32, n_layer=1, n_head=2))
    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(
            output_dir=out,
            max_steps=steps,
            per_device_train_batch_size=4,
            gradient_accumulation_steps=2,
            learning_rate=1e-3,
            report_to=[],
            save_strategy="no",
            logging_steps=5,
            use_cpu=True,
            dataloader_num_workers=0,
            disable_tqdm=False,
        )
        trainer = Trainer(model=model, args=args, train_dataset=RandomTokens(512, 16))
        result = trainer.train()
    print(f"JOB global_step={result.global_step}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
