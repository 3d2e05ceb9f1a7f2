"""The input pipeline's transforms (``workloads.input_pipeline``'s rungs): per sample in the
DataLoader workers (the mask's dilation, ``RandomMask``, the colour conversion, the scaling),
per batch in collate (batch-transform's colour and scaling, gpu-decode's JPEG bytes end to end)
and per batch on the device (``DeviceColour``; ``DeviceJpegs``: nvjpeg's decode, the crop and the
mask); ``per_sample_transforms`` is a rung's chain, from its fixes.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np
import torch
import torchvision.transforms as T
from scipy.signal import convolve2d
from torch import Tensor
from torch.utils.data import default_collate, get_worker_info
from torchvision.io import ImageReadMode, decode_jpeg

from workloads.catalog_types import Fix, VariantInfo
from workloads.torch_adapter import new_shared_empty

MASK_RATIO = 0.25
FOUR_NEIGHBOURS = np.array([[0, 1, 0], [1, 1, 1], [0, 1, 0]])
YUV_MATRIX = [[0.299, 0.587, 0.114], [-0.16874, -0.33126, 0.5], [0.5, -0.41869, -0.08131]]
YUV_OFFSET = [0.0, 128.0, 128.0]
_Mask = TypeVar("_Mask", np.ndarray, Tensor)  # a boolean mask: numpy (per sample) or torch (per batch)


def dilate_conv(mask: np.ndarray) -> np.ndarray:
    """4-neighbour dilation as a 2-D convolution (the article's baseline)."""
    return convolve2d(mask, FOUR_NEIGHBOURS, mode="same").astype(bool)


def dilate_shift(mask: np.ndarray) -> np.ndarray:
    """The same dilation as a boolean OR of shifted copies (the article's fix)."""
    return _or_of_shifts(np.pad(mask, [(1, 1), (1, 1)]))


def dilate_batch(mask: Tensor) -> Tensor:
    """``dilate_shift`` of a batch of boolean masks (..., H, W), a torch tensor on any device."""
    return _or_of_shifts(torch.nn.functional.pad(mask, (1, 1, 1, 1)))


def _or_of_shifts(p: _Mask) -> _Mask:
    """Each pixel ORed with its 4 neighbours, from the mask padded by one pixel on each side."""
    return p[..., 0:-2, 1:-1] | p[..., 1:-1, 1:-1] | p[..., 2:, 1:-1] | p[..., 1:-1, 0:-2] | p[..., 1:-1, 2:]


class RandomMask:
    """Zero a random 25% of pixels, each dilated to its 4 neighbours (uint8 CHW tensor in place)."""

    def __init__(self, dilate: Callable[[np.ndarray], np.ndarray], ratio: float = MASK_RATIO) -> None:
        self.dilate, self.ratio = dilate, ratio

    def __call__(self, img: Tensor) -> Tensor:
        return self.apply(img, np.random.uniform(size=img.shape[-2:]) < self.ratio)

    def apply(self, img: Tensor, mask: np.ndarray) -> Tensor:
        """Zero the pixels of ``mask`` (H x W booleans) dilated, in place."""
        # img * keep, the mask broadcast over the channels: the same pixels as img[expanded] = 0,
        # ~3x faster on one thread (no boolean indexing of an expanded mask)
        return img.mul_(torch.from_numpy(~self.dilate(mask)))


_YUV: dict[tuple[torch.dtype, str], tuple[Tensor, Tensor]] = {}


def _yuv(dtype: torch.dtype, device: torch.device | str = "cpu") -> tuple[Tensor, Tensor]:
    """The 3x3 matrix and the offset as tensors, made once per dtype and device (per process)."""
    key = (dtype, str(device))
    if key not in _YUV:
        _YUV[key] = (
            torch.tensor(YUV_MATRIX, dtype=dtype, device=device),
            torch.tensor(YUV_OFFSET, dtype=dtype, device=device),
        )
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


def _new_like(img: Tensor, shape: Sequence[int] | None = None) -> Tensor:
    """An empty contiguous tensor of ``img``'s dtype shaped as ``img`` (or ``shape``); in a
    DataLoader worker in shared memory, as ``default_collate`` makes its batch (the worker then
    sends it without a copy; ``share_memory_()`` would allocate twice and copy: torch_adapter)."""
    size = img.shape if shape is None else torch.Size(shape)
    if get_worker_info() is None:
        return torch.empty(size, dtype=img.dtype)
    return new_shared_empty(img, size)


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


def crop_batch(images: Tensor, tops: Tensor, lefts: Tensor, size: int) -> Tensor:
    """Each image of an NCHW batch cropped to ``size`` x ``size`` at its own (top, left): what
    RandomCrop does to one sample once it has drawn its offsets, as one indexing kernel for the
    batch. Sync-free: the offsets stay on the device (integer indexing, no host read)."""
    n, c = images.shape[:2]
    dev = images.device
    span = torch.arange(size, device=dev)
    rows = (tops[:, None] + span)[:, None, :, None]  # (N, 1, size, 1)
    cols = (lefts[:, None] + span)[:, None, None, :]  # (N, 1, 1, size)
    sample = torch.arange(n, device=dev)[:, None, None, None]
    channel = torch.arange(c, device=dev)[None, :, None, None]
    return images[sample, channel, rows, cols]  # broadcast to (N, C, size, size), contiguous


def mask_batch(images: Tensor, dropped: Tensor) -> Tensor:
    """RandomMask for a batch: each image's ``dropped`` pixels (N x H x W booleans), dilated to
    their 4 neighbours, set to 0 in place (a broadcast fill: no boolean indexing, no sync)."""
    return images.masked_fill_(dilate_batch(dropped)[:, None], 0)


class DeviceJpegs:
    """gpu-decode's front of the training stage: a batch of JPEG files (their bytes, in host
    memory) → the model's input on the device. nvjpeg decodes the batch in one call, each image
    is cropped at its own random offset and masked with its own random dilated mask (drawn on
    the device, as RandomCrop and RandomMask draw theirs per sample on the CPU), then coloured
    and scaled by ``DeviceColour``.

    Nothing of the device's is read back (torch counts no sync), but torchvision's CUDA decode
    waits on the host for nvjpeg's own stream (``cudaStreamSynchronize`` before and after the
    batch, in ``decode_jpegs_cuda``): the host waits for the decode, never for the training
    stream, whose queued work runs meanwhile. nvjpeg writes its outputs from that stream of its
    own, so they are allocated while ``decode_stream`` is current, never from the training
    stream's memory that queued kernels may still use; the training stream waits for
    ``decode_stream`` and records its use of them (``record_stream``) before they are freed.
    All JPEGs of a batch must have one size (they are one file here)."""

    def __init__(self, device: torch.device, size: int, seed: int, ratio: float = MASK_RATIO) -> None:
        self.device, self.size, self.ratio = device, size, ratio
        self.generator = torch.Generator(device).manual_seed(seed)
        self.colour = DeviceColour(device)
        self.decode_stream = torch.cuda.Stream(device) if device.type == "cuda" else None

    def decode(self, jpegs: list[Tensor]) -> Tensor:
        """The JPEGs (1-D uint8 host tensors) as one uint8 NCHW RGB batch on the device."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # torchvision 0.29 points to TorchCodec
            if self.decode_stream is None:
                return torch.stack(decode_jpeg(jpegs, mode=ImageReadMode.RGB))
            current = torch.cuda.current_stream(self.device)
            with torch.cuda.stream(self.decode_stream):
                images = decode_jpeg(jpegs, mode=ImageReadMode.RGB, device=self.device)
        current.wait_stream(self.decode_stream)
        for img in images:
            img.record_stream(current)
        return torch.stack(images)

    def draw(self, n: int, height: int, width: int) -> tuple[Tensor, Tensor, Tensor]:
        """(tops, lefts, dropped) for ``n`` images of ``height`` x ``width``: each offset uniform
        over those where the crop fits (RandomCrop.get_params's range), each pixel of the crop
        dropped with probability ``ratio`` (RandomMask's draw); on the device, from ``generator``."""
        g, dev, s = self.generator, self.device, self.size
        tops = torch.randint(0, height - s + 1, (n,), generator=g, device=dev)
        lefts = torch.randint(0, width - s + 1, (n,), generator=g, device=dev)
        dropped = torch.rand((n, s, s), generator=g, device=dev) < self.ratio
        return tops, lefts, dropped

    def transform(
        self,
        images: Tensor,
        tops: Tensor,
        lefts: Tensor,
        dropped: Tensor,
        memory_format: torch.memory_format = torch.contiguous_format,
    ) -> Tensor:
        """A decoded uint8 batch → the model's input, for given offsets and masks."""
        return self.colour(mask_batch(crop_batch(images, tops, lefts, self.size), dropped), memory_format)

    def __call__(self, jpegs: list[Tensor], memory_format: torch.memory_format = torch.contiguous_format) -> Tensor:
        images = self.decode(jpegs)
        return self.transform(images, *self.draw(len(jpegs), *images.shape[-2:]), memory_format)


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


def jpeg_collate(batch: list[tuple[Tensor, int]]) -> tuple[Tensor, Tensor, Tensor]:
    """gpu-decode's batch: the samples' JPEG bytes end to end in one uint8 tensor (one
    shared-memory buffer to send, not one per sample), each one's length, and the labels."""
    files = [f for f, _ in batch]
    joined = torch.cat(files, out=_new_like(files[0], (sum(f.numel() for f in files),)))
    return joined, torch.tensor([f.numel() for f in files]), default_collate([label for _, label in batch])
