"""``gpudash watch --once``: the box's GPUs and their processes now, as a table or (``--json``) as
JSON for scripts, then exit. Imports neither Textual nor torch (``python -X importtime`` says so:
``tests/test_watch.py``).

The JSON's schema (``SCHEMA``; a new field may be added, none renamed or removed)::

    {"schema": "gpudash-watch/1", "time": ISO 8601, "driver": str | null,
     "gpm_unavailable": str | null,
     "gpus": [{"index", "name", "uuid", "utilization_pct",
               "sm_active_pct", "tensor_active_pct", "dram_active_pct",
               "memory_bandwidth_pct", "memory_used_mib", "memory_total_mib", "power_w",
               "sm_clock_mhz", "temperature_c", "throttle_reasons": [str] | null,
               "processes": [{"pid", "user", "command", "used_memory_mib", "type"}] | null,
               "errors": {query: why}}],
     "mig": [{"label", "sm_active_pct", "tensor_active_pct", "dram_active_pct"}]}

A figure NVML did not give is ``null`` (and its query's reason is in ``errors``); ``processes``
is null when NVML could not list them, ``[]`` when there are none; ``user`` and ``command`` are
``"?"`` for a process this machine's ``/proc`` does not show (another pid namespace).

``sm_active_pct``, ``tensor_active_pct`` and ``dram_active_pct`` are GPM's (Hopper and newer), over
``GPM_WINDOW_S`` before the read: the share of the SMs' time they were busy, ran tensor cores, and
the DRAM bandwidth used (``utilization_pct`` is NVML's "a kernel ran"). Null where GPM is not
read; ``gpm_unavailable`` says why in one line (null: every GPU gives them). Under MIG each GPU
instance's are in ``mig``, labelled ``GPU 0 · GI 1`` (the table: a line under its GPU).

Exit status: 0 done; 1 NVML cannot be used here (no driver, no GPU: the one line says why, on
stderr, and nothing goes to stdout).
"""

from __future__ import annotations

import datetime as _dt
import json
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from gpudash.core.protocol import MIG_FIGURES, ExitCode, MigReading
from gpudash.host.nvml import NvmlSampler
from gpudash.host.nvml_watch import gpm_window
from gpudash.watch.snapshot import GpuState, Snapshot, take

SCHEMA = "gpudash-watch/1"
NA = "n/a"
COMMAND_WIDTH = 72  # characters of a command in the table (the JSON has it whole)
GPM_WINDOW_S = 0.25  # the span GPM's figures cover: two samples this far apart (GPM has no "now")


def as_dict(snap: Snapshot, now: _dt.datetime | None = None) -> dict[str, Any]:
    """The snapshot in the JSON's schema (``SCHEMA``)."""
    when = (now or _dt.datetime.now().astimezone()).isoformat(timespec="seconds")
    gpus = [_gpu(g) for g in snap.gpus]
    return {
        "schema": SCHEMA,
        "time": when,
        "driver": snap.driver,
        "gpm_unavailable": snap.gpm_unavailable,
        "gpus": gpus,
        "mig": [  # under MIG: each GPU instance's GPM figures
            {"label": r.label, **_gpm_figures(r)} for r in snap.mig
        ],
    }


def _gpu(g: GpuState) -> dict[str, Any]:
    return {
        "index": g.index,
        "name": g.name,
        "uuid": g.uuid,
        "utilization_pct": g.utilization_pct,
        **_gpm_figures(g),
        "memory_bandwidth_pct": g.memory_bandwidth_pct,
        "memory_used_mib": _round(g.memory_used_mib),
        "memory_total_mib": _round(g.memory_total_mib),
        "power_w": g.power_w,
        "sm_clock_mhz": g.sm_clock_mhz,
        "temperature_c": g.temperature_c,
        "throttle_reasons": g.throttle_reasons,
        "processes": None
        if g.processes is None
        else [
            {
                "pid": p.pid,
                "user": p.user,
                "command": p.command,
                "used_memory_mib": _round(p.used_memory_mib),
                "type": "+".join(p.kinds),
            }
            for p in g.processes
        ],
        "errors": dict(g.failed),
    }


