"""Model FLOPs (``gpudash.boot.gpudash_boot.flop_count``) and the peaks they are a share of (``gpudash.core.peaks``):
ResNet-50's counted training FLOPs per image against its published 4.1 GMACs forward (×2 FLOPs a
MAC, ×3 for forward and backward), the table's matching by device name, and MFU's arithmetic."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torchvision

from gpudash.boot.gpudash_boot.flop_count import count_step_flops
from gpudash.core.peaks import PEAKS, choose_peak, mfu_pct, model_rates, peak_of

PUBLISHED_GMACS = 4.1  # ResNet-50's forward pass, per 224x224 image (He et al., 2015; torchvision's docs)


@pytest.mark.slow
def test_resnet50_training_flops_per_image_are_the_published_count_within_5_percent() -> None:
    torch.manual_seed(0)
    model = torchvision.models.resnet50()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    images, labels = torch.randn(2, 3, 224, 224), torch.randint(0, 1000, (2,))

    def step() -> None:
        loss = torch.nn.functional.cross_entropy(model(images), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()

    counted = count_step_flops(step, torch)
    per_image = counted.total / 2
    assert per_image == pytest.approx(PUBLISHED_GMACS * 1e9 * 2 * 3, rel=0.05)
    assert counted.known and counted.by_op[0][0].startswith("aten.convolution")
    assert counted.by_dtype == (("fp32", counted.total),)  # every counted FLOP, by dtype too
    assert counted.dtype == "fp32"
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as reference:  # torch's own counter, the same formulas
        step()
    assert counted.total == reference.get_total_flops()


def test_a_step_without_matmuls_counts_nothing_known() -> None:
    x = torch.randn(64)
    assert not count_step_flops(lambda: x.relu_(), torch).known


@pytest.mark.parametrize(
    ("name", "part"),
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA H100 NVL", "H100 NVL"),
        ("NVIDIA H200", "H200 SXM"),
        ("NVIDIA A100-SXM4-80GB", "A100"),
        ("NVIDIA A10", "A10"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA L40S", "L40S"),
    ],
)
def test_a_gpu_is_matched_by_its_device_name(name: str, part: str) -> None:
    found = peak_of(name)
    assert found is not None and found.part == part


def test_an_unknown_gpu_has_no_peak_and_every_entry_is_dense_and_sourced() -> None:
    assert peak_of("NVIDIA GeForce GTX 1080") is None
    for peak in PEAKS:
        half, tf32 = peak.tflops("fp16"), peak.tflops("tf32")
        assert half is not None and half > peak.fp32 > 0 and peak.source
        assert tf32 is None or half > tf32 >= peak.fp32
    with pytest.raises(ValueError, match="no peak for dtype"):
        PEAKS[0].tflops("int8")


def test_fp16_is_its_own_dtype_with_its_own_peak_where_a_gpu_has_no_bf16() -> None:
    h100 = choose_peak("NVIDIA H100 80GB HBM3", "fp16")
    assert h100.tflops == 989.5 and "H100 SXM fp16 dense" in h100.source  # the same figure as bf16 on an H100
    v100 = choose_peak("Tesla V100-SXM2-32GB", "fp16")
    assert v100.tflops == 125.0
    no_bf16 = choose_peak("Tesla V100-SXM2-32GB", "bf16")
    assert no_bf16.tflops is None and "has no bf16 tensor math" in no_bf16.source


def test_mfu_is_the_steps_flops_at_the_measured_rate_over_the_peak() -> None:
    # 6 N tokens: a 124M-parameter model at 100k tokens/s is 74.4 TFLOP/s, 7.5% of an H100's bf16 peak
    flops_per_step, steps_per_s = 6 * 124e6 * 10_000, 10.0
    assert mfu_pct(flops_per_step, steps_per_s, 989.5) == pytest.approx(100 * 74.4 / 989.5)
    with pytest.raises(ValueError):
        mfu_pct(1.0, 1.0, 0.0)


def _mlp_step(autocast_bf16: bool = False) -> Callable[[], None]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))

    def step() -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast_bf16):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    return step


def test_an_autocast_step_is_counted_in_bf16_and_a_plain_one_in_fp32_with_the_same_flops() -> None:
    fp32, bf16 = count_step_flops(_mlp_step(), torch), count_step_flops(_mlp_step(autocast_bf16=True), torch)
    assert fp32.dtype == "fp32" and bf16.dtype == "bf16"
    assert bf16.total == fp32.total == sum(n for _, n in bf16.by_dtype)  # the same arithmetic, in another dtype
    # forward 2·32·(64·256 + 256·10), backward twice that less the first layer's input gradient
    assert fp32.total == 3 * 2 * 32 * (64 * 256 + 256 * 10) - 2 * 32 * 64 * 256


def test_a_step_of_two_dtypes_is_mixed_and_has_no_single_peak() -> None:
    a = torch.randn(64, 64)
    b = a.to(torch.bfloat16)
    mixed = count_step_flops(lambda: (a @ a, b @ b), torch)
    assert mixed.dtype is None and sorted(mixed.dtypes_text().split(", ")) == ["bf16 50%", "fp32 50%"]
    assert choose_peak("NVIDIA H100 80GB HBM3", mixed.dtype).tflops is None


def test_the_peak_comes_from_the_table_by_name_and_dtype_or_from_the_flag_and_otherwise_says_why_not() -> None:
    h100 = choose_peak("NVIDIA H100 80GB HBM3", "bf16")
    assert h100.tflops == 989.5 and "H100 SXM bf16 dense" in h100.source
    assert choose_peak("NVIDIA H100 80GB HBM3", "tf32").tflops == 494.7
    assert choose_peak("NVIDIA H100 80GB HBM3", "bf16", override=500.0) == type(h100)(500.0, "--peak-tflops")
    assert choose_peak(None, "fp32", override=2.0).tflops == 2.0  # a CPU run with a peak given
    for name, dtype, why in [
        ("NVIDIA GeForce GTX 1080", "bf16", "no dense peak known for 'NVIDIA GeForce GTX 1080'"),
        (None, "fp32", "no GPU"),
        ("NVIDIA H100 80GB HBM3 MIG 1g.10gb", "bf16", "is a MIG slice"),  # not the whole GPU's peak
        ("NVIDIA H100 80GB HBM3", "float64", "computes in float64"),
    ]:
        choice = choose_peak(name, dtype)
        assert choice.tflops is None and why in choice.source and "--peak-tflops" in choice.source


def test_model_rates_are_blank_without_flops_and_mfu_blank_without_a_peak() -> None:
    h100 = choose_peak("NVIDIA H100 80GB HBM3", "bf16")
    assert model_rates(2e12, 100.0, h100) == (200.0, pytest.approx(100 * 200 / 989.5))
    assert model_rates(None, 100.0, h100) == (None, None)
    assert model_rates(0.0, 100.0, h100) == (None, None)
    assert model_rates(2e12, 100.0, choose_peak(None, "bf16")) == (200.0, None)
