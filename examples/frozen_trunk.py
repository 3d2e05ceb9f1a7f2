"""A frozen trunk feeding a trained head: your own network's partial training, serial or pipelined.

gpudash -w examples/frozen_trunk.py:workload            # p: the trunk on batch n+1 on its own
                                                         # CUDA stream while the head trains on n
"""

import torch
from torch import nn

from gpudash.api import Training


def workload(batch_size: int, device: torch.device) -> Training:
    trunk = nn.Sequential(  # not trained: run under no_grad, before the model
        nn.Conv2d(3, 32, 3, stride=2, padding=1), nn.ReLU(), nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ReLU()
    )
    head = nn.Sequential(
        nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10)
    )

    def batch(gen: torch.Generator):
        return torch.randn(batch_size, 3, 64, 64, generator=gen), torch.randint(0, 10, (batch_size,), generator=gen)

    return Training(
        model=head,
        loss_fn=nn.CrossEntropyLoss(),
        optimizer=torch.optim.SGD(head.parameters(), lr=0.01, momentum=0.9),
        batch=batch,
        frozen=trunk,
    )
