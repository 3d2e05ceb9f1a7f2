"""D. A CPU-bound input pipeline, fixed step by step (docs/workloads.md D, the article's part 4).

Each variant adds one fix to the previous one:

====================  =======  ==================  ====================  ===================  ======================
variant               workers  decode              dilation              crop                 colour + scale
====================  =======  ==================  ====================  ===================  ======================
``baseline``          4        PIL, per sample     convolve2d            after to-tensor      per sample
``workers``           all      PIL, per sample     convolve2d            after to-tensor      per sample
``dilation``          all      PIL, per sample     shifted ORs           after to-tensor      per sample
``reorder``           all      PIL, per sample     shifted ORs           PIL, before tensor   per sample
``batch-transform``   all      PIL, per sample     shifted ORs           PIL, before tensor   per batch, in collate
``gpu-transform``     all      PIL, per sample     shifted ORs           PIL, before tensor   per batch, on the GPU
``gpu-decode``        all      nvjpeg, per batch   shifted ORs, on GPU   per batch, on GPU    per batch, on the GPU
====================  =======  ==================  ====================  ===================  ======================

"all" is the number of CPUs available to the process, split among the ranks of one machine
under ``--nproc`` (or ``--workers``). Every sample reads
the same JPEG, generated once into the cache directory (never downloaded). Up to
``batch-transform`` a sample leaves its worker as float32 (768 KB at 256x256, through shared
memory, collate and pinning); ``gpu-transform`` keeps it uint8 (4x fewer bytes through shared
memory, pinning and the host-to-device copy) and converts the batch on the device, in the
training stage, before the model. ``gpu-decode`` (needs CUDA) leaves the workers only the file
read each sample makes on every rung: its bytes go on encoded (236 KB a sample, about what
gpu-transform's uint8 crop weighs) and the training stage decodes the batch with nvjpeg
(``decode_jpeg`` of a list: one batched call, on the JPEG engines of an A100/H100), then crops,
masks, converts and scales it on the device (``DeviceJpegs``), with offsets and masks drawn
from a device generator as RandomCrop and RandomMask draw theirs. nvjpeg cannot be captured,
so the ``cuda_graph`` knob is refused for it. The transforms are ``workloads.input_transforms``'.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
from PIL import Image
from torch import Tensor
from torch.utils.data import DataLoader, Dataset, DistributedSampler, default_collate

from workloads import models
from workloads.base import Workload
from workloads.catalog_types import Fix, WorkloadError
from workloads.data import loader_bytes_held, loader_worker_options, shutdown_loader_workers
from workloads.input_transforms import DeviceColour, DeviceJpegs, batch_collate, jpeg_collate, per_sample_transforms
from workloads.registry import FAMILIES
from workloads.train_step import train_step

JPEG_SIZE = (800, 533)  # width, height, as in the article
_dataset_size = FAMILIES["input_pipeline"].dataset_size
assert _dataset_size is not None  # the catalog gives this family one
DATASET_SIZE: int = _dataset_size  # the catalog's: batch sizes are checked against it
BASELINE_WORKERS = 4


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


class OneJpegDataset(Dataset):
    """10,000 samples that all open the same JPEG, with random labels."""

    def __init__(self, path: Path, transform: Callable, seed: int) -> None:
        self.path, self.transform = str(path), transform
        self.targets = np.random.default_rng(seed).integers(0, models.NUM_CLASSES, DATASET_SIZE).tolist()

    def __len__(self) -> int:
        return DATASET_SIZE

    def __getitem__(self, index: int) -> tuple[Tensor, int]:
        return self.transform(Image.open(self.path)), self.targets[index]


def read_jpeg_bytes(path: str) -> Tensor:
    """A file's bytes, undecoded, as a 1-D uint8 tensor (one read)."""
    return torch.from_numpy(np.fromfile(path, dtype=np.uint8))


