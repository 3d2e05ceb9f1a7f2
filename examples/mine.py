"""Your own model in gpudash: the example of docs/your-model.md, as CI runs it.

gpudash -w examples/mine.py:workload                       # the dashboard
gpudash record out.csv -w examples/mine.py:workload --duration 10
"""

import torch
from torch import nn

from gpudash.api import Training


def workload(batch_size: int, device: torch.device) -> Training:
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10)
    )

    def batch(gen: torch.Generator):  # host tensors: (inputs, targets)
        return torch.randn(batch_size, 3, 64, 64, generator=gen), torch.randint(0, 10, (batch_size,), generator=gen)

    return Training(
        model=model, loss_fn=nn.CrossEntropyLoss(), optimizer=torch.optim.SGD(model.parameters(), lr=0.01), batch=batch
    )
