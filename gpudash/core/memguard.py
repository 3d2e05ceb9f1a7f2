"""The memory guard: the workload process runs under a data limit, a share of the machine's RAM.

``apply_memory_guard()`` (first thing in the workload process) sets the soft ``RLIMIT_DATA`` to
``GPUDASH_MEMORY_LIMIT``: ``80%`` by default, any ``N%`` of the RAM (MemTotal, or the cgroup's
limit when lower), a size such as ``12G`` or ``512M``, or ``off``. A runaway allocation then
fails inside the process, where gpudash reports it ("out of host memory: …"), instead of
growing until the kernel's OOM killer picks a victim on the whole host.

Why ``RLIMIT_DATA`` and not ``RLIMIT_AS``: since Linux 4.7 the data limit counts every private
writable mapping (the heap and anonymous ``mmap``: glibc's large ``malloc``\\s, torch's CPU
tensors), which is what a runaway batch allocates, while the address-space limit counts every
reservation too; the CUDA driver reserves tens of GiB of address space at initialisation
(unified addressing), more than the RAM, so ``RLIMIT_AS`` breaks CUDA. Those reservations are
mapped without write access, which ``RLIMIT_DATA`` does not count (a CUDA run under the guard
is a GPU test: ``tests/test_limits.py -m gpu``). Measured here on torch 2.14
(CPU): importing torch and torchvision takes 0.85 GiB of the limit; under a 4 GiB limit
``torch.empty(6 GiB)`` raises RuntimeError ("DefaultCPUAllocator: can't allocate memory"), a
Python list of 10⁹ items MemoryError, numpy's ``zeros`` its MemoryError, and 1 GiB works.
Forked DataLoader workers inherit the limit, each for itself. If a CUDA setup fails under it,
``GPUDASH_MEMORY_LIMIT=off`` turns it off.
"""

from __future__ import annotations

import os
import re
import resource
import signal
from collections.abc import Mapping

from gpudash.core.memory_kinds import size
from workloads.limits import data_limit, machine_ram

ENV = "GPUDASH_MEMORY_LIMIT"
DEFAULT = "80%"
OOM_SUSPECT_SHARE = 0.5  # a SIGKILL with RSS at least this share of the RAM is reported as probably OOM

_SIZE = re.compile(r"^(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?$", re.IGNORECASE)
_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


def parse_limit(text: str, ram: int | None) -> int | None:
    """Bytes for a ``GPUDASH_MEMORY_LIMIT`` value (None: ``off``); ValueError with one line."""
    value = text.strip().lower()
    if value in ("off", "none", "0"):
        return None
    if value.endswith("%"):
        try:
            share = float(value[:-1])
        except ValueError:
            share = -1.0
        if not 0 < share <= 100:
            raise ValueError(f"{ENV}={text}: a share must be more than 0% and at most 100%")
        if ram is None:
            raise ValueError(f"{ENV}={text}: the machine's RAM cannot be read here; give a size such as 12G")
        return int(ram * share / 100)
    match = _SIZE.match(value)
    if not match:
        raise ValueError(f"{ENV}={text}: expected off, a share such as 80% or a size such as 12G")
    size = int(float(match[1]) * _UNITS[match[2].lower()])
    if size <= 0:
        raise ValueError(f"{ENV}={text}: a size must be more than 0 (off turns the guard off)")
    return size


def check_setting(environ: Mapping[str, str] = os.environ) -> None:
    """Raise ValueError (one line) when ``GPUDASH_MEMORY_LIMIT`` is not a limit: checked by the
    command before anything starts, as the workload process will read it."""
    parse_limit(environ.get(ENV, DEFAULT), machine_ram())


def apply_memory_guard(environ: Mapping[str, str] = os.environ) -> int | None:
    """Lower this process's soft RLIMIT_DATA to the guard's limit; returns it (None: off).

    Never raises the limit: a lower one already set (``ulimit -d``) stays."""
    limit = parse_limit(environ.get(ENV, DEFAULT), machine_ram())
    if limit is None:
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    if soft == resource.RLIM_INFINITY or limit < soft:
        resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))
    return data_limit()


def share_among(processes: int) -> int | None:
    """Lower this process's soft RLIMIT_DATA to its 1/``processes`` share; returns the new limit.
    The launcher of a data-parallel run does this before it starts its ranks, which inherit the
    share: the node's guard is divided before any rank imports torch, never after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if soft == resource.RLIM_INFINITY or processes <= 1:
        return data_limit()
    resource.setrlimit(resource.RLIMIT_DATA, (soft // processes, hard))
    return data_limit()


def out_of_memory_message(exc: BaseException) -> str | None:
    """A host allocation that failed (the guard's limit, or the machine's), as one line; None
    for any other exception."""
    text = str(exc).strip()
    if isinstance(exc, MemoryError):
        detail = text.splitlines()[0] if text else "an allocation failed"
    elif isinstance(exc, RuntimeError) and "can't allocate memory" in text:
        asked = re.search(r"tried to allocate (\d+) bytes", text)
        detail = f"torch could not allocate {size(int(asked[1]))}" if asked else "torch could not allocate"
    else:
        return None
    limit = data_limit()
    where = f" (the workload process may use {size(limit)}: {ENV}={os.environ.get(ENV, DEFAULT)})" if limit else ""
    return f"out of host memory: {detail}{where}"


def killed_note(exitcode: int | None, rss: int | None, ram: int | None) -> str:
    """' — probably out of memory (RSS 23.1 GiB of 23.5 GiB)' for a SIGKILL whose last RSS
    was high (at least OOM_SUSPECT_SHARE of the RAM), else ''."""
    if exitcode != -signal.SIGKILL or rss is None or not ram or rss < OOM_SUSPECT_SHARE * ram:
        return ""
    return f" — probably out of memory (RSS {size(rss)} of {size(ram)})"
