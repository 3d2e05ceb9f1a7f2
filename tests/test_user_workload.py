"""Your own model in gpudash (``gpudash.api``): the example trains as a bare loop of the same step
would, on the CPU and in ``gpudash record``; every bad input is one line and exit 2, nothing else."""

from __future__ import annotations

import csv
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from gpudash.api import Training
from tests.helpers import ROOT, build_as
from tests.test_record import gpudash
from workloads.base import WorkloadOptions
from workloads.catalog_types import WorkloadError
from workloads.data import HostBatchPool
from workloads.factory import build
from workloads.registry import family, is_user_spec
from workloads.user import UserWorkload

EXAMPLE = ROOT / "examples" / "mine.py"
SPEC = f"{EXAMPLE}:workload"


def _parameters(model: torch.nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in model.parameters()]


def test_the_example_trains_exactly_what_a_bare_loop_of_its_step_trains() -> None:
    with build_as(UserWorkload, SPEC, "cpu", WorkloadOptions(batch_size=4, seed=3)) as w:
        for _ in range(6):
            w.step()
        trained, data_seed = _parameters(w.model), w.data_seed
    # the same function, seed and batches, by hand
    from workloads.user import load_function

    torch.manual_seed(3)
    t = load_function(SPEC)(4, torch.device("cpu"))
    assert t.batch is not None, "the example makes its own batches"
    pool = HostBatchPool(t.batch, seed=data_seed, pin=False)
    for _ in range(6):
        x, y = pool.next()
        t.optimizer.zero_grad(set_to_none=True)
        t.loss_fn(t.model(x), y).backward()
        t.optimizer.step()
    assert all(torch.equal(a, b) for a, b in zip(trained, _parameters(t.model), strict=True))


def test_a_new_batch_size_asks_the_function_again_and_keeps_training_the_same_model() -> None:
    with build_as(UserWorkload, SPEC, "cpu", WorkloadOptions(batch_size=4)) as w:
        model = w.model
        w.step()
        w.reconfigure(batch_size=8)
        w.step()
        assert w.model is model and w.batch_size == 8
        assert w.pool is not None and w.pool.next()[0].shape[0] == 8


def test_a_spec_names_a_family_of_one_variant_without_importing_the_file() -> None:
    info = family(SPEC)
    assert info.variant_names == ("serial", "pipelined") and info.module == "workloads.user"
    assert "workload() of" in info.title and is_user_spec(SPEC) and not is_user_spec("nope")
    assert family("workloads.vision:resnet50").source == "workloads.vision:resnet50"  # found, not imported
    with pytest.raises(WorkloadError, match="no module 'package.module' on the Python path"):
        family("package.module:fn")
    with pytest.raises(WorkloadError, match="no such file"):
        family("missing.py:workload")
    with pytest.raises(WorkloadError, match="FILE.py:FUNCTION"):
        family("mine.py:not an identifier")
    with pytest.raises(WorkloadError, match="or your own, as FILE.py:FUNCTION"):
        family("resnet")


