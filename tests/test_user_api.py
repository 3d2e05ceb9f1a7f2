"""The public API's optional parts: ``@workload`` (a name and default batch sizes, read without
running the file), a ``loader`` (your input pipeline, measured with the step) and installed
workloads (entry points in the group ``gpudash.workloads``, listed by ``gpudash list``)."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from gpudash.api import Training, workload
from gpudash.core.protocol import Sample
from gpudash.engine.loop import StepLoop
from tests.helpers import ROOT, build_as
from workloads.base import WorkloadOptions
from workloads.catalog_types import WorkloadError
from workloads.factory import build
from workloads.registry import family

LOADER = f"{ROOT / 'examples' / 'with_loader.py'}:train"
HEAD = "import torch\nfrom torch import nn\nfrom gpudash.api import Training, workload\nimport gpudash.api\n"


def _file(tmp_path: Path, body: str, name: str = "mine") -> str:
    mine = tmp_path / f"{name}.py"
    mine.write_text(HEAD + textwrap.dedent(body))
    return f"{mine}:train"


# -- @workload: read from the text, before anything runs -----------------------------------------
def test_declared_batch_sizes_and_name_are_the_familys_defaults(tmp_path: Path) -> None:
    spec = _file(
        tmp_path, "@gpudash.api.workload(name='mine', batch_size=96, cpu_batch_size=6)\ndef train(b, d): ...\n"
    )
    info = family(spec)
    assert (info.cuda_defaults.batch_size, info.cpu_defaults.batch_size) == (96, 6)
    assert info.title.startswith("mine: train() of ")
    # one batch size declared: the GPU's serves the CPU too
    plain = _file(tmp_path, "@workload(batch_size=24)\ndef train(b, d): ...\n", "gpu_only")
    assert (family(plain).cuda_defaults.batch_size, family(plain).cpu_defaults.batch_size) == (24, 24)


@pytest.mark.parametrize(
    ("decorator", "message"),
    [
        ("@workload(batch_size=2 * 32)", "@workload(batch_size=...) must be a literal (gpudash reads it"),
        ("@workload(batch_size=0)", "@workload(batch_size=...) must be a whole number of at least 1, got 0"),
        ("@workload(name='')", "@workload(name=...) must be a non-empty string"),
        ("@workload(batch=8)", "@workload() takes name, batch_size and cpu_batch_size, not batch"),
    ],
)
def test_a_declaration_gpudash_cannot_read_is_one_line(tmp_path: Path, decorator: str, message: str) -> None:
    spec = _file(tmp_path, f"{decorator}\ndef train(b, d): ...\n")
    with pytest.raises(WorkloadError) as refused:
        family(spec)
    assert message in str(refused.value) and "\n" not in str(refused.value)


def test_an_edited_declaration_is_read_again(tmp_path: Path) -> None:
    """A dashboard left open while you edit your file: the next look at it sees the edit."""
    spec = _file(tmp_path, "@workload(batch_size=24)\ndef train(b, d): ...\n", "edited")
    assert family(spec).cuda_defaults.batch_size == 24
    path = tmp_path / "edited.py"
    path.write_text(HEAD + "@workload(batch_size=48)\ndef train(b, d): ...\n")
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))  # a later edit, whatever the clock
    assert family(spec).cuda_defaults.batch_size == 48


def test_the_decorator_marks_the_function_and_checks_its_values() -> None:
    @workload(name="x", batch_size=8)
    def train(batch_size: int, device: object) -> Training:
        raise AssertionError("never called: only the decorator's marks are read")

    assert train.gpudash_workload == {"name": "x", "batch_size": 8, "cpu_batch_size": None}  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="batch_size must be a whole number of at least 1, got -1"):
        workload(batch_size=-1)


@pytest.mark.slow
def test_a_declared_cpu_batch_size_is_the_one_that_runs(tmp_path: Path) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "gpudash", "record", "out.csv", "-w", LOADER, *"--device cpu --steps 12 -q".split()],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert r.returncode == 0, r.stderr
    with open(tmp_path / "out.csv", newline="") as f:
        samples = [row for row in csv.DictReader(f) if row["row_kind"] == "sample"]
    assert samples and {row["batch_size"] for row in samples} == {"16"}  # @workload(cpu_batch_size=16)


# -- a loader: the input pipeline is part of the step ----------------------------------------------
SLOW_LOADER = """
import time
class Slow:
    def __init__(self, n):
        self.n = n
    def __iter__(self):
        for _ in range(5):
            time.sleep(0.02)  # the input pipeline's cost: 20 ms a batch
            yield torch.randn(self.n, 4), torch.zeros(self.n, dtype=torch.long)

