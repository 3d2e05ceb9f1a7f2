"""Equivalence: the fixed versions compute what the slow ones compute."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torchvision.transforms.v2.functional as F

from tests.helpers import build_as, pipeline_pairs, slow_if_real
from workloads import augment, input_pipeline, input_transforms
from workloads.base import WorkloadOptions
from workloads.factory import build
from workloads.streams import TwoStagePipeline
from workloads.sync_loss import FixedLoss, SyncHeavyLoss


# -- C. the loss ----------------------------------------------------------------------------
def _target(case: str, gen: torch.Generator) -> torch.Tensor:
    t = torch.randint(-1, 10, (3, 12, 12), generator=gen)
    if case == "all ignored":
        t[:] = -1
    elif case == "one class":
        t[:] = 4
    elif case == "one class and ignored":
        t[:] = 4
        t[0] = -1
    elif case == "no background":
        t[t == 9] = 0
    elif case == "all background":
        t[:] = 9
    elif case == "background and one class":
        t = torch.where(t < 5, 9, 2)
    return t


CASES = [
    "random",
    "all ignored",
    "one class",
    "one class and ignored",
    "no background",
    "all background",
    "background and one class",
]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fixed_loss_equals_sync_heavy_loss_and_gradients(case: str, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    target = _target(case, gen)
    kept = target.clone()
    logits = torch.randn(3, 10, 12, 12, generator=gen, requires_grad=True)
    slow, fast = SyncHeavyLoss()(logits, target), FixedLoss()(logits, target)
    assert torch.equal(target, kept), "the losses must not modify the caller's target"
    assert torch.isfinite(slow) and torch.isfinite(fast)
    torch.testing.assert_close(fast, slow)
    (g_slow,) = torch.autograd.grad(slow, logits)
    (g_fast,) = torch.autograd.grad(fast, logits)
    assert torch.isfinite(g_fast).all()
    torch.testing.assert_close(g_fast, g_slow)


@pytest.mark.parametrize(
    ("case", "zero"),
    [
        ("all ignored", True),
        ("one class", True),
        ("all background", True),
        ("one class and ignored", False),
        ("random", False),
    ],
)
def test_loss_is_zeroed_below_two_distinct_values(case: str, zero: bool) -> None:
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 10, 12, 12, generator=gen)
    loss = FixedLoss()(logits, _target(case, gen))
    assert (loss.item() == 0.0) is zero


def test_losses_take_their_rules_as_arguments() -> None:
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(2, 5, 6, 6, generator=gen)
    target = torch.randint(0, 5, (2, 6, 6), generator=gen)
    for loss_cls in (SyncHeavyLoss, FixedLoss):
        plain = loss_cls(ignore_value=255, background=99, num_classes=5)(logits, target)
        expected = torch.nn.functional.cross_entropy(logits, target)
        torch.testing.assert_close(plain, expected)
    a = SyncHeavyLoss(ignore_value=-7, background=0, num_classes=5)(logits, target)
    b = FixedLoss(ignore_value=-7, background=0, num_classes=5)(logits, target)
    torch.testing.assert_close(a, b)


# -- B. the vectorized augmentation -------------------------------------------------------------
def test_vectorized_rotation_matches_torchvision_per_image() -> None:
    gen = torch.Generator().manual_seed(0)
    images = torch.rand(16, 3, 40, 40, generator=gen)
    angles = torch.empty(16).uniform_(-45, 45, generator=gen)
    batched = augment.rotate_batch(images, angles)
    looped = torch.stack([F.rotate(img, angle=float(a)) for img, a in zip(images, angles, strict=False)])
    assert torch.equal(batched, looped)


def test_exact_crop_matches_slicing_and_roi_align() -> None:
    gen = torch.Generator().manual_seed(1)
    images = torch.rand(8, 3, 32, 32, generator=gen)
    tops, lefts = augment.random_crop_offsets(8, 16, gen, images.device)
    sliced = torch.stack(
        [img[:, t : t + 16, left : left + 16] for img, t, left in zip(images, tops, lefts, strict=False)]
    )
    assert torch.equal(augment.crop_exact(images, tops, lefts, 16), sliced)
    torch.testing.assert_close(augment.crop_roi_align(images, tops, lefts, 16), sliced)


def test_per_sample_blur_matches_torchvision_per_image() -> None:
    gen = torch.Generator().manual_seed(2)
    images = torch.rand(6, 3, 24, 24, generator=gen)
    sigmas = torch.empty(6).uniform_(0.1, 2.0, generator=gen)
    looped = torch.stack([F.gaussian_blur(img, [7, 7], [float(s)] * 2) for img, s in zip(images, sigmas, strict=False)])
    torch.testing.assert_close(augment.blur_batch(images, sigmas), looped)


def test_vectorized_chain_draws_parameters_per_sample() -> None:
    """Eight copies of one image must come out as eight different augmentations."""
    gen = torch.Generator().manual_seed(3)
    one = torch.randint(0, 256, (1, 3, 32, 32), dtype=torch.uint8, generator=gen)
    out = augment.BatchAugment(32, vectorized=True, gen=gen)(one.expand(8, -1, -1, -1).contiguous())
    flat = out.flatten(1)
    assert all(not torch.equal(flat[i], flat[j]) for i in range(8) for j in range(i + 1, 8))


# -- D. the input pipeline's fixes ---------------------------------------------------------------
@pytest.mark.parametrize("seed", range(3))
def test_shift_dilation_matches_convolution_dilation(seed: int) -> None:
    mask = np.random.default_rng(seed).uniform(size=(37, 53)) < 0.25
    np.testing.assert_array_equal(input_transforms.dilate_shift(mask), input_transforms.dilate_conv(mask))


def test_batch_colour_conversion_matches_per_image() -> None:
    gen = torch.Generator().manual_seed(4)
    batch = torch.randint(0, 256, (5, 3, 16, 16), dtype=torch.uint8, generator=gen)
    per_image = torch.stack([input_transforms.scale(input_transforms.convert_color(img)) for img in batch])
    torch.testing.assert_close(input_transforms.batch_transform(batch), per_image)


def test_random_mask_zeroes_the_pixels_of_the_expanded_mask_indexing() -> None:
    """RandomMask multiplies by the kept pixels: exactly what ``img[expanded mask] = 0`` gives,
    on a dense image and on a crop view of a larger one (the rungs that crop after to-tensor)."""
    gen = torch.Generator().manual_seed(5)
    full = torch.randint(1, 256, (40, 50, 3), dtype=torch.uint8, generator=gen).permute(2, 0, 1)
    for img in (full.contiguous()[:, :16, :16].contiguous(), full[:, 3:19, 5:21]):
        np.random.seed(6)
        got = input_transforms.RandomMask(input_transforms.dilate_shift)(img.clone())
        np.random.seed(6)
        dilated = input_transforms.dilate_shift(np.random.uniform(size=img.shape[-2:]) < input_transforms.MASK_RATIO)
        want = img.clone()
        want[torch.from_numpy(dilated).unsqueeze(0).expand(3, -1, -1)] = 0
        assert got.dtype == torch.uint8 and torch.equal(got, want)
        assert 0 < int((got == 0).sum()) < got.numel()


def test_colour_conversion_of_a_strided_sample_matches_the_plain_math() -> None:
    """The per-sample conversion gets HWC-strided crop views from PILToTensor."""
    gen = torch.Generator().manual_seed(7)
    hwc = torch.randint(0, 256, (20, 30, 3), dtype=torch.uint8, generator=gen)
    view = hwc.permute(2, 0, 1)[:, 2:18, 4:20]
    plain = view.contiguous().float()
    want = (torch.tensor(input_transforms.YUV_MATRIX) @ plain.reshape(3, -1)).view(plain.shape)
    want = want + torch.tensor(input_transforms.YUV_OFFSET)[:, None, None]
    assert torch.equal(input_transforms.convert_color(view), want)


def _uint8_samples(n: int, size: int, seed: int) -> list[tuple[torch.Tensor, int]]:
    """Samples as the gpu-transform rung's workers make them (uint8, no colour conversion)."""
    from PIL import Image

    from workloads.registry import family

    chain = input_transforms.per_sample_transforms(family("input_pipeline").variant("gpu-transform"), size)
    path = input_pipeline.sample_jpeg()
    np.random.seed(seed)
    torch.manual_seed(seed)
    return [(chain(Image.open(path)), i) for i in range(n)]


