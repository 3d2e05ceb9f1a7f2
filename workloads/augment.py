"""B. CPU vs GPU vs pipelined GPU augmentation (docs/workloads.md B).

The chain, per sample: to float in [0, 1] → random crop to half size → resize back → random
rotation ±45° → Gaussian blur k=7 (random sigma) → normalize (mean 0, std 1).

- ``cpu``: torchvision v2 transforms per sample in DataLoader workers (the article's baseline).
- ``gpu``: the article's batch chain on the device — a crop with ``roi_align`` (with
  ``aligned=True``: the article's default ``aligned=False`` blends half-pixel-shifted samples
  instead of cropping) and a Python loop of per-image ``rotate`` calls, whose host-built
  matrices cost two host-device syncs per image. One blur sigma per batch, as torchvision
  draws one parameter set for a whole batch.
- ``gpu-vectorized``: every random parameter drawn on the device, per sample: an exact crop
  by indexing, ONE ``affine_grid``-style sampling for all rotations (the same grid math as
  torchvision's ``rotate``), a per-sample-sigma blur as one grouped convolution. No syncs.
- ``pipelined`` / ``pipelined-loop``: the vectorized / loop chain of batch n+1 on its own
  stream while the model trains on batch n.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import torch
import torch.nn as nn
import torch.nn.functional as nnf
import torchvision.transforms.v2 as T
import torchvision.transforms.v2.functional as F
from torch import Tensor
from torch.utils.data import DataLoader, Dataset
from torchvision.ops import roi_align

from workloads import models
from workloads.base import Workload
from workloads.data import loader_bytes_held, loader_worker_options, random_images_u8, shutdown_loader_workers
from workloads.registry import FAMILIES
from workloads.streams import TwoStagePipeline
from workloads.train_step import train_step

MAX_DEGREES = 45.0
BLUR_KERNEL = 7
BLUR_SIGMA = (0.1, 2.0)  # torchvision GaussianBlur's default range


# -- per-sample, on the CPU (the host_augment variant) ---------------------------------------------
def cpu_transforms(image_size: int) -> T.Compose:
    return T.Compose(
        [
            T.ToDtype(torch.float32, scale=True),
            T.RandomCrop(image_size // 2),
            T.Resize(image_size),
            T.RandomRotation(degrees=MAX_DEGREES),
            T.GaussianBlur(kernel_size=BLUR_KERNEL, sigma=BLUR_SIGMA),
            T.Normalize(mean=[0.0, 0.0, 0.0], std=[1.0, 1.0, 1.0]),
        ]
    )


class RandomImages(Dataset):
    """Seeded random uint8 images and labels, transformed per sample (in a loader worker)."""

    def __init__(self, image_size: int, transform: T.Compose, seed: int, length: int = 10**9) -> None:
        self.image_size, self.transform, self.seed, self.length = image_size, transform, seed, length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> tuple[Tensor, int]:
        gen = torch.Generator().manual_seed(self.seed * 1_000_003 + index)
        image = random_images_u8(gen, 1, self.image_size)[0]
        label = int(torch.randint(0, models.NUM_CLASSES, (1,), generator=gen))
        return self.transform(image), label


# -- batch chain pieces, on the device ------------------------------------------------------
def random_crop_offsets(n: int, max_offset: int, gen: torch.Generator, device: torch.device) -> tuple[Tensor, Tensor]:
    """Per-sample (top, left) offsets in [0, max_offset], drawn on the device."""
    tops = torch.randint(0, max_offset + 1, (n,), device=device, generator=gen)
    lefts = torch.randint(0, max_offset + 1, (n,), device=device, generator=gen)
    return tops, lefts


def crop_exact(images: Tensor, tops: Tensor, lefts: Tensor, size: int) -> Tensor:
    """``images[i, :, tops[i]:tops[i]+size, lefts[i]:lefts[i]+size]`` for every i, in one gather."""
    n = images.shape[0]
    steps = torch.arange(size, device=images.device)
    rows = (tops[:, None] + steps)[:, :, None]  # N, size, 1
    cols = (lefts[:, None] + steps)[:, None, :]  # N, 1, size
    batch = torch.arange(n, device=images.device)[:, None, None]
    return images.permute(0, 2, 3, 1)[batch, rows, cols].permute(0, 3, 1, 2)


def crop_roi_align(images: Tensor, tops: Tensor, lefts: Tensor, size: int) -> Tensor:
    """The article's crop, through ``roi_align`` (``aligned=True`` makes it an exact crop)."""
    idx = torch.arange(images.shape[0], device=images.device, dtype=images.dtype)
    left, top = lefts.to(images.dtype), tops.to(images.dtype)
    boxes = torch.stack([idx, left, top, left + size, top + size], dim=1)
    return roi_align(images, boxes, output_size=size, aligned=True)


