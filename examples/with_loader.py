"""Your own input pipeline, measured with the step: a Dataset, a collate function and a DataLoader.

gpudash -w examples/with_loader.py:train                   # the dashboard: batch 128 on a GPU
gpudash record out.csv -w examples/with_loader.py:train --duration 10   # batch 16 on the CPU

Each sample is made on the CPU by the loader's workers (a seeded noise image whose brightness is
its class), so the step's throughput includes the input pipeline, as in a real training job.
``@workload`` names it and gives its default batch sizes; gpudash reads them without running the file.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from gpudash.api import Training, workload


class Brightness(Dataset):
    """Ten classes of 64-pixel noise images, the class setting the brightness."""

    def __init__(self, samples: int = 4096, side: int = 64) -> None:
        self.samples, self.side = samples, side

    def __len__(self) -> int:
        return self.samples

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        label = i % 10
        noise = torch.rand(3, self.side, self.side, generator=torch.Generator().manual_seed(i))
        return noise * (label + 1) / 10, label


def collate(samples: list[tuple[torch.Tensor, int]]) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.stack([image for image, _ in samples]), torch.tensor([label for _, label in samples])


@workload(name="tiny CNN with its own loader", batch_size=128, cpu_batch_size=16)
def train(batch_size: int, device: torch.device) -> Training:
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10)
    )
    loader = DataLoader(
        Brightness(),
        batch_size=batch_size,
        shuffle=True,
        num_workers=2,
        collate_fn=collate,
        drop_last=True,  # every batch of batch_size samples: gpudash checks it
        pin_memory=device.type == "cuda",
        persistent_workers=True,
    )
    return Training(
        model=model,
        loss_fn=nn.CrossEntropyLoss(),
        optimizer=torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9),
        loader=loader,
    )
