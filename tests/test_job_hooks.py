"""The job's hooks and gpudash's bootstrap alone, no job run through gpudash: a channel nobody reads
drops figures and never blocks, a batch is counted by its first tensor or its input ids, and the
bootstrap runs the sitecustomize it shadows and puts one package of gpudash's in the job (the job
through the real command: tests/test_job.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpudash.boot.gpudash_boot import loader, outbox, wire


# -- the hooks alone ----------------------------------------------------------------------------------
def test_a_channel_nobody_reads_drops_figures_and_never_blocks(short_tmp: Path) -> None:
    import socket

    reader = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    reader.bind(str(short_tmp / "host.sock"))  # bound, never read: its buffer fills up
    channel = outbox.Channel(str(short_tmp / "host.sock"))
    start = time.monotonic()
    for i in range(20_000):
        channel.send({"k": "steps", "s": [[i, 0.0, 1.0, 8, 0, 0.0, None, 0]] * 20})
    assert time.monotonic() - start < 10.0 and channel.dropped > 0
    gone = outbox.Channel(str(short_tmp / "nobody.sock"))
    gone.send({"k": "hello"})
    assert gone.dropped == 1
    reader.close()


def test_batches_are_counted_by_their_first_tensor_or_their_input_ids() -> None:
    import torch

    count = loader.samples_tokens
    ids = torch.zeros(4, 16, dtype=torch.long)
    assert count(torch.zeros(8, 3), torch) == (8, 0)
    assert count((torch.zeros(8, 3), torch.zeros(8)), torch) == (8, 0)
    assert count({"pixel_values": torch.zeros(2, 3), "input_ids": ids}, torch) == (4, 64)
    assert count([{"x": torch.zeros(5)}], torch) == (5, 0)
    assert count("text", torch) == (0, 0)


def test_the_bootstrap_runs_the_sitecustomize_it_shadows(tmp_path: Path) -> None:
    """A job environment's own sitecustomize still runs; a process that never imports torch gets
    no hooks (and says nothing)."""
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "sitecustomize.py").write_text("import os\nos.environ['THEIRS_RAN'] = '1'\n")
    from gpudash.job.launch import job_env

    env = job_env(str(tmp_path / "nobody.sock"), {**os.environ, "PYTHONPATH": str(theirs)})
    code = f"import os, sys; print(os.environ.get('THEIRS_RAN'), {wire.HOOKS_MODULE!r} in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["1", "False"], done.stderr


def test_a_shadowed_sitecustomize_that_runs_the_ones_it_shadows_runs_once(tmp_path: Path) -> None:
    """Theirs, behind the bootstrap on the path, runs every other ``sitecustomize`` but its own (as
    many do): each runs once, the bootstrap is not run again from theirs (the job's lines stopped,
    and the dashboard's pane with them, when the bootstrap looked before its own folder)."""
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "sitecustomize.py").write_text(
        "import importlib.machinery, importlib.util, os, sys\n"
        "os.environ['THEIRS_RAN'] = str(int(os.environ.get('THEIRS_RAN', '0')) + 1)\n"
        "here = os.path.dirname(os.path.abspath(__file__))\n"
        "rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]\n"
        "spec = importlib.machinery.PathFinder.find_spec('sitecustomize', rest)\n"
        "if spec and spec.loader and int(os.environ['THEIRS_RAN']) < 5:\n"
        "    spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
    )
    from gpudash.job.launch import job_env

    env = job_env(str(tmp_path / "nobody.sock"), {**os.environ, "PYTHONPATH": str(theirs)})
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.environ['THEIRS_RAN'])"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout.split() == ["1"], done.stderr


@pytest.mark.slow
def test_the_bootstrap_puts_one_package_of_gpudashs_in_the_jobs_modules(tmp_path: Path) -> None:
    """The bootstrap's folder, first on the job's path, holds ``sitecustomize`` and one package: once
    the job has imported torch (its hooks in), every module of gpudash's in the job is that package's,
    the hooks' under the name ``gpudash.track()`` looks for."""
    from gpudash.job.launch import BOOT_DIR, job_env

    assert sorted(p.name for p in BOOT_DIR.iterdir() if p.name != "__pycache__") == ["gpudash_boot", "sitecustomize.py"]
    code = "import sys, torch; print(' '.join(sorted(m for m in sys.modules if m.startswith('gpudash'))))"
    env = job_env(str(tmp_path / "nobody.sock"))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    names = done.stdout.split()
    assert wire.HOOKS_MODULE in names and all(n.partition(".")[0] == "gpudash_boot" for n in names), done.stderr
