"""A. Frozen encoder, trained decoder: serial vs dual-stream pipelined (docs/workloads.md A)."""

from __future__ import annotations

import torch
import torch.nn as nn

from workloads import models
from workloads.base import Workload
from workloads.data import random_images_u8
from workloads.registry import FAMILIES
from workloads.streams import TwoStagePipeline
from workloads.train_step import train_step


class EncDecWorkload(Workload):
    info = FAMILIES["encdec"]
    knob_modules = ("encoder", "decoder")
    trained_module = "decoder"

    def _build_model(self) -> None:
        self.encoder = models.encoder(self.image_size).to(self.device).requires_grad_(False).eval()
        self.decoder = models.decoder(self.image_size).to(self.device).train()
        self.criterion = nn.CrossEntropyLoss()
        self.optimizer = torch.optim.SGD(self.decoder.parameters(), lr=1e-3)

    def _configure(self) -> None:
        n, size = self.batch_size, self.image_size

        def make_batch(gen: torch.Generator) -> tuple[torch.Tensor, ...]:
            labels = torch.randint(0, models.NUM_CLASSES, (n, size, size), dtype=torch.uint8, generator=gen)
            return random_images_u8(gen, n, size), labels

        self.pool = self.host_pool(make_batch)
        if self.variant_info.pipelined:
            self.pipeline = TwoStagePipeline(self.device, emulate=self.emulate_streams)

    def trained_parameters(self) -> list[nn.Parameter]:
        return list(self.decoder.parameters())

    def _draw_input(self) -> tuple[torch.Tensor, ...]:
        assert self.pool is not None  # built by _configure
        return self.pool.next()

    # -- the two stages ---------------------------------------------------------------
    def encode(self, images_u8: torch.Tensor, labels_u8: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Copy a host batch to the device and compute its frozen features."""
        images, labels = self.to_device((images_u8, labels_u8))
        with torch.no_grad(), self.autocast():
            features = self.encoder(images.float().div_(255))
        return features, labels.long()

    def train_decoder(self, features: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return train_step(self.decoder, self.criterion, self.optimizer, features, labels, self._autocast)

    def _stages(self):  # noqa: ANN202 - see Workload._stages
        return ("encode", self.encode), ("train", self.train_decoder)
