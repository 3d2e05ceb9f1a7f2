"""Shared test setup: the `gpu` marker skips without CUDA; a GPU run is one process (no xdist
workers); the JPEG cache and the settings file go to temp dirs."""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

_SELECTS_GPU = re.compile(r"(?<!not )\b(multi)?gpu\b")

# Each xdist worker is a process of its own, and so is each gpudash child a test starts: left to
# itself, torch in every one of them runs as many threads as the machine has cores, and on the
# 2-core CI machine they preempt one another (docs/testing.md: a ResNet-50 case took 20.4 s in the
# whole suite and 1.8 s alone). One thread each, set before any test imports torch; a user's OMP_NUM_THREADS
# is kept.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")

# Every gpudash and job process a test starts imports gpudash's modules, and every xdist worker
# rewrites the test modules' asserts: with PYTHONDONTWRITEBYTECODE set (as on this project's
# machines and CI), each of them compiled all of that from source again (docs/testing.md). The
# suite's processes keep their bytecode in one folder of their own instead (PYTHONPYCACHEPREFIX:
# nothing lands beside a source, nor in a test's folder); set here, in the controller, before xdist
# starts its workers, so they and every process they start inherit it. A user's prefix is kept.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
os.environ.setdefault("PYTHONPYCACHEPREFIX", os.path.join(tempfile.gettempdir(), f"pycache-of-tests-{os.getuid()}"))
sys.dont_write_bytecode = False
sys.pycache_prefix = os.environ["PYTHONPYCACHEPREFIX"]

# Every process the suite starts exits without the collector's scan of torch's heap
# (tests/interpreter/sitecustomize.py says why); set in the controller, before xdist starts its
# workers. A test that gives a process a PYTHONPATH of its own leaves it out there, nothing else.
_EXIT_QUICKLY = str(Path(__file__).resolve().parent / "interpreter")
if _EXIT_QUICKLY not in os.environ.get("PYTHONPATH", "").split(os.pathsep):
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, (_EXIT_QUICKLY, os.environ.get("PYTHONPATH"))))


def pytest_configure(config: pytest.Config) -> None:
    """``-m gpu`` (or ``multigpu``) runs in one process whatever ``addopts``' ``-n`` says: two tests
    sharing a GPU would time each other and the sanitizer's runs, and fight for its memory. Set
    here, before xdist (``trylast``) decides whether to start its workers. The quick subset's
    check (``tests/quick_check.py``) names the tests that belong to the slow set."""
    from tests.quick_check import QuickCheck

    config.pluginmanager.register(QuickCheck(), "gpudash-quick-check")
    if _SELECTS_GPU.search(config.getoption("markexpr", "") or "") and hasattr(config.option, "numprocesses"):
        config.option.numprocesses = 0
        config.option.dist = "no"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    """With ``GPUDASH_SUITE_ACCOUNT=FILE``, each test's CPU seconds (its worker's and those of the
    processes it started and waited for) and wall seconds, one JSON line each: where the suite's
    time goes, apart from how busy the machine was (docs/testing.md)."""
    path = os.environ.get("GPUDASH_SUITE_ACCOUNT")
    if not path:
        yield
        return
    import json
    import resource
    import time

    def cpu() -> float:
        own, waited = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + waited.ru_utime + waited.ru_stime

    cpu_before, began = cpu(), time.monotonic()
    yield
    spent = {"test_cpu_s": round(cpu() - cpu_before, 3), "wall_s": round(time.monotonic() - began, 3)}
    line = {"test": item.nodeid, **spent}
    with open(path, "a", encoding="utf-8") as account:
        account.write(json.dumps(line) + "\n")


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:  # pragma: no cover
        return False
    return torch.cuda.is_available()


def _cuda_count() -> int:
    import torch

    return torch.cuda.device_count() if _cuda_available() else 0


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if any("gpu" in item.keywords for item in items) and not _cuda_available():
        skip = pytest.mark.skip(reason="needs a CUDA GPU")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)
    if any("multigpu" in item.keywords for item in items) and _cuda_count() < 2:
        skip = pytest.mark.skip(reason="needs 2 or more CUDA GPUs")
        for item in items:
            if "multigpu" in item.keywords:
                item.add_marker(skip)


@pytest.fixture(autouse=True, scope="session")
def _private_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Keep the generated JPEG out of the user's cache while testing."""
    os.environ.setdefault("GPUDASH_CACHE_DIR", str(tmp_path_factory.mktemp("gpudash-cache")))


@pytest.fixture(autouse=True, scope="session")
def _private_config(tmp_path_factory: pytest.TempPathFactory) -> None:
    """No user's settings file (gpudash/arguments/config.py) changes what a test runs, and none is written:
    the settings file lives in an empty temp dir (tests of it point XDG_CONFIG_HOME elsewhere)."""
    os.environ["XDG_CONFIG_HOME"] = str(tmp_path_factory.mktemp("xdg-config"))


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A TMPDIR of its own with a short path: the workload's Unix sockets live there, and gpudash
    refuses a temp dir over 75 bytes (an AF_UNIX path holds 107; pytest-xdist's paths are longer)."""
    path = Path(tempfile.mkdtemp(prefix="gd-", dir="/tmp" if os.path.isdir("/tmp") else None))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def compiles_forgotten() -> Iterator[None]:
    """A test that calls torch.compile in this process: dynamo's caches and counters cleared after
    it, so that a later test of the process (a job's hooks run in-process) sees no job that compiled."""
    yield
    import torch  # here: a test that compiles nothing does not import it for this

    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()


@pytest.fixture
def flops_sent(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, list[dict[str, Any]]]]:
    """The hooks' FLOP count (``gpudash_boot.step_flops.StepFlopsCount``) in this process, no fault
    injected, and the messages it sends; closed after, nothing of its modes left behind."""
    import torch  # here: a test that counts nothing does not import it for this
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    from gpudash.boot.gpudash_boot import step_flops

    monkeypatch.delenv("GPUDASH_JOB_FAULT", raising=False)
    messages: list[dict[str, Any]] = []
    part = step_flops.StepFlopsCount(torch, messages.append)
    try:
        yield part, messages
    finally:
        part.close()
        assert _get_current_dispatch_mode_stack() == []  # nothing of the count's left behind
