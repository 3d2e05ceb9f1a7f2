"""Model FLOPs (``gpudash.engine.flops``) and the peaks they are a share of (``gpudash.core.peaks``):
ResNet-50's counted training FLOPs per image against its published 4.1 GMACs forward (×2 FLOPs a
MAC, ×3 for forward and backward), the table's matching by device name, and MFU's arithmetic."""

from __future__ import annotations

import pytest
import torch
import torchvision

from gpudash.core.peaks import PEAKS, mfu_pct, peak_of
from gpudash.engine.flops import count_step_flops

PUBLISHED_GMACS = 4.1  # ResNet-50's forward pass, per 224x224 image (He et al., 2015; torchvision's docs)


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
        assert peak.bf16 > peak.tf32 > 0 and peak.fp32 > 0 and peak.source
    with pytest.raises(ValueError, match="no peak for dtype"):
        PEAKS[0].tflops("int8")


def test_mfu_is_the_steps_flops_at_the_measured_rate_over_the_peak() -> None:
    # 6 N tokens: a 124M-parameter model at 100k tokens/s is 74.4 TFLOP/s, 7.5% of an H100's bf16 peak
    flops_per_step, steps_per_s = 6 * 124e6 * 10_000, 10.0
    assert mfu_pct(flops_per_step, steps_per_s, 989.5) == pytest.approx(100 * 74.4 / 989.5)
    with pytest.raises(ValueError):
        mfu_pct(1.0, 1.0, 0.0)
