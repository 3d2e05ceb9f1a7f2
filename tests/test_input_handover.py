"""A job's input hand-over (issue 74): the bytes of each step's batches, how busy its DataLoader
workers were over the diagnosis' window, and the advice that follows — more workers only where
they are busy; where they idle, the wait is the batches' hand-over, and fewer bytes a batch or the
data kept on the GPU is the fix."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from gpudash.boot.gpudash_boot import loader
from gpudash.diagnosis.advice import input_advice
from gpudash.diagnosis.evidence import Evidence
from gpudash.job.worker_busy import WorkerBusy


def test_a_batchs_bytes_are_its_tensors_in_tuples_lists_and_mappings() -> None:
    images, labels = torch.zeros(8, 3, 4, 4), torch.zeros(8, dtype=torch.int64)
    assert loader.batch_bytes((images, labels), torch) == 8 * 3 * 16 * 4 + 8 * 8
    assert loader.batch_bytes({"input_ids": labels, "meta": ["a", 1]}, torch) == 8 * 8
    assert loader.batch_bytes([images.half()], torch) == 8 * 3 * 16 * 2


# a job that forks two workers, as a DataLoader does: they spin, or sleep
JOB = textwrap.dedent(
    """
    import os, sys, time
    spin = sys.argv[1] == "spin"
    for _ in range(2):
        if os.fork() == 0:
            end = time.monotonic() + 30
            while time.monotonic() < end:
                if not spin:
                    time.sleep(0.05)
            os._exit(0)
    print("started", flush=True)
    time.sleep(30)
    """
)


def _watched(tmp_path: Path, kind: str, until: float) -> tuple[float | None, int]:
    """The job's workers watched under this test's process (gpudash's place in a real run), looked
    at every 0.2 s for 1.5 s, then until their busy share reaches ``until`` or 20 s pass (a loaded
    machine gives spinning workers less of a CPU, never none)."""
    script = tmp_path / "job.py"
    script.write_text(JOB)
    job = subprocess.Popen([sys.executable, str(script), kind], stdout=subprocess.PIPE, text=True)
    try:
        assert job.stdout is not None and job.stdout.readline().strip() == "started"
        watch = WorkerBusy(os.getpid())
        watch.look(force=True)
        began = time.monotonic()
        while time.monotonic() - began < 20.0:
            time.sleep(0.2)
            watch.look(force=True)
            share, _ = watch.share()
            if time.monotonic() - began >= 1.5 and share is not None and share >= until:
                break
        return watch.share()
    finally:
        subprocess.run(["pkill", "-P", str(job.pid)], check=False)
        job.kill()
        job.wait()


@pytest.mark.slow
def test_workers_that_sleep_read_idle_and_workers_that_spin_read_busy(tmp_path: Path) -> None:
    idle, count = _watched(tmp_path, "sleep", until=0.0)  # watched 1.5 s
    assert count == 2 and idle is not None and idle < 0.1
    busy, count = _watched(tmp_path, "spin", until=0.05)
    assert count == 2 and busy is not None and busy > max(idle, 0.01)  # how much more: however loaded the CPUs


def _input_bound(busy: float) -> Evidence:
    """The issue's case: 4 workers, 77 MB a step, 24.6 of 74.5 ms waiting for the next batch."""
    e = Evidence(steps=30, step_ms=74.5, input_ms=24.6, gpu_ms_per_step=48.0, cpus=16)
    settings = {"pin_memory": "True", "persistent_workers": "True", "num_workers": "4"}
    return replace(e, job_settings=settings, input_batch_bytes=77e6, input_workers=4, input_workers_busy=busy)


def test_workers_that_idle_are_not_the_fix_the_hand_over_of_its_bytes_is() -> None:
    said = input_advice(_input_bound(busy=0.17))
    assert said.startswith("not more DataLoader workers: its 4 are busy 17% of a CPU each")
    assert "hand-over of 77 MB a step" in said and "uint8 images normalised on the GPU" in said
    # a job on the CPU is not told of a copy to the GPU, nor to keep its data there
    on_cpu = input_advice(replace(_input_bound(busy=0.17), gpu_ms_per_step=None))
    assert "hand-over of 77 MB a step (shared memory, the collation)" in on_cpu and "GPU" not in on_cpu
    busy = input_advice(_input_bound(busy=0.9))
    assert "more DataLoader workers (num_workers, now 4)" in busy and "hand-over" not in busy
    # idle workers with small batches wait on storage (a slow file system): more of them is the fix
    reads = input_advice(replace(_input_bound(busy=0.05), input_batch_bytes=2e6))
    assert "more DataLoader workers (num_workers, now 4)" in reads and "hand-over" not in reads
