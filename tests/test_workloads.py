"""Every family and variant trains on the CPU; configuration changes behave as users expect."""

from __future__ import annotations

import pytest
import torch

from tests.helpers import slow_if_real
from tests.messages import present
from workloads.base import Workload, WorkloadOptions
from workloads.catalog_types import WorkloadError
from workloads.encdec import EncDecWorkload
from workloads.factory import build
from workloads.registry import FAMILIES, describe, family, parse_batch_size
from workloads.train_step import GradientAccumulation

ALL_VARIANTS = [(f.name, v.name) for f in FAMILIES.values() for v in f.variants]
CPU_VARIANTS = [slow_if_real(*case) for case in ALL_VARIANTS]  # a real network's steps take seconds here
EVERY_FAMILY = [slow_if_real(name) for name in FAMILIES]


def _snapshot(params: list[torch.nn.Parameter]) -> list[torch.Tensor]:
    return [p.detach().clone() for p in params]


@pytest.mark.parametrize(("name", "variant"), CPU_VARIANTS)
def test_every_variant_trains_on_cpu(name: str, variant: str) -> None:
    options = WorkloadOptions(variant=variant, batch_size=2, workers=1, emulate_streams=True)
    with build(name, "cpu", options) as w:
        before = _snapshot(w.trained_parameters())
        losses = []
        for _ in range(3):
            w.step()
            losses.append(present(w.last_loss).item())
        assert w.samples_per_step == 2
        assert all(torch.isfinite(torch.tensor(losses)))
        changed = [not torch.equal(a, b) for a, b in zip(before, w.trained_parameters(), strict=False)]
        assert all(changed), "every trained parameter should move after 3 SGD steps"


@pytest.mark.parametrize("name", EVERY_FAMILY)
def test_defaults_on_cpu_are_small_and_valid(name: str) -> None:
    with build(name, "cpu", WorkloadOptions(workers=0)) as w:
        info = family(name)
        assert w.variant == info.default_variant
        assert w.batch_size == info.cpu_defaults.batch_size
        assert w.image_size == info.cpu_defaults.image_size
        w.step()
        assert torch.isfinite(present(w.last_loss))


@pytest.mark.parametrize(("name", "variant"), [("encdec", "pipelined"), ("augment", "pipelined")])
def test_pipelined_variants_refuse_the_cpu_with_the_reason(name: str, variant: str) -> None:
    with pytest.raises(WorkloadError, match="needs CUDA streams.*this run is on cpu"):
        build(name, "cpu", WorkloadOptions(variant=variant))


def test_switching_variant_and_batch_size_at_a_step_boundary() -> None:
    with build("augment", "cpu", WorkloadOptions(variant="gpu", batch_size=2)) as w:
        w.step()
        w.reconfigure(variant="gpu-vectorized", batch_size=3)
        w.step()
        assert (w.variant, w.samples_per_step) == ("gpu-vectorized", 3)
        w.set_variant("cpu")
        w.set_batch_size(5)
        w.step()
        assert (w.variant, w.samples_per_step) == ("cpu", 5)


def test_a_knob_change_keeps_the_host_batches_and_hands_them_out_as_a_fresh_build_would() -> None:
    from workloads.knobs import parse_knobs

    knobs = parse_knobs("channels_last=on")
    with build("encdec", "cpu", WorkloadOptions(batch_size=2)) as w:
        assert w.pool is not None
        pool, first = w.pool, w.pool.batches[0]
        w.step()
        w.reconfigure(knobs=knobs)  # not generated and pinned again: the same batches, from the first
        assert w.pool is pool and w.pool.batches[0] is first
        with build("encdec", "cpu", WorkloadOptions(batch_size=2, knobs=knobs)) as fresh:
            assert fresh.pool is not None and fresh.pool is not pool
            for _ in range(len(pool) + 1):  # around the cycle: the same sequence
                assert all(torch.equal(a, b) for a, b in zip(w.pool.next(), fresh.pool.next(), strict=True))
        w.reconfigure(batch_size=3)  # other batches: made anew
        assert w.pool is not pool and w.pool.batches[0][0].shape[0] == 3