def _gpm_figures(reading: GpuState | MigReading) -> dict[str, float | None]:
    """GPM's figures of a GPU or of a MIG instance (``MIG_FIGURES``: the SMs', tensor cores' and
    DRAM's activity), to one decimal."""
    return {k: _round(getattr(reading, k)) for k in MIG_FIGURES}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def _num(value: float | None, fmt: str, unit: str = "") -> str:
    return NA if value is None else format(value, fmt) + unit


def _memory(used: float | None, total: float | None) -> str:
    if used is None:
        return NA
    return f"{used / 1024:.1f}/{total / 1024:.1f} GiB" if total else f"{used / 1024:.1f} GiB"


def table(snap: Snapshot) -> str:
    """Each GPU: a line of its figures, then its processes (pid, user, GPU memory, command)."""
    out: list[str] = []
    for g in snap.gpus:
        throttle = NA if g.throttle is None else (g.throttle.replace("|", ", ") or "none")
        head = f"GPU {g.index} · {g.name}" + (f" · {g.uuid}" if g.uuid else "")
        figures = [f"kernel-active {_num(g.utilization_pct, '.0f', '%')}"]
        if g.gpm:  # GPM's: what the SMs did, beside "a kernel ran"
            figures += [
                f"SM {_num(g.sm_active_pct, '.0f', '%')}",
                f"tensor {_num(g.tensor_active_pct, '.0f', '%')}",
                f"DRAM {_num(g.dram_active_pct, '.0f', '%')}",
            ]
        figures += [
            f"mem-bw {_num(g.memory_bandwidth_pct, '.0f', '%')}",
            f"memory {_memory(g.memory_used_mib, g.memory_total_mib)}",
            _num(g.power_w, ".0f", " W"),
            _num(g.sm_clock_mhz, ".0f", " MHz"),
            _num(g.temperature_c, ".0f", "°C"),
            f"throttle: {throttle}",
        ]
        out += [head, "  " + " · ".join(figures)]
        for r in (r for r in snap.mig if r.label.startswith(f"GPU {g.index} ")):  # its MIG instances
            gpm = (
                f"{name} {_num(getattr(r, k), '.0f', '%')}"
                for name, k in zip(("SM", "tensor", "DRAM"), MIG_FIGURES, strict=True)
            )
            out.append(f"  └ {r.label}: " + " · ".join(gpm))
        if g.processes is None:
            why = dict(g.failed).get("processes", "")
            out.append(f"  processes: {NA}" + (f" (NVML: {why})" if why else ""))
        elif not g.processes:
            out.append("  no processes")
        else:
            out.append(f"  {'PID':>8}  {'USER':<12} {'GPU MEM':>9}  COMMAND")
            for p in g.processes:
                mem = NA if p.used_memory_mib is None else f"{p.used_memory_mib / 1024:.2f} GiB"
                command = p.command if len(p.command) <= COMMAND_WIDTH else p.command[: COMMAND_WIDTH - 1] + "…"
                out.append(f"  {p.pid:>8}  {p.user[:12]:<12} {mem:>9}  {command}")
        failed = [f"{q}: {why}" for q, why in g.failed if q != "processes"]
        if failed:
            out.append(f"  {NA} above: NVML failed ({'; '.join(failed)})")
    if snap.gpm_unavailable:
        out.append(snap.gpm_unavailable)
    if snap.driver:
        out.append(f"driver {snap.driver}")
    return "\n".join(out)


def run_once(gpus: Sequence[int] | None, as_json: bool, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Read the watched GPUs once and print them; the exit status (``ExitCode``)."""
    out, err = out or sys.stdout, err or sys.stderr
    sampler = NvmlSampler(None, gpus=gpus)
    try:
        sampler.open()
        gpm_window(sampler, GPM_WINDOW_S)
        snap = take(sampler)
    finally:
        sampler.stop()
    if snap.unavailable is not None:
        print(f"gpudash watch: NVML unavailable: {snap.unavailable}", file=err)
        return ExitCode.FAILED
    if as_json:
        json.dump(as_dict(snap), out, indent=2)
        out.write("\n")
    else:
        print(table(snap), file=out)
    return ExitCode.OK
