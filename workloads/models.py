"""The small CNNs of docs/workloads.md, sized by image size (a power of two)."""

from __future__ import annotations

from math import log2

import torch.nn as nn

NUM_CLASSES = 10
BASE_CHANNELS = 16


def halvings(image_size: int) -> int:
    """How many stride-2 stages take ``image_size`` down to 1 (8 for 256)."""
    return int(log2(image_size))


def feature_channels(image_size: int) -> int:
    """Channels of the 1x1 feature map the encoder ends with (4096 for 256)."""
    return BASE_CHANNELS * 2 ** halvings(image_size)


def encoder(image_size: int) -> nn.Sequential:
    """Conv 1x1 to 16 channels, then stride-2 convs doubling channels down to 1x1 (A, B)."""
    layers: list[nn.Module] = [nn.Conv2d(3, BASE_CHANNELS, kernel_size=1), nn.ReLU(inplace=True)]
    c = BASE_CHANNELS
    n = halvings(image_size)
    for i in range(n):
        layers.append(nn.Conv2d(c, 2 * c, kernel_size=2, stride=2))
        if i < n - 1:
            layers.append(nn.ReLU(inplace=True))
        c *= 2
    return nn.Sequential(*layers)


def decoder(image_size: int, num_classes: int = NUM_CLASSES) -> nn.Sequential:
    """Transposed convs halving channels back to 16 at full size, then per-pixel logits (A)."""
    layers: list[nn.Module] = []
    c = feature_channels(image_size)
    for _ in range(halvings(image_size)):
        layers += [nn.ConvTranspose2d(c, c // 2, kernel_size=2, stride=2), nn.ReLU(inplace=True)]
        c //= 2
    layers.append(nn.Conv2d(c, num_classes, kernel_size=3, padding=1))
    return nn.Sequential(*layers)


def classifier(image_size: int, num_classes: int = NUM_CLASSES) -> nn.Sequential:
    """The encoder's conv stack, flattened into a linear classifier (B)."""
    return nn.Sequential(*encoder(image_size), nn.Flatten(), nn.Linear(feature_channels(image_size), num_classes))


class PixelNet(nn.Sequential):
    """Per-pixel logits from 12 'same' 3x3 convs of 10 channels (C)."""

    def __init__(self, num_hidden: int = 10, num_classes: int = NUM_CLASSES) -> None:
        layers: list[nn.Module] = [nn.Conv2d(3, 10, 3, padding="same"), nn.ReLU()]
        for _ in range(num_hidden):
            layers += [nn.Conv2d(10, 10, 3, padding="same"), nn.ReLU()]
        layers.append(nn.Conv2d(10, num_classes, 3, padding="same"))
        super().__init__(*layers)


class PoolNet(nn.Sequential):
    """3x3 convs of 30 channels with a 2x max-pool per stage down to 1x1, then 10 logits (D)."""

    def __init__(self, image_size: int, hidden: int = 30, num_classes: int = NUM_CLASSES) -> None:
        layers: list[nn.Module] = [nn.Conv2d(3, hidden, 3, padding="same"), nn.ReLU()]
        for _ in range(halvings(image_size)):
            layers += [nn.Conv2d(hidden, hidden, 3, padding="same"), nn.ReLU(), nn.MaxPool2d(2)]
        layers += [nn.Conv2d(hidden, num_classes, 3, padding="same"), nn.Flatten()]
        super().__init__(*layers)