@pytest.mark.parametrize("memory_format", [torch.contiguous_format, torch.channels_last])
def test_device_colour_conversion_matches_the_collate_one(memory_format: torch.memory_format) -> None:
    """gpu-transform's device-side conversion of the uint8 batch (here on the CPU device) gives
    the batch that batch-transform's collate makes from the same samples."""
    samples = _uint8_samples(6, 32, seed=8)
    assert all(img.dtype == torch.uint8 for img, _ in samples)
    in_collate, labels = input_transforms.batch_collate(samples)
    uint8_batch, uint8_labels = torch.utils.data.default_collate(samples)
    assert uint8_batch.dtype == torch.uint8 and torch.equal(labels, uint8_labels)
    on_device = input_transforms.DeviceColour("cpu")(uint8_batch.contiguous(memory_format=memory_format), memory_format)
    assert on_device.dtype == torch.float32 and on_device.is_contiguous(memory_format=memory_format)
    torch.testing.assert_close(on_device, in_collate, rtol=1e-6, atol=1e-6)


def test_gpu_transform_feeds_the_model_what_batch_transform_feeds_it() -> None:
    """The two rungs, same seed and same samples: the model input agrees within float
    tolerance; only what leaves the loader differs (uint8 against float32, 4x fewer bytes)."""
    from workloads.registry import family

    before, last = (family("input_pipeline").variant(v) for v in ("batch-transform", "gpu-transform"))
    inputs, drawn = [], []
    for variant in (before.name, last.name):
        options = WorkloadOptions(variant=variant, batch_size=4, workers=0, seed=3)
        with build_as(input_pipeline.InputPipelineWorkload, "input_pipeline", "cpu", options) as w:
            np.random.seed(9)
            torch.manual_seed(9)
            images, labels = w._draw_input()
            drawn.append((images, labels))
            inputs.append(w.model_input(w.to_device((images, labels))[0]))
    (float_batch, labels_a), (uint8_batch, labels_b) = drawn
    assert float_batch.dtype == torch.float32 and uint8_batch.dtype == torch.uint8
    assert uint8_batch.element_size() * 4 == float_batch.element_size()
    assert torch.equal(labels_a, labels_b)
    torch.testing.assert_close(inputs[1], inputs[0], rtol=1e-6, atol=1e-6)


