"""C. Host-device syncs in a masked loss: sync-heavy vs fixed (docs/workloads.md C).

Both losses implement the same rules (from the source article):

- target value ``ignore_value`` (-1) is ignored;
- the ``background`` class (9) is treated as ignored too;
- the loss is zeroed when the target, after background removal, holds fewer than 2 distinct
  values (the ignore value counts as one of them, as in the article's ``torch.unique``).

Edge case decided here, identically for both: when every pixel is ignored the mean over no
pixels would be NaN (and 0·NaN is still NaN); both return a real 0.0 whose gradient is 0.
Neither modifies the caller's target tensor.
"""

from __future__ import annotations

import torch
import torch.nn as nn
from torch import Tensor

from workloads import models
from workloads.base import Workload
from workloads.registry import FAMILIES
from workloads.train_step import train_step

IGNORE_VALUE = -1
BACKGROUND_CLASS = 9


class MaskedLossRules(nn.Module):
    """The rules both losses share: which value is ignored, which class is background."""

    def __init__(
        self,
        ignore_value: int = IGNORE_VALUE,
        background: int = BACKGROUND_CLASS,
        num_classes: int = models.NUM_CLASSES,
    ) -> None:
        super().__init__()
        self.ignore_value, self.background, self.num_classes = ignore_value, background, num_classes


class SyncHeavyLoss(MaskedLossRules):
    """The article's first version: nonzero, index assignment, unique, numel, boolean masks."""

    def __init__(self, *args: int, **kwargs: int) -> None:
        super().__init__(*args, **kwargs)
        self.loss = nn.CrossEntropyLoss()

    def forward(self, logits: Tensor, target: Tensor) -> Tensor:
        target = target.clone()  # the caller's target stays as it was
        inds = torch.nonzero(target == self.background, as_tuple=True)  # sync: output size
        target[inds] = self.ignore_value
        ignore_loss = torch.numel(torch.unique(target)) < 2  # sync: unique's size
        mask = target != self.ignore_value
        masked_target = target[mask]  # sync: boolean mask
        permuted = logits.permute(0, 2, 3, 1)
        masked_logits = permuted[mask.unsqueeze(-1).expand(-1, -1, -1, self.num_classes)]  # sync
        masked_logits = masked_logits.reshape(-1, self.num_classes)
        if ignore_loss:
            # Zero that stays in the graph; the sum over no pixels is 0 even when all are ignored.
            return masked_logits.sum() * 0.0
        return self.loss(masked_logits, masked_target)


class FixedLoss(MaskedLossRules):
    """The same loss without a host sync: where, sort + count_nonzero, ignore_index."""

    def __init__(self, *args: int, **kwargs: int) -> None:
        super().__init__(*args, **kwargs)
        self.loss = nn.CrossEntropyLoss(ignore_index=self.ignore_value)

    def forward(self, logits: Tensor, target: Tensor) -> Tensor:
        target = torch.where(target == self.background, self.ignore_value, target)
        ordered = torch.sort(target.flatten()).values
        distinct = torch.count_nonzero(ordered[1:] != ordered[:-1]) + 1
        loss = self.loss(logits, target)
        # where() picks a real 0 even when loss is NaN (all ignored); its gradient there is 0.
        return torch.where(distinct < 2, torch.zeros_like(loss), loss)


class SyncLossWorkload(Workload):
    info = FAMILIES["sync_loss"]

    def _build_model(self) -> None:
        self.model = models.PixelNet().to(self.device).train()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=1e-3, momentum=0.9)
        self.losses = {v.name: FixedLoss() if v.sync_free else SyncHeavyLoss() for v in self.info.variants}

    def _configure(self) -> None:
        n, size = self.batch_size, self.image_size

        def make_batch(gen: torch.Generator) -> tuple[Tensor, ...]:
            images = torch.randn((n, 3, size, size), generator=gen)
            labels = torch.randint(-1, models.NUM_CLASSES, (n, size, size), dtype=torch.int8, generator=gen)
            return images, labels

        self.pool = self.host_pool(make_batch)
        self.criterion = self.losses[self.variant]

    def trained_parameters(self) -> list[nn.Parameter]:
        return list(self.model.parameters())

    def _draw_input(self) -> tuple[Tensor, ...]:
        assert self.pool is not None  # built by _configure
        return self.pool.next()

    def train(self, images: Tensor, labels: Tensor) -> Tensor:
        """Copy a host batch to the device and take one training step on it."""
        images, labels = self.to_device((images, labels))
        return train_step(self.model, self.criterion, self.optimizer, images, labels.long(), self._autocast)

    def _stages(self):  # noqa: ANN202 - see Workload._stages
        return None, ("train", self.train)
