"""Run by every Python process of the test suite (conftest.py puts this folder first on
``PYTHONPATH``): its xdist workers and every gpudash, job, torchrun agent and rank a test starts.

At exit, once every atexit handler has run (this one, registered first, runs last), Python's
collector is frozen: the interpreter's finalization then frees modules by their reference counts
without scanning, again and again, the heap torch and ``torch._dynamo`` leave (about 300,000
objects). That scanning took 1.3–2.8 s of CPU (median 1.5 s) at the exit of every process that had
imported torch on the suite's 2-core machine, about 0.4 s with it frozen (docs/testing.md;
``python -m benchmarks run suite_exit_cost``): a fifth of a small job's whole run. Only the
finalizers of objects still in reference cycles at exit are skipped, which Python never promises
to run. Not something gpudash does to a user's job: their interpreter exits as they wrote it.
"""

import atexit
import gc
import importlib.machinery
import importlib.util
import os
import sys

atexit.register(gc.freeze)


def _account_for_this_process(path: str) -> None:
    """Append this process's CPU seconds, command, test and whether it imported torch to ``path`` (one
    JSON line), at exit: what ``tests/suite_account.py`` reads."""
    import json
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    line = {
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
        "argv": sys.argv[:6],
        "test": os.environ.get("PYTEST_CURRENT_TEST", ""),
        "torch": "torch" in sys.modules,
    }
    with open(path, "a", encoding="utf-8") as account:
        account.write(json.dumps(line) + "\n")


if os.environ.get("GPUDASH_SUITE_ACCOUNT"):  # where the suite's CPU goes: docs/testing.md
    atexit.register(_account_for_this_process, os.environ["GPUDASH_SUITE_ACCOUNT"])


def _run_the_one_shadowed() -> None:
    """Run the ``sitecustomize`` this one shadows (Debian's Python has one), as Python would have:
    the next after this folder on ``sys.path`` (gpudash's bootstrap, before it in a job's, has run this one)."""
    here = os.path.dirname(os.path.abspath(__file__))
    folders = [os.path.abspath(p or os.curdir) for p in sys.path]
    rest = sys.path[folders.index(here) + 1 :] if here in folders else sys.path
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


_run_the_one_shadowed()