def train(batch_size, device):
    m = nn.Linear(4, 2)
    return Training(m, nn.CrossEntropyLoss(), torch.optim.SGD(m.parameters(), lr=0.1), loader=Slow(batch_size))
"""


def test_a_loaders_cost_is_measured_with_the_step_and_its_passes_start_over(tmp_path: Path) -> None:
    """A loader that takes 20 ms a batch cannot give more than 50 steps/s; 5 batches a pass, so a
    run of 12 steps starts it over twice."""
    w = build(_file(tmp_path, SLOW_LOADER), "cpu", WorkloadOptions(batch_size=4))
    got: list[object] = []
    loop = StepLoop(w, emit=got.append, controls=lambda timeout: None, sample_interval_s=0.1)
    start = time.monotonic()
    loop.run(steps=12)
    elapsed = time.monotonic() - start
    w.close()
    rates = [m.steps_per_s for m in got if isinstance(m, Sample) and m.steps]
    # the loader's time is in every step after the first sample, the configuration's warm-up (which
    # every figure leaves out): its first batch was drawn before the window, by the FLOP count's probe
    assert len(rates) > 1 and max(rates[1:]) < 50.0 and elapsed >= 12 * 0.02
    assert loop.steps_done == 12


def test_the_loader_example_trains_and_takes_a_new_batch_size() -> None:
    from workloads.user import UserWorkload

    with build_as(UserWorkload, LOADER, "cpu", WorkloadOptions(batch_size=8)) as w:
        for _ in range(3):
            w.step()
        w.set_batch_size(16)
        w.step()
        assert w.describe()["batch_size"] == 16 and w.feed is not None and w.image_size == 64


# -- installed workloads: entry points ---------------------------------------------------------
def _installed(tmp_path: Path) -> dict[str, str]:
    """A package with one workload, installed as pip would leave it: a module and a dist-info."""
    site = tmp_path / "site"
    (site / "tinypkg").mkdir(parents=True)
    (site / "tinypkg" / "__init__.py").write_text(
        "raise RuntimeError('gpudash must not run this to find a workload')\n"
    )
    (site / "tinypkg" / "work.py").write_text((ROOT / "examples" / "mine.py").read_text())
    info = site / "tinypkg-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tinypkg\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[gpudash.workloads]\ntiny = tinypkg.work:workload\n")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}


def test_gpudash_list_shows_an_installed_workload(tmp_path: Path) -> None:
    env = _installed(tmp_path)
    r = subprocess.run([sys.executable, "-m", "gpudash", "list"], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "installed workloads (entry points, group gpudash.workloads):" in r.stdout
    assert any(line.split() == ["tiny", "tinypkg.work:workload"] for line in r.stdout.splitlines())


@pytest.mark.slow
def test_an_installed_workload_records_by_its_name(tmp_path: Path) -> None:
    """By name, on the parent's side (its defaults: read from the text, the package's
    ``__init__`` never run) and in the workload process (imported as ``tinypkg.work``)."""
    env = _installed(tmp_path)
    args = [sys.executable, "-m", "gpudash", "record", "out.csv", "-w", "tiny", *"--device cpu --steps 10 -q".split()]
    r = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
    assert r.returncode != 0 and "tinypkg" in r.stderr  # importing tinypkg.work runs tinypkg/__init__.py: said
    (tmp_path / "site" / "tinypkg" / "__init__.py").write_text("")
    r = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr
    with open(tmp_path / "out.csv", newline="") as f:
        samples = [row for row in csv.DictReader(f) if row["row_kind"] == "sample"]
    assert samples and {row["workload"] for row in samples} == {"tiny"}


def test_an_unknown_name_lists_the_installed_workloads_too(tmp_path: Path) -> None:
    env = _installed(tmp_path)
    args = [sys.executable, "-m", "gpudash", "record", "out.csv", "-w", "tinyy", "--steps", "3"]
    r = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert "unknown workload 'tinyy'; choose one of:" in r.stderr and "tiny" in r.stderr


@pytest.mark.slow
def test_a_module_in_the_current_directory_runs_from_the_gpudash_script(tmp_path: Path) -> None:
    """``gpudash -w mymodel:workload`` in the project's directory: the console script's sys.path
    lacks the current directory, which ``python -m`` would have; gpudash looks there first."""
    (tmp_path / "mymodel.py").write_text((ROOT / "examples" / "mine.py").read_text())
    script = Path(sys.executable).parent / "gpudash"
    if not script.exists():
        pytest.skip("no gpudash console script beside this interpreter")
    args = [str(script), "record", "out.csv", "-w", "mymodel:workload", *"--device cpu --steps 5 -q".split()]
    r = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out.csv").read_text().count("mymodel:workload") > 1
