"""D. A CPU-bound input pipeline, fixed step by step (WORKLOADS.md D, the article's part 4).

Each variant adds one fix to the previous one:

========================  =======  ==============  ===================  ======================
variant                   workers  dilation        crop                 colour + scale
========================  =======  ==============  ===================  ======================
``baseline``              4        convolve2d      after to-tensor      per sample
``workers``               all      convolve2d      after to-tensor      per sample
``dilation``              all      shifted ORs     after to-tensor      per sample
``reorder``               all      shifted ORs     PIL, before tensor   per sample
``batch-transform``       all      shifted ORs     PIL, before tensor   per batch, in collate
``gpu-transform``         all      shifted ORs     PIL, before tensor   per batch, on the GPU
========================  =======  ==============  ===================  ======================

"all" is the number of CPUs available to the process (or ``--workers``). Every sample reads
the same JPEG, generated once into the cache directory (never downloaded). Up to
``batch-transform`` a sample leaves its worker as float32 (768 KB at 256x256, through shared
memory, collate and pinning); ``gpu-transform`` keeps it uint8 (4x fewer bytes through shared
memory, pinning and the host-to-device copy) and converts the batch on the device, in the
training stage, before the model.
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
from torch.utils.data import DataLoader, Dataset, default_collate, get_worker_info

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
        # img * keep, the mask broadcast over the channels: the same pixels as img[expanded] = 0,
        # ~3x faster on one thread (no boolean indexing of an expanded mask)
        return img.mul_(torch.from_numpy(~self.dilate(mask)))


_YUV: dict[tuple[torch.dtype, str], tuple[Tensor, Tensor]] = {}


def _yuv(dtype: torch.dtype, device: torch.device | str = "cpu") -> tuple[Tensor, Tensor]:
    """The 3x3 matrix and the offset as tensors, made once per dtype and device (per process)."""
    key = (dtype, str(device))
    if key not in _YUV:
        _YUV[key] = (torch.tensor(YUV_MATRIX, dtype=dtype, device=device),
                     torch.tensor(YUV_OFFSET, dtype=dtype, device=device))
    return _YUV[key]


def convert_color(img: Tensor) -> Tensor:
    """RGB to YUV for one CHW image: a 3x3 matrix and an offset."""
    # contiguous while still uint8, so that the reshape below is a view (not a float copy)
    img = img.contiguous().to(torch.get_default_dtype())
    matrix, offset = _yuv(img.dtype)
    out = torch.matmul(matrix, img.reshape(3, -1)).view(img.shape)
    return out + offset[:, None, None]


def scale(img: Tensor) -> Tensor:
    return img.to(torch.get_default_dtype()).div(255)


def _new_like(img: Tensor) -> Tensor:
    """An empty contiguous tensor shaped as ``img``; in a DataLoader worker in shared memory,
    as ``default_collate`` makes its batch (the worker then sends it without a copy)."""
    if get_worker_info() is None:
        return torch.empty(img.shape, dtype=img.dtype)
    storage = img._typed_storage()._new_shared(img.numel(), device=img.device)
    return img.new(storage).resize_(img.shape)


def batch_transform(batch: Tensor) -> Tensor:
    """Colour conversion and scaling for a whole NCHW batch at once (on the CPU, in collate)."""
    img = batch.to(torch.get_default_dtype())
    n = img.shape[0]
    matrix, offset = _yuv(img.dtype)
    out = _new_like(img)
    # the same products and sums as (bmm + offset) / 255, in place: no 200 MB temporaries
    flat = torch.bmm(torch.broadcast_to(matrix, (n, 3, 3)), img.reshape(n, 3, -1), out=out.view(n, 3, -1))
    flat += offset[None, :, None]
    return out.div_(255)


def batch_collate(batch: list[tuple[Tensor, int]]) -> tuple[Tensor, Tensor]:
    images, labels = default_collate(batch)
    return batch_transform(images), labels


class DeviceColour:
    """Colour conversion and scaling of a uint8 NCHW batch on its device, in float32.

    The math of ``batch_transform`` (YUV = matrix @ RGB + offset, then / 255) as broadcast
    multiply-adds: no matrix product, so it stays float32 whatever the TF32 setting, and it
    writes its output in the memory format asked for. Sync-free (nothing is read back to the
    host), so it runs inside a captured CUDA graph. The matrix and offset are made on the
    device once, here."""

    def __init__(self, device: torch.device | str) -> None:
        matrix, offset = _yuv(torch.float32, device)
        # column k, as (1, 3, 1, 1): what input channel k adds to each output channel
        self.columns = [matrix[:, k].reshape(1, 3, 1, 1) for k in range(3)]
        self.offset = offset.reshape(1, 3, 1, 1)

    def __call__(self, batch: Tensor, memory_format: torch.memory_format = torch.contiguous_format) -> Tensor:
        img = batch.to(torch.float32)
        out = torch.empty(img.shape, dtype=torch.float32, device=img.device, memory_format=memory_format)
        torch.addcmul(self.offset, img[:, 0:1], self.columns[0], out=out)
        out.addcmul_(img[:, 1:2], self.columns[1])
        out.addcmul_(img[:, 2:3], self.columns[2])
        return out.div_(255)


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
        self.colour = DeviceColour(self.device)  # used by the variants with Fix.GPU_COLOUR
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
            collate_fn=self._collate(),
            pin_memory=self.on_cuda,
            drop_last=True,
            persistent_workers=workers > 0,
        )
        self.batches = iter(self.loader)

    def _collate(self) -> Callable:
        """Colour and scaling in collate for batch-transform only; gpu-transform sends uint8 on."""
        fixes = self.variant_info.fixes
        return batch_collate if Fix.BATCH_COLOUR in fixes and Fix.GPU_COLOUR not in fixes else default_collate

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

    def model_input(self, images: Tensor) -> Tensor:
        """What the model gets from a batch already on the device: the batch itself, or with
        ``Fix.GPU_COLOUR`` its colour conversion and scaling (in the knobs' memory format)."""
        if Fix.GPU_COLOUR not in self.variant_info.fixes:
            return images
        return self.colour(images, self.memory_format)

    def train(self, images: Tensor, labels: Tensor) -> Tensor:
        images, labels = self.to_device((images, labels))
        images = self.model_input(images)
        return train_step(self.model, self.criterion, self.optimizer, images, labels, self.autocast)

    def _stages(self):  # noqa: ANN202 - see Workload._stages
        return None, ("train", self.train)
