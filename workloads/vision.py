"""Real networks from torchvision, written against the public API (``gpudash.api``) as a user's file is.

Random initial weights and synthetic batches: nothing is downloaded. On a GPU the images are
224 pixels, torchvision's training size; on the CPU 64 (and ViT-B/16 keeps 2 of its 12 layers),
so a step there takes a fraction of a second.

- ``resnet50``: ResNet-50, SGD with momentum, cross-entropy over 1000 classes; each residual
  block's last BatchNorm starts at zero (``zero_init_residual``, the large-batch recipe of Goyal
  et al. that NVIDIA's reference training uses), so a block starts as the identity.
- ``vit_b_16``: ViT-B/16, AdamW (on a GPU fused, one kernel, and capturable, so ``cuda_graph`` can
  capture its step).
- ``finetune``: ResNet-50 with its stem and layers 1-3 frozen (``Training.frozen``) feeding a
  trained layer 4 and head: partial training of a real network, serial or pipelined.
"""

from __future__ import annotations

import torch
from torch import nn
from torchvision import models

from gpudash.api import Training

CLASSES = 1000


def image_size(device: torch.device) -> int:
    """The images' side: torchvision's training size on a GPU, small on the CPU."""
    return 224 if device.type == "cuda" else 64


def _images(batch_size: int, side: int):  # noqa: ANN202 - the API's batch function
    def batch(gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        return (
            torch.randn(batch_size, 3, side, side, generator=gen),
            torch.randint(0, CLASSES, (batch_size,), generator=gen),
        )

    return batch


def _sgd(params: object, batch_size: int, device: torch.device) -> torch.optim.Optimizer:
    """ResNet's SGD: momentum 0.9, weight decay 1e-4, learning rate 0.1 per 256 samples (linear
    scaling); on a GPU PyTorch's fused implementation (one kernel for every parameter)."""
    lr = 0.1 * batch_size / 256
    fused = device.type == "cuda"
    return torch.optim.SGD(params, lr=lr, momentum=0.9, weight_decay=1e-4, fused=fused)  # type: ignore[arg-type]  # an iterable of parameters


def resnet50(batch_size: int, device: torch.device) -> Training:
    """ResNet-50 image classification, the whole network trained."""
    model = models.resnet50(weights=None, num_classes=CLASSES, zero_init_residual=True)
    return Training(
        model,
        nn.CrossEntropyLoss(),
        _sgd(model.parameters(), batch_size, device),
        _images(batch_size, image_size(device)),
    )


def vit_b_16(batch_size: int, device: torch.device) -> Training:
    """ViT-B/16 image classification with AdamW (2 encoder layers on the CPU)."""
    side = image_size(device)
    if device.type == "cuda":
        model = models.vit_b_16(weights=None, num_classes=CLASSES)
    else:
        model = models.VisionTransformer(side, 16, num_layers=2, num_heads=12, hidden_dim=768, mlp_dim=3072)
    cuda = device.type == "cuda"
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=cuda, capturable=cuda)
    return Training(model, nn.CrossEntropyLoss(), optimizer, _images(batch_size, side))


def finetune(batch_size: int, device: torch.device) -> Training:
    """ResNet-50 fine-tuning: stem and layers 1-3 frozen, layer 4 and the classifier trained."""
    net = models.resnet50(weights=None, num_classes=CLASSES, zero_init_residual=True)
    trunk = nn.Sequential(net.conv1, net.bn1, net.relu, net.maxpool, net.layer1, net.layer2, net.layer3)
    head = nn.Sequential(net.layer4, net.avgpool, nn.Flatten(), net.fc)
    return Training(
        model=head,
        loss_fn=nn.CrossEntropyLoss(),
        optimizer=_sgd(head.parameters(), batch_size, device),
        batch=_images(batch_size, image_size(device)),
        frozen=trunk,
    )
