"""gpudash's public workload API, version 1: measure *your* training step.

Write one Python file with a function that takes the batch size and the device and returns a
``Training``; run ``gpudash -w path/to/mine.py:workload`` (or ``-w package.module:workload``, or
the name of an entry point in the group ``gpudash.workloads``, which ``gpudash list`` shows).
gpudash imports the file in its workload process, calls the function, moves the model to the
device and times ``optimizer.step()`` after ``loss_fn(model(inputs), targets).backward()`` on
the batches ``batch`` (or ``loader``) gives, with every statistic, chart and recording the
reference families get. The function is called again, for new batches, when the batch size
changes; the model, loss and optimizer of its first call are the ones trained all along.
Everything here: ``Training``, the optional ``@workload(...)`` and ``API_VERSION``.

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

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:  # the types only: importing this module costs no torch
    import torch

API_VERSION = 1

F = TypeVar("F", bound=Callable[..., "Training"])


@dataclass
class Training:
    """What gpudash trains, step after step.

    - ``model``: the module trained (gpudash moves it to the device and puts it in train mode);
    - ``loss_fn``: ``loss_fn(model(inputs), targets)`` gives a scalar tensor;
    - ``optimizer``: over the model's parameters;
    - ``batch``: ``batch(generator)`` gives one host batch, ``(inputs, targets)``, each a tensor
      whose first dimension is the batch size. gpudash draws a few batches from a seeded
      generator before timing and cycles through them, so the data costs nothing per step;
    - ``loader`` (instead of ``batch``): your input pipeline, measured with the step: any
      iterable of ``(inputs, targets)`` batches, typically a ``torch.utils.data.DataLoader``
      (a dataset and a collate: ``DataLoader(dataset, batch_size, collate_fn=..., drop_last=True)``).
      gpudash takes the next batch each step and starts a new pass when one ends; every batch
      must hold ``batch_size`` samples (``drop_last=True``);
    - ``frozen`` (optional): a first stage that is not trained, run under ``torch.no_grad()``
      on the inputs before ``model`` (a pretrained trunk feeding a trained head). With it the
      ``pipelined`` variant runs it on batch n+1 on its own CUDA stream while ``model`` trains
      on batch n; ``serial`` runs one after the other.
    """

    model: torch.nn.Module
    loss_fn: Callable[[Any, Any], torch.Tensor]
    optimizer: torch.optim.Optimizer
    batch: Callable[[torch.Generator], tuple[torch.Tensor, torch.Tensor]] | None = None
    loader: Iterable[tuple[torch.Tensor, torch.Tensor]] | None = None
    frozen: torch.nn.Module | None = None


def workload(
    *, name: str | None = None, batch_size: int | None = None, cpu_batch_size: int | None = None
) -> Callable[[F], F]:
    """Optional, on your function: the name gpudash shows and its default batch sizes (on a GPU;
    on the CPU). gpudash reads these from the file's text before it runs the file (its window
    opens before torch is imported), so write them as plain literals::

        @workload(name="tiny-cnn", batch_size=256, cpu_batch_size=16)
        def train(batch_size: int, device: torch.device) -> Training: ...
    """
    for label, value in (("batch_size", batch_size), ("cpu_batch_size", cpu_batch_size)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValueError(f"gpudash.api.workload: {label} must be a whole number of at least 1, got {value!r}")
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise ValueError(f"gpudash.api.workload: name must be a non-empty string, got {name!r}")

    def mark(fn: F) -> F:
        fn.gpudash_workload = {"name": name, "batch_size": batch_size, "cpu_batch_size": cpu_batch_size}  # type: ignore[attr-defined]
        return fn

    return mark


__all__ = ["API_VERSION", "Training", "workload"]