# -- bad input: one line, exit 2, no file ----------------------------------------------------------
GOOD_HEAD = """
import torch
from torch import nn
from gpudash.api import Training
"""
LINEAR = (
    "def workload(batch_size, device):\n    m = nn.Linear(4, 2)\n    opt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
)
CASES = {
    "raises": (
        "def workload(batch_size, device):\n    raise RuntimeError('out of ideas\\nthe last line')\n",
        "workload(8, cpu) raised RuntimeError: the last line (traceback: out.log)",
    ),
    "wrong type": (
        "def workload(batch_size, device):\n    return 42\n",
        "workload() returned int, not gpudash.api.Training",
    ),
    "missing field": (
        LINEAR + "    return Training(model=m, loss_fn=None, optimizer=opt, batch=42)\n",
        "returned a Training whose loss_fn, batch is missing or not usable",
    ),
    "no data": (
        LINEAR + "    return Training(m, nn.CrossEntropyLoss(), opt)\n",
        "returned a Training with neither of batch and loader; give one",
    ),
    "both data": (
        LINEAR + "    return Training(m, nn.CrossEntropyLoss(), opt, batch=lambda g: None, loader=[])\n",
        "returned a Training with both of batch and loader; give one",
    ),
    "short last batch": (
        LINEAR + "    data = torch.utils.data.TensorDataset(torch.randn(20, 4), torch.zeros(20, dtype=torch.long))\n"
        "    return Training(m, nn.CrossEntropyLoss(), opt, loader=torch.utils.data.DataLoader(data, batch_size))\n",
        "the loader at batch size 8 gave tensors of shapes (4, 4), (4,) (a DataLoader's last batch: drop_last=True)",
    ),
    "empty loader": (
        LINEAR + "    return Training(m, nn.CrossEntropyLoss(), opt, loader=[])\n",
        "the loader gave no batch (an empty dataset, or fewer samples than a batch)",
    ),
    "loader raises": (
        LINEAR + "    def items():\n        raise OSError('disk gone')\n        yield\n"
        "    class Data:\n        def __iter__(self):\n            return items()\n"
        "    return Training(m, nn.CrossEntropyLoss(), opt, loader=Data())\n",
        "the loader raised OSError: disk gone",
    ),
    "wrong shape": (
        LINEAR + "    return Training(m, nn.CrossEntropyLoss(), opt, lambda g: (torch.randn(3, 4), torch.zeros(3)))\n",
        "batch() at batch size 8 gave tensors of shapes (3, 4), (3,)",
    ),
    "not a tuple": (
        LINEAR + "    return Training(m, nn.CrossEntropyLoss(), opt, lambda g: torch.randn(batch_size, 4))\n",
        "batch() must give (inputs, targets), two tensors; got Tensor",
    ),
    "syntax": ("def workload(batch_size, device)\n    pass\n", "': line 5: expected ':'"),  # read before it runs
    "no function": ("def other(batch_size, device):\n    pass\n", "has no function workload()"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_bad_workload_file_is_one_line(tmp_path: Path, case: str) -> None:
    """What the workload process says of each mistake (``gpudash record`` turns it into exit 2:
    the next test), in process."""
    body, expected = CASES[case]
    mine = tmp_path / "mine.py"
    mine.write_text(GOOD_HEAD + textwrap.dedent(body))
    with pytest.raises(WorkloadError) as refused:  # at the build, or at a step (a loader's third batch)
        workload = build(f"{mine}:workload", "cpu", WorkloadOptions(batch_size=8))
        for _ in range(3):
            workload.step()
    message = str(refused.value)
    assert (
        message.startswith((f"{mine}:workload: ", f"'{mine}:workload': "))
        and expected.split(" (traceback")[0] in message
    )
    assert "\n" not in message


@pytest.mark.slow
def test_gpudash_record_says_the_users_error_in_one_line_exits_2_and_keeps_the_traceback(tmp_path: Path) -> None:
    body, expected = CASES["raises"]
    (tmp_path / "mine.py").write_text(GOOD_HEAD + textwrap.dedent(body))
    r = gpudash(
        "record", "out.csv", "-w", "mine.py:workload", "--device", "cpu", "--steps", "3", cwd=tmp_path, timeout=180
    )
    assert r.returncode == 2, r.stderr
    (line,) = r.stderr.splitlines()
    assert line == f"gpudash: error: mine.py:workload: {expected}"
    assert not (tmp_path / "out.csv").exists() and r.stdout == ""
    log = (tmp_path / "out.log").read_text()
    assert "Traceback" in log and "out of ideas" in log  # the user's traceback, whole, in the log


def test_a_missing_file_is_refused_before_anything_starts(tmp_path: Path) -> None:
    r = gpudash("record", "out.csv", "-w", "nowhere.py:workload", "--steps", "3", cwd=tmp_path, timeout=60)
    assert r.returncode == 2
    assert r.stderr.strip() == "gpudash: error: 'nowhere.py:workload': no such file 'nowhere.py'"


@pytest.mark.slow
def test_the_example_records_as_written_on_the_cpu(tmp_path: Path) -> None:
    """The issue's command, with a step count instead of a duration (the same path, less time)."""
    r = gpudash("record", "out.csv", "-w", f"{EXAMPLE}:workload", *"--device cpu --steps 40 -q".split(), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    with open(tmp_path / "out.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    samples = [row for row in rows if row["row_kind"] == "sample"]
    assert samples and all(row["workload"] == f"{EXAMPLE}:workload" and row["variant"] == "serial" for row in samples)
    assert int(samples[-1]["steps"]) >= 1 and float(samples[-1]["loss"]) > 0


def test_the_api_is_torch_free_to_import() -> None:
    code = "import sys, gpudash.api; print('torch' in sys.modules, 'textual' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.stdout.split() == ["False", "False"], r.stderr
    assert Training.__dataclass_fields__.keys() == {"model", "loss_fn", "optimizer", "batch", "loader", "frozen"}


FROZEN = f"{ROOT / 'examples' / 'frozen_trunk.py'}:workload"


def _trained(spec: str, variant: str, steps: int = 5) -> list[torch.Tensor]:
    with build_as(UserWorkload, spec, "cpu", WorkloadOptions(variant=variant, batch_size=4, emulate_streams=True)) as w:
        for _ in range(steps):
            w.step()
        w.drain()
        return _parameters(w.model)


def test_a_frozen_stage_pipelined_trains_exactly_what_serial_trains() -> None:
    """The pipelined schedule (the frozen stage on batch n+1 while the model trains on batch n),
    emulated in order on the CPU, against serial: the same parameters, bit for bit."""
    serial, pipelined = _trained(FROZEN, "serial"), _trained(FROZEN, "pipelined")
    assert all(torch.equal(a, b) for a, b in zip(serial, pipelined, strict=True))
    with build_as(UserWorkload, FROZEN, "cpu", WorkloadOptions(batch_size=4)) as w:
        trunk = w.frozen
        assert trunk is not None and not any(p.requires_grad for p in trunk.parameters())  # not trained


def test_without_a_frozen_stage_pipelined_copies_ahead_and_trains_exactly_what_serial_trains() -> None:
    """Without a frozen stage the first stage is the batch's copy to the device (batch n+1's copy on
    its own stream while batch n trains): emulated in order on the CPU, the same parameters."""
    serial, pipelined = _trained(SPEC, "serial"), _trained(SPEC, "pipelined")
    assert all(torch.equal(a, b) for a, b in zip(serial, pipelined, strict=True))
    with build(SPEC, "cpu", WorkloadOptions(variant="pipelined", batch_size=4, emulate_streams=True)) as w:
        stages = w.stage_pair()
    assert stages is not None and stages[0][0] == "copy"  # stage timing names it
    # and on the CPU, for real, pipelining is refused for the reason every family gives
    assert "needs CUDA streams" in (family(FROZEN).refusal("pipelined", "cpu") or "")


def test_cuda_graph_is_tried_on_your_own_step_and_a_failed_capture_says_why_in_one_line() -> None:
    """No blanket refusal: on a GPU the capture is attempted (tests/test_user_workload_gpu.py); what
    stops it (here, a sync's CUDA error and the failed capture's error raised while ending it) is
    said in one line, the cause first."""
    from workloads.knobs import Knobs, knob
    from workloads.tuning import capture_refusal

    assert knob("cuda_graph").refusal(family(SPEC).variant("serial"), "cuda", Knobs()) is None
    try:
        try:
            raise RuntimeError("CUDA error: operation not permitted when stream is capturing\nSearch for ...")
        except RuntimeError:
            raise RuntimeError("CUDA error: operation failed due to a previous error during capture") from None
    except RuntimeError as exc:
        said = capture_refusal(exc)
    assert "operation failed" in said  # `from None`: the cause was hidden, the last error is what is known
    try:
        try:
            raise RuntimeError("CUDA error: operation not permitted when stream is capturing\nSearch for ...")
        except RuntimeError:
            raise RuntimeError("CUDA error: operation failed due to a previous error during capture")  # noqa: B904
    except RuntimeError as exc:
        said = capture_refusal(exc)
    assert said.startswith("knob cuda_graph cannot capture this step: CUDA error: operation not permitted")
    assert "\n" not in said and ".item()" in said
