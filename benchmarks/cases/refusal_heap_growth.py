"""How much host heap a refused first batch costs before the refusal: the budget of
``tests/test_limits.py::test_a_first_batch_that_would_not_fit_is_refused_and_its_loader_stopped``.

A batch over the family's default is refused only after the default configuration is built and a
step is probed at batch 1, 4 and 16, as many as the batch holds (``Workload.step_memory``). Each
row runs that build, with no limit, in a fresh interpreter (the family's module imported; with
"warm-up", one small step of the family run first, as the test does) and gives the peak growth of
``VmData`` (the figure ``RLIMIT_DATA`` counts), sampled every millisecond. The test's room must
stay well above it."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass

from benchmarks.harness.context import Run
from benchmarks.harness.params import param
from benchmarks.harness.stamp import ROOT

CHILD = """
import sys, threading, time
from dataclasses import replace
from workloads.base import WorkloadOptions
from workloads.factory import build
from workloads.catalog_types import WorkloadError

def vm_data():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmData:"))

import workloads.input_pipeline
options = WorkloadOptions(batch_size=int(sys.argv[2]), image_size=int(sys.argv[1]), workers=2)
if sys.argv[3] == "yes":
    with build("input_pipeline", "cpu", replace(options, batch_size=4, workers=0)) as warm:
        warm.step()
start = peak = vm_data()
done = False
def watch():
    global peak
    while not done:
        peak = max(peak, vm_data())
        time.sleep(0.001)
threading.Thread(target=watch, daemon=True).start()
try:
    build("input_pipeline", "cpu", options).close()
    outcome = "built"
except WorkloadError:
    outcome = "refused"
done = True
print(f"{(peak - start) / 2**20:.0f} {outcome}")
"""


@dataclass(frozen=True)
class Params:
    sizes: tuple[str, ...] = param(("256", "64"), "the images' sizes in pixels")
    batch: int = param(4000, "the batch asked for (over the family's default: refused)")


def measure(run: Run, p: Params) -> None:
    table = run.table(
        ["image px", "batch asked", "warm-up", "peak VmData growth, MiB", "outcome (no limit)"],
        ["---:", "---:", "---", "---:", "---"],
    )
    for px in p.sizes:
        for warm in ("no", "yes"):
            argv = [sys.executable, "-W", "ignore", "-c", CHILD, px, str(p.batch), warm]
            out = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
            run.row(table, px, p.batch, warm, out[0], out[1])