# -- the pipeline schedule -------------------------------------------------------------------------
@pytest.mark.parametrize("depth", [1, 2])
def test_pipeline_produces_ahead_while_consuming_the_current_item(depth: int) -> None:
    log: list[str] = []
    items = iter(range(100))
    pipe = TwoStagePipeline(torch.device("cpu"), emulate=True, depth=depth)

    def produce(i: int) -> tuple[torch.Tensor]:
        log.append(f"produce {i}")
        return (torch.tensor(i),)

    def consume(t: torch.Tensor) -> int:
        log.append(f"consume {int(t)}")
        return int(t)

    consumed = [pipe.step(lambda: (next(items),), produce, consume) for _ in range(3)]
    assert consumed == [0, 1, 2]  # in the order drawn: the same training as serial
    # Item n+depth is produced in the same step that consumes item n (after it is issued: the
    # consumer is the critical path), so on a GPU the two overlap.
    primed = [f"produce {i}" for i in range(depth)]
    steps = [[f"consume {n}", f"produce {n + depth}"] for n in range(3)]
    assert log == primed + [entry for step in steps for entry in step]


@pytest.mark.parametrize(("name", "serial", "pipelined"), [slow_if_real(*pair) for pair in pipeline_pairs()])
def test_pipelined_schedule_trains_the_same_parameters_as_serial(name: str, serial: str, pipelined: str) -> None:
    """Same seed, same batches: the pipelined order of work must not change the training result."""
    results = []
    for variant in (serial, pipelined):
        with build(name, "cpu", WorkloadOptions(variant=variant, batch_size=3, seed=7, emulate_streams=True)) as w:
            for _ in range(5):
                w.step()
            results.append([p.detach().clone() for p in w.trained_parameters()])
    for a, b in zip(*results, strict=False):
        assert torch.equal(a, b)