def rotation_grid(angles_deg: Tensor, height: int, width: int, dtype: torch.dtype) -> Tensor:
    """Sampling grids for rotating each image by its angle about its centre.

    The same grid as torchvision's ``rotate`` (inverse matrix, pixel-centred base grid,
    normalised by half the size) but for a batch of angles that live on the device.
    The matrix is built in float64 and rounded once, as torchvision does on the host.
    """
    theta = torch.deg2rad(angles_deg.to(torch.float64))
    cos, sin = torch.cos(theta), torch.sin(theta)
    zero = torch.zeros_like(cos)
    # torchvision: matrix for -angle, inverted -> [[cos, -sin, 0], [sin, cos, 0]] for +angle.
    matrix = torch.stack([cos, -sin, zero, sin, cos, zero], dim=1).to(dtype).view(-1, 2, 3)
    device = angles_deg.device
    base = torch.empty(1, height, width, 3, dtype=dtype, device=device)
    base[..., 0].copy_(torch.linspace((1.0 - width) * 0.5, (width - 1.0) * 0.5, steps=width, device=device))
    base[..., 1].copy_(
        torch.linspace((1.0 - height) * 0.5, (height - 1.0) * 0.5, steps=height, device=device).unsqueeze_(-1)
    )
    base[..., 2].fill_(1)
    rescaled = matrix.transpose(1, 2).clone()  # N, 3, 2; scalars only: a host tensor here would sync
    rescaled[..., 0] /= 0.5 * width
    rescaled[..., 1] /= 0.5 * height
    n = angles_deg.shape[0]
    return base.view(1, height * width, 3).expand(n, -1, -1).bmm(rescaled).view(n, height, width, 2)


def rotate_batch(images: Tensor, angles_deg: Tensor) -> Tensor:
    """Rotate each float image by its own angle (nearest, zero fill): one sampling for the batch."""
    grid = rotation_grid(angles_deg, images.shape[-2], images.shape[-1], images.dtype)
    return nnf.grid_sample(images, grid, mode="nearest", padding_mode="zeros", align_corners=False)


def rotate_loop(images: Tensor, max_degrees: float = MAX_DEGREES) -> Tensor:
    """The article's per-image loop: host-drawn angles, one ``rotate`` call (and 2 syncs) each."""
    return torch.stack([F.rotate(img, angle=random.uniform(-max_degrees, max_degrees)) for img in images.unbind(0)])


def gaussian_kernels(sigmas: Tensor, kernel_size: int) -> Tensor:
    """One normalised 1-D Gaussian kernel per sigma, as torchvision builds them: (N, k)."""
    half = (kernel_size - 1) * 0.5
    x = torch.linspace(-half, half, steps=kernel_size, device=sigmas.device, dtype=sigmas.dtype)
    pdf = torch.exp(-0.5 * (x[None, :] / sigmas[:, None]).pow(2))
    return pdf / pdf.sum(dim=1, keepdim=True)


def blur_batch(images: Tensor, sigmas: Tensor, kernel_size: int = BLUR_KERNEL) -> Tensor:
    """Gaussian blur with a sigma per image (reflect padding, as torchvision): one grouped conv per axis."""
    n, c, h, w = images.shape
    k = gaussian_kernels(sigmas.to(images.dtype), kernel_size).repeat_interleave(c, dim=0)  # N*C, k
    pad = kernel_size // 2
    x = nnf.pad(images.reshape(1, n * c, h, w), [pad, pad, pad, pad], mode="reflect")
    x = nnf.conv2d(x, k[:, None, None, :], groups=n * c)
    x = nnf.conv2d(x, k[:, None, :, None], groups=n * c)
    return x.view(n, c, h, w)


