"""D. A CPU-bound input pipeline, fixed step by step (WORKLOADS.md D, the article's part 4).

Each variant adds one fix to the previous one:

========================  =======  ==============  ===================  ==============
variant                   workers  dilation        crop                 colour + scale
========================  =======  ==============  ===================  ==============
``baseline``              4        convolve2d      after to-tensor      per sample
``workers``               all      convolve2d      after to-tensor      per sample
``dilation``              all      shifted ORs     after to-tensor      per sample
``reorder``               all      shifted ORs     PIL, before tensor   per sample
``batch-transform``       all      shifted ORs     PIL, before tensor   per batch
========================  =======  ==============  ===================  ==============

"all" is the number of CPUs available to the process (or ``--workers``). Every sample reads
the same JPEG, generated once into the cache directory (never downloaded).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torchvision.transforms as T
from PIL import Image
from scipy.signal import convolve2d
from torch import Tensor
from torch.utils.data import DataLoader, Dataset, default_collate

from workloads import models
from workloads.base import Workload, train_step
from workloads.data import shutdown_loader_workers
from workloads.registry import FAMILIES, Fix, VariantInfo, WorkloadError

JPEG_SIZE = (800, 533)  # width, height, as in the article
DATASET_SIZE = 10_000
BASELINE_WORKERS = 4
MASK_RATIO = 0.25
FOUR_NEIGHBOURS = np.array([[0, 1, 0], [1, 1, 1], [0, 1, 0]])
YUV_MATRIX = [[0.299, 0.587, 0.114], [-0.16874, -0.33126, 0.5], [0.5, -0.41869, -0.08131]]
YUV_OFFSET = [0.0, 128.0, 128.0]


def cache_dir() -> Path:
    base = os.environ.get("GPUDASH_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "gpudash"
    )
    return Path(base)


def sample_jpeg(directory: Path | None = None) -> Path:
    """The synthetic 800x533 JPEG every sample reads; made on first use, atomically."""
    directory = directory or cache_dir()
    path = directory / f"input_pipeline_{JPEG_SIZE[0]}x{JPEG_SIZE[1]}.jpg"
    if path.exists():
        return path
    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    w, h = JPEG_SIZE
    yy, xx = np.mgrid[0:h, 0:w]
    smooth = np.stack([xx / w, yy / h, (xx + yy) / (w + h)], axis=-1) * 200
    pixels = np.clip(smooth + rng.normal(0, 25, (h, w, 3)), 0, 255).astype(np.uint8)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    Image.fromarray(pixels).save(tmp, format="JPEG", quality=90)
    os.replace(tmp, path)
    return path


# -- the transforms -----------------------------------------------------------------------
def dilate_conv(mask: np.ndarray) -> np.ndarray:
    """4-neighbour dilation as a 2-D convolution (the article's baseline)."""
    return convolve2d(mask, FOUR_NEIGHBOURS, mode="same").astype(bool)


def dilate_shift(mask: np.ndarray) -> np.ndarray:
    """The same dilation as a boolean OR of shifted copies (the article's fix)."""
    p = np.pad(mask, [(1, 1), (1, 1)])
    return p[0:-2, 1:-1] | p[1:-1, 1:-1] | p[2:, 1:-1] | p[1:-1, 0:-2] | p[1:-1, 2:]


class RandomMask:
    """Zero a random 25% of pixels, each dilated to its 4 neighbours (uint8 CHW tensor in place)."""

    def __init__(self, dilate: Callable[[np.ndarray], np.ndarray], ratio: float = MASK_RATIO) -> None:
        self.dilate, self.ratio = dilate, ratio

    def __call__(self, img: Tensor) -> Tensor:
        mask = np.random.uniform(size=img.shape[-2:]) < self.ratio
        dilated = torch.from_numpy(self.dilate(mask)).unsqueeze(0).expand(img.shape[0], -1, -1)
        img[dilated] = 0
        return img


def convert_color(img: Tensor) -> Tensor:
    """RGB to YUV for one CHW image: a 3x3 matrix and an offset."""
    img = img.to(torch.get_default_dtype())
    out = torch.matmul(torch.tensor(YUV_MATRIX), img.reshape(3, -1)).view(img.shape)
    return out + torch.tensor(YUV_OFFSET)[:, None, None]


def scale(img: Tensor) -> Tensor:
    return img.to(torch.get_default_dtype()).div(255)


def batch_transform(batch: Tensor) -> Tensor:
    """Colour conversion and scaling for a whole NCHW batch at once."""
    img = batch.to(torch.get_default_dtype())
    a = torch.broadcast_to(torch.tensor(YUV_MATRIX), (img.shape[0], 3, 3))
    out = torch.bmm(a, img.reshape(img.shape[0], 3, -1)) + torch.tensor(YUV_OFFSET)[None, :, None]
    return out.view(img.shape) / 255


def batch_collate(batch: list[tuple[Tensor, int]]) -> tuple[Tensor, Tensor]:
    images, labels = default_collate(batch)
    return batch_transform(images), labels


def per_sample_transforms(variant: VariantInfo, image_size: int) -> T.Compose:
    """The per-sample chain of a ladder variant: its fixes say which steps change."""
    fixes = variant.fixes
    mask = RandomMask(dilate_shift if Fix.SHIFT_DILATION in fixes else dilate_conv)
    if Fix.CROP_FIRST in fixes:
        steps: list[Callable] = [T.RandomCrop(image_size), T.PILToTensor(), mask]
    else:
        steps = [T.PILToTensor(), T.RandomCrop(image_size), mask]
    if Fix.BATCH_COLOUR not in fixes:
        steps += [convert_color, scale]
    return T.Compose(steps)


class OneJpegDataset(Dataset):
    """10,000 samples that all open the same JPEG, with random labels."""

    def __init__(self, path: Path, transform: Callable, seed: int) -> None:
        self.path, self.transform = str(path), transform
        self.targets = np.random.default_rng(seed).integers(0, models.NUM_CLASSES, DATASET_SIZE).tolist()

    def __len__(self) -> int:
        return DATASET_SIZE

    def __getitem__(self, index: int) -> tuple[Tensor, int]:
        return self.transform(Image.open(self.path)), self.targets[index]


class InputPipelineWorkload(Workload):
    info = FAMILIES["input_pipeline"]

    def _build_model(self) -> None:
        if self.image_size > min(JPEG_SIZE):
            raise WorkloadError(f"image size must be at most {min(JPEG_SIZE)} for input_pipeline (the JPEG's height)")
        self.model = models.PoolNet(self.image_size).to(self.device).train()
        self.criterion = nn.CrossEntropyLoss()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=1e-3, momentum=0.9)
        self.jpeg = sample_jpeg()
        self.loader: DataLoader | None = None
        self.batches: Iterator | None = None

    @property
    def loader_workers(self) -> int:
        return self.workers if Fix.ALL_CPUS in self.variant_info.fixes else BASELINE_WORKERS

    def describe(self) -> dict[str, object]:
        return {**super().describe(), "workers": self.loader_workers}

    def _configure(self) -> None:
        workers = self.loader_workers
        dataset = OneJpegDataset(self.jpeg, per_sample_transforms(self.variant_info, self.image_size), self.seed)
        self.loader = DataLoader(
            dataset,
            batch_size=self.batch_size,
            num_workers=workers,
            collate_fn=batch_collate if Fix.BATCH_COLOUR in self.variant_info.fixes else default_collate,
            pin_memory=self.on_cuda,
            drop_last=True,
            persistent_workers=workers > 0,
        )
        self.batches = iter(self.loader)

    def _release(self) -> None:
        super()._release()
        shutdown_loader_workers(self.batches)
        self.loader = self.batches = None

    def trained_parameters(self) -> list[nn.Parameter]:
        return list(self.model.parameters())

    def _draw_input(self) -> tuple[Tensor, ...]:
        assert self.loader is not None
        try:
            return tuple(next(self.batches))  # type: ignore[arg-type]
        except StopIteration:  # a new epoch
            self.batches = iter(self.loader)
            return tuple(next(self.batches))

    def train(self, images: Tensor, labels: Tensor) -> Tensor:
        images, labels = self.to_device((images, labels))
        return train_step(self.model, self.criterion, self.optimizer, images, labels, self.autocast)

    def _stages(self):  # noqa: ANN202 - see Workload._stages
        return None, ("train", self.train)