@pytest.mark.parametrize("name", EVERY_FAMILY)
def test_a_change_frees_the_last_steps_gradients_before_the_next_configuration_is_built(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a GPU they lie in the old configuration's stream or graph pool: freed only by the next
    configuration's first step, they stayed cached there (docs/soak-gpu.md). They must be gone
    when the next configuration is built, and a closed workload holds none."""
    import weakref

    with build(name, "cpu", WorkloadOptions(batch_size=2, workers=0)) as w:
        w.step()
        grads = [weakref.ref(p.grad) for p in w.trained_parameters() if p.grad is not None]
        assert grads
        alive_when_built: list[int] = []
        original = type(w)._configure

        def configure(self: Workload) -> None:
            alive_when_built.append(sum(g() is not None for g in grads))
            original(self)

        monkeypatch.setattr(type(w), "_configure", configure)
        w.reconfigure(batch_size=3)
        assert alive_when_built == [0]
        w.step()
        assert torch.isfinite(present(w.last_loss))
    assert all(p.grad is None for p in w.trained_parameters())


def test_a_rejected_change_keeps_the_last_good_configuration() -> None:
    with build("encdec", "cpu", WorkloadOptions(batch_size=2)) as w:
        for bad in ({"batch_size": 0}, {"batch_size": -3}, {"variant": "warp-speed"}, {"variant": "pipelined"}):
            with pytest.raises(WorkloadError):
                w.reconfigure(**bad)
            assert (w.variant, w.batch_size) == ("serial", 2)
        w.step()
        assert torch.isfinite(present(w.last_loss))


def test_a_failing_rebuild_rolls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    with build("sync_loss", "cpu", WorkloadOptions(batch_size=2)) as w:
        original = type(w)._configure

        def explode_on_big_batches(self) -> None:  # stands in for an out-of-memory rebuild
            if self.batch_size > 100:
                raise RuntimeError("out of memory")
            original(self)

        monkeypatch.setattr(type(w), "_configure", explode_on_big_batches)
        with pytest.raises(RuntimeError, match="out of memory"):
            w.set_batch_size(1024)
        assert w.batch_size == 2 and present(w.pool).batches[0][0].shape[0] == 2
        w.step()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("0", "at least 1"),
        ("-4", "at least 1"),
        ("lots", "whole number"),
        ("2.5", "whole number"),
        ("", "whole number"),
    ],
)
def test_batch_size_input_is_checked_with_one_clear_line(text: str, message: str) -> None:
    with pytest.raises(WorkloadError, match=message) as err:
        parse_batch_size(text)
    assert "\n" not in str(err.value)


def test_unknown_names_list_the_choices() -> None:
    with pytest.raises(WorkloadError, match="encdec, augment, sync_loss, input_pipeline"):
        family("resnet")
    with pytest.raises(WorkloadError, match="serial, pipelined"):
        build("encdec", "cpu", WorkloadOptions(variant="fast"))


def test_image_size_must_halve_down_to_one() -> None:
    with pytest.raises(WorkloadError, match="power of two"):
        build("encdec", "cpu", WorkloadOptions(image_size=48))


def test_registry_lists_every_variant_and_what_needs_cuda() -> None:
    text = describe()
    for name, variant in ALL_VARIANTS:
        assert name in text and variant in text
    assert text.count("[needs CUDA]") == sum(v.needs_cuda for f in FAMILIES.values() for v in f.variants)


def test_registry_does_not_import_torch() -> None:
    import subprocess
    import sys

    code = "import sys, workloads.registry as r; r.describe(); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_input_pipeline_jpeg_is_generated_once_in_the_cache(tmp_path) -> None:
    from PIL import Image

    from workloads.input_pipeline import JPEG_SIZE, sample_jpeg

    path = sample_jpeg(tmp_path)
    assert path.parent == tmp_path and Image.open(path).size == JPEG_SIZE
    mtime = path.stat().st_mtime_ns
    assert sample_jpeg(tmp_path) == path and path.stat().st_mtime_ns == mtime


@pytest.mark.parametrize("workers", [0, 1])
def test_input_pipeline_gpu_transform_sends_uint8_through_the_loader(workers: int) -> None:
    """gpu-transform's batch leaves the DataLoader as uint8 (worker, collate); the rung before's
    as float32; both train."""
    fam = family("input_pipeline")
    for info, dtype in ((fam.variant("batch-transform"), torch.float32), (fam.variant("gpu-transform"), torch.uint8)):
        options = WorkloadOptions(variant=info.name, batch_size=3, image_size=32, workers=workers)
        with build("input_pipeline", "cpu", options) as w:
            images, labels = w._draw_input()
            assert images.dtype == dtype and images.shape == (3, 3, 32, 32) and labels.shape == (3,)
            w.step()
            assert torch.isfinite(present(w.last_loss))


def hang(module: torch.nn.Module, accumulation: GradientAccumulation | None) -> None:
    """Set the module's ``accumulation``, as the ddp_no_sync knob does on a DDP module."""
    module.accumulation = accumulation  # type: ignore[assignment]  # Module.__setattr__'s stub: Tensor | Module only


def test_steps_under_a_restore_point_leave_no_gradients_or_micro_step_count_behind() -> None:
    """Warm-up, single-rank timing and the memory probe run real steps: afterwards the gradients
    accumulated so far (a ddp_no_sync cycle half done) and the cycle's position are as before."""
    with build("encdec", "cpu", WorkloadOptions(batch_size=2, image_size=32)) as w:
        assert isinstance(w, EncDecWorkload)
        w.step()  # gradients of one micro-step, not yet applied
        accumulation = GradientAccumulation(3)
        accumulation.advance()
        hang(w.decoder, accumulation)  # what the ddp_no_sync knob hangs on the DDP module
        grads = [present(p.grad).clone() for p in w.trained_parameters()]
        params = [p.detach().clone() for p in w.trained_parameters()]
        with w._restore_point(w.generators()):
            accumulation.advance()
            hang(w.decoder, None)  # a plain module steps: zero_grad, backward, step
            w.step()
        hang(w.decoder, accumulation)
        assert accumulation.position == 1
        assert all(torch.equal(present(p.grad), g) for p, g in zip(w.trained_parameters(), grads, strict=False))
        assert all(torch.equal(p, q) for p, q in zip(w.trained_parameters(), params, strict=False))