class JpegBytesDataset(OneJpegDataset):
    """gpu-decode's samples: the same file, read per sample as on every rung, its bytes left
    encoded (the batch is decoded on the GPU)."""

    def __init__(self, path: Path, seed: int) -> None:
        super().__init__(path, read_jpeg_bytes, seed)

    def __getitem__(self, index: int) -> tuple[Tensor, int]:
        return self.transform(self.path), self.targets[index]


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
        self.jpegs = DeviceJpegs(self.device, self.image_size, self.data_seed)  # ... with Fix.GPU_DECODE
        self.loader: DataLoader | None = None
        self.batches: Iterator | None = None
        self.retired_worker_exit_codes: list[int] = []  # of the last loader shut down

    @property
    def loader_workers(self) -> int:
        return self.workers if Fix.ALL_CPUS in self.variant_info.fixes else BASELINE_WORKERS

    def describe(self) -> dict[str, object]:
        return {**super().describe(), "workers": self.loader_workers}

    def host_bytes_held(self, batch_bytes: int) -> int:
        return loader_bytes_held(batch_bytes, self.loader_workers, pin=self.on_cuda)

    def _configure(self) -> None:
        workers = self.loader_workers
        decode = self.decodes_on_device
        dataset = (
            JpegBytesDataset(self.jpeg, self.seed)
            if decode
            else OneJpegDataset(self.jpeg, per_sample_transforms(self.variant_info, self.image_size), self.seed)
        )
        self.loader = DataLoader(
            dataset,
            batch_size=self.batch_size,
            sampler=self._rank_sampler(dataset),
            num_workers=workers,
            collate_fn=self._collate(),
            # nvjpeg reads JPEG bytes from any host memory: pinning them would only copy them
            # (gpu-decode pins its labels in the step)
            pin_memory=self.on_cuda and not decode,
            drop_last=True,
            persistent_workers=workers > 0,
            **loader_worker_options(workers, self.rank_info is not None, preload=[__name__]),
        )
        self.batches = iter(self.loader)

    def _rank_sampler(self, dataset: Dataset) -> DistributedSampler | None:
        """In a data-parallel run, this rank's share of the dataset's indices (None: all, in order)."""
        if self.rank_info is None:
            return None
        return DistributedSampler(
            dataset, num_replicas=self.world_size, rank=self.rank_info.rank, shuffle=False, drop_last=True
        )

    @property
    def decodes_on_device(self) -> bool:
        return Fix.GPU_DECODE in self.variant_info.fixes

    def generators(self) -> tuple[torch.Generator, ...]:
        """gpu-decode's crops and masks come from a device generator (put back after warm-ups)."""
        return (self.jpegs.generator,) if self.decodes_on_device else ()

    def _collate(self) -> Callable:
        """Colour and scaling in collate for batch-transform only; gpu-transform sends uint8 on,
        gpu-decode the JPEG bytes."""
        fixes = self.variant_info.fixes
        if Fix.GPU_DECODE in fixes:
            return jpeg_collate
        return batch_collate if Fix.BATCH_COLOUR in fixes and Fix.GPU_COLOUR not in fixes else default_collate

    def _release(self) -> None:
        super()._release()
        self.retired_worker_exit_codes = shutdown_loader_workers(self.batches)
        self.loader = self.batches = None

    def trained_parameters(self) -> list[nn.Parameter]:
        return list(self.model.parameters())

    def _draw_input(self) -> tuple[Tensor, ...]:
        assert self.loader is not None and self.batches is not None  # built together by _configure
        try:
            return tuple(next(self.batches))
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
        return train_step(self.model, self.criterion, self.optimizer, images, labels, self._autocast)

    def train_jpegs(self, jpeg_bytes: Tensor, lengths: Tensor, labels: Tensor) -> Tensor:
        """gpu-decode's step: the batch's JPEGs decoded, cropped, masked, converted and scaled on
        the device (``DeviceJpegs``), then one training step."""
        jpegs = list(torch.split(jpeg_bytes, lengths.tolist()))  # host tensors: no device read
        images = self.jpegs(jpegs, self.memory_format)
        (labels,) = self.to_device((labels.pin_memory() if self.on_cuda else labels,))
        return train_step(self.model, self.criterion, self.optimizer, images, labels, self._autocast)

    def _stages(self):  # noqa: ANN202 - see Workload._stages
        return None, ("train", self.train_jpegs if self.decodes_on_device else self.train)
