"""What the GPUDASH_FAULT tests share: the cheapest CPU run, a fake pynvml, the CSV's rows, and the
check that nothing of a workload's process group is left."""

from __future__ import annotations

import csv
import importlib.util
import io
import time
from pathlib import Path
from types import ModuleType

from gpudash.core.protocol import RunConfig
from gpudash.recording import csvformat

# the cheapest workload on a CPU: ~30 steps/s at batch 2 on 32-pixel images
FAST = ["-w", "augment", "-v", "cpu", "-b", "2", "--image-size", "32", "--device", "cpu"]
FAST_CONFIG = RunConfig(workload="augment", variant="cpu", batch_size=2, image_size=32, device="cpu")

ONE_THREAD = {"OMP_NUM_THREADS": "1"}  # several workload processes share two cores here

FAKE_PYNVML = '''"""A stand-in for pynvml: one GPU that answers every query (the machine has no driver)."""
import types


class NVMLError(Exception):
    def __init__(self, value):
        super().__init__(value)
        self.value = value

    def __str__(self):
        return {15: "GPU is lost", 9: "Driver Not Loaded"}.get(self.value, "Unknown Error")


NVML_CLOCK_SM = 1
NVML_TEMPERATURE_GPU = 0


def nvmlInit(): pass
def nvmlShutdown(): pass
def nvmlDeviceGetCount(): return 1
def nvmlDeviceGetHandleByIndex(i): return i
def nvmlDeviceGetName(h): return b"Fake GPU"
def nvmlDeviceGetUUID(h): return "GPU-fake"
def nvmlSystemGetDriverVersion(): return "555.42"
def nvmlDeviceGetUtilizationRates(h): return types.SimpleNamespace(gpu=87, memory=40)
def nvmlDeviceGetMemoryInfo(h): return types.SimpleNamespace(used=3 * 2**30, total=80 * 2**30)
def nvmlDeviceGetPowerUsage(h): return 250000
def nvmlDeviceGetClockInfo(h, kind): return 1980
def nvmlDeviceGetTemperature(h, kind): return 61
def nvmlDeviceGetTotalEnergyConsumption(h): return 1000000
def nvmlDeviceGetCurrentClocksEventReasons(h): return 0
'''


def group_members(pgid: int) -> list[int]:
    """Live processes (zombies excluded) of process group ``pgid``: gpudash's own scan."""
    from gpudash.core.procgroup import members

    return members(pgid)


def assert_nothing_left(pid: int) -> None:
    """Neither the workload process nor anything of its group (it leads one) is running."""
    deadline = time.monotonic() + 5  # its group's last members may still be exiting
    while group_members(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert group_members(pid) == [], f"processes of the workload's group {pid} are left"


def fake_pynvml_dir(tmp_path: Path) -> Path:
    """A folder holding the fake ``pynvml.py`` (to put first on a child's PYTHONPATH)."""
    folder = tmp_path / "fake_nvml"
    folder.mkdir(exist_ok=True)
    (folder / "pynvml.py").write_text(FAKE_PYNVML)
    return folder


def load_fake_pynvml(tmp_path: Path) -> ModuleType:
    """The fake pynvml, imported (for ``sys.modules['pynvml']`` in this process)."""
    spec = importlib.util.spec_from_file_location("pynvml", fake_pynvml_dir(tmp_path) / "pynvml.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def read_rows(path: Path) -> list[dict[str, str]]:
    """The CSV's rows; every line whole (the header, then rows with as many fields)."""
    text = path.read_text()
    assert text.endswith("\n")
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0][: len(csvformat.COLUMNS)] == csvformat.COLUMNS  # (per-GPU columns may follow)
    assert all(len(r) == len(rows[0]) for r in rows), "a row with a different number of fields"
    return [dict(zip(rows[0], r, strict=False)) for r in rows[1:]]


def events(rows: list[dict[str, str]], kind: str, what: str | None = None) -> list[dict[str, str]]:
    """The event rows of ``kind`` (about ``what``, when given)."""
    return [
        r
        for r in rows
        if r["row_kind"] == "event" and r["event_kind"] == kind and (what is None or r["event_what"] == what)
    ]


def samples(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """The sample rows."""
    return [r for r in rows if r["row_kind"] == "sample"]
