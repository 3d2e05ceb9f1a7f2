"""gpudash's public workload API, version 1: measure *your* training step.

Write one Python file with a function that takes the batch size and the device and returns a
``Training``; run ``gpudash -w path/to/mine.py:workload`` (or ``-w package.module:workload``).
gpudash imports the file in its workload process, calls the function, moves the model to the
device and times ``optimizer.step()`` after ``loss_fn(model(inputs), targets).backward()`` on
the batches ``batch`` makes, with every statistic, chart and recording the reference families
get. The function is called again, for a new ``batch``, when the batch size changes; the model,
loss and optimizer of its first call are the ones trained all along.

```python
import torch
from torch import nn
from gpudash.api import Training

def workload(batch_size: int, device: torch.device) -> Training:
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                          nn.Flatten(), nn.Linear(16, 10))
    def batch(gen: torch.Generator):          # host tensors: (inputs, targets)
        return (torch.randn(batch_size, 3, 64, 64, generator=gen),
                torch.randint(0, 10, (batch_size,), generator=gen))
    return Training(model=model, loss_fn=nn.CrossEntropyLoss(),
                    optimizer=torch.optim.SGD(model.parameters(), lr=0.01), batch=batch)
```

A workload file is code: gpudash runs it with your permissions (``gpudash serve`` never lets a
browser name one). docs/your-model.md says what each knob needs and how to read the result.
This module imports neither torch nor Textual.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the types only: importing this module costs no torch
    import torch

API_VERSION = 1


@dataclass
class Training:
    """What gpudash trains, step after step.

    - ``model``: the module trained (gpudash moves it to the device and puts it in train mode);
    - ``loss_fn``: ``loss_fn(model(inputs), targets)`` gives a scalar tensor;
    - ``optimizer``: over the model's parameters;
    - ``batch``: ``batch(generator)`` gives one host batch, ``(inputs, targets)``, each a tensor
      whose first dimension is the batch size. gpudash draws a few batches from a seeded
      generator before timing and cycles through them, so the data costs nothing per step;
    - ``frozen`` (optional): a first stage that is not trained, run under ``torch.no_grad()``
      on the inputs before ``model`` (a pretrained trunk feeding a trained head). With it the
      ``pipelined`` variant runs it on batch n+1 on its own CUDA stream while ``model`` trains
      on batch n; ``serial`` runs one after the other.
    """

    model: torch.nn.Module
    loss_fn: Callable[[Any, Any], torch.Tensor]
    optimizer: torch.optim.Optimizer
    batch: Callable[[torch.Generator], tuple[torch.Tensor, torch.Tensor]]
    frozen: torch.nn.Module | None = None


__all__ = ["API_VERSION", "Training"]