class BatchAugment:
    """The augmentation chain for a uint8 batch on the device, per-sample randomness.

    ``vectorized=False`` is the article's version (loop rotation, one blur sigma per batch);
    ``vectorized=True`` draws every parameter on the device and never syncs the host.
    """

    def __init__(self, image_size: int, vectorized: bool, gen: torch.Generator) -> None:
        self.size, self.vectorized, self.gen = image_size, vectorized, gen
        self.batch_blur = T.GaussianBlur(kernel_size=BLUR_KERNEL, sigma=BLUR_SIGMA)
        # Made once here: torchvision's normalize copies mean/std to the device on every call (a sync).
        self.mean = torch.zeros(1, 3, 1, 1, device=gen.device)
        self.std = torch.ones(1, 3, 1, 1, device=gen.device)

    def __call__(self, images_u8: Tensor) -> Tensor:
        n, device, half = images_u8.shape[0], images_u8.device, self.size // 2
        x = F.to_dtype(images_u8, torch.float32, scale=True)
        tops, lefts = random_crop_offsets(n, self.size - half, self.gen, device)
        crop = crop_exact if self.vectorized else crop_roi_align
        x = F.resize(crop(x, tops, lefts, half), [self.size, self.size], antialias=True)
        if self.vectorized:
            angles = torch.empty(n, device=device).uniform_(-MAX_DEGREES, MAX_DEGREES, generator=self.gen)
            x = rotate_batch(x, angles)
            sigmas = torch.empty(n, device=device).uniform_(*BLUR_SIGMA, generator=self.gen)
            x = blur_batch(x, sigmas)
        else:
            x = self.batch_blur(rotate_loop(x))
        return (x - self.mean) / self.std


class AugmentWorkload(Workload):
    info = FAMILIES["augment"]

    def _build_model(self) -> None:
        self.model = models.classifier(self.image_size).to(self.device).train()
        self.criterion = nn.CrossEntropyLoss()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=1e-3)
        self.gen = torch.Generator(device=self.device).manual_seed(self.data_seed)
        random.seed(self.data_seed)
        self.loader: DataLoader | None = None
        self.batches: Iterator[tuple[Tensor, Tensor]] | None = None
        self.retired_worker_exit_codes: list[int] = []  # of the last loader shut down

    def _configure(self) -> None:
        n, size = self.batch_size, self.image_size
        if self.variant_info.host_augment:
            dataset = RandomImages(size, cpu_transforms(size), self.data_seed)
            self.loader = DataLoader(
                dataset,
                batch_size=n,
                num_workers=self.workers,
                pin_memory=self.on_cuda,
                persistent_workers=self.workers > 0,
                prefetch_factor=2 if self.workers > 0 else None,
                **loader_worker_options(self.workers, self.rank_info is not None, preload=[__name__]),
            )
            self.batches = iter(self.loader)
            return

        def make_batch(gen: torch.Generator) -> tuple[Tensor, ...]:
            labels = torch.randint(0, models.NUM_CLASSES, (n,), dtype=torch.uint8, generator=gen)
            return random_images_u8(gen, n, size), labels

        self.pool = self.host_pool(make_batch)
        self.augment = BatchAugment(size, vectorized=self.variant_info.vectorized, gen=self.gen)
        if self.variant_info.pipelined:
            self.pipeline = TwoStagePipeline(self.device, emulate=self.emulate_streams)

    def _release(self) -> None:
        super()._release()
        if self.loader is not None:
            self.retired_worker_exit_codes = shutdown_loader_workers(self.batches)
            self.loader = self.batches = None

    def trained_parameters(self) -> list[nn.Parameter]:
        return list(self.model.parameters())

    def host_bytes_held(self, batch_bytes: int) -> int:
        if self.variant_info.host_augment:
            return loader_bytes_held(batch_bytes, self.workers, pin=self.on_cuda)
        return super().host_bytes_held(batch_bytes)

    def generators(self) -> list[torch.Generator]:
        return [self.gen] if self.on_cuda else []

    def _draw_input(self) -> tuple[Tensor, ...]:
        if self.variant_info.host_augment:
            assert self.batches is not None
            return tuple(next(self.batches))
        assert self.pool is not None  # built by _configure
        return self.pool.next()

    def prepare(self, images_u8: Tensor, labels_u8: Tensor) -> tuple[Tensor, Tensor]:
        """Copy a host batch to the device (on the current stream) and augment it there."""
        images, labels = self.to_device((images_u8, labels_u8))
        with self.autocast():
            images = self.augment(images)
        return images, labels.long()

    def train(self, images: Tensor, labels: Tensor) -> Tensor:
        """A training step on a batch (copied to the device first where it is on the host)."""
        images, labels = self.to_device((images, labels))
        return train_step(self.model, self.criterion, self.optimizer, images, labels, self._autocast)

    def _stages(self):  # noqa: ANN202 - see Workload._stages
        if self.variant_info.host_augment:
            return None, ("train", self.train)  # augmentation runs in the loader's workers
        return ("augment", self.prepare), ("train", self.train)
