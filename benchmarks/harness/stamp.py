"""The environment a case ran in, taken one way for every case: the device, torch and CUDA, Python,
the checkout's commit, the date and how loaded the host was. torch is never imported for it: its
version is the installed package's, and CUDA's and the GPU's name are read only where the case
imported torch itself."""

from __future__ import annotations

import datetime as dt
import os
import platform
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def load_average() -> float | None:
    """The host's 1-minute load average (None where the OS has none)."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def commit(tree: Path = ROOT) -> str | None:
    """The checkout's commit, ``+dirty`` when it has changes (None: not a git checkout)."""
    try:
        head = subprocess.run(
            ["git", "-C", str(tree), "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True
        )
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", str(tree), "status", "--porcelain"], capture_output=True, text=True)
    except OSError:
        return None
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def gpu_names() -> list[str]:
    """The machine's GPUs by name, as ``nvidia-smi`` lists them (none: no NVIDIA driver here)."""
    try:
        done = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line.strip() for line in done.stdout.splitlines() if line.strip()] if done.returncode == 0 else []


def device_name(device: str) -> str:
    """The GPU's name for a CUDA device (``auto``: the machine's GPUs, where it has any), else the CPU's.
    torch answers where the case loaded it; ``nvidia-smi`` otherwise."""
    torch: Any = sys.modules.get("torch")
    if device.startswith("cuda") and torch is not None and torch.cuda.is_available():
        index = int(device.split(":")[1]) if ":" in device else 0
        return str(torch.cuda.get_device_name(index))
    if device.startswith("cuda") or device == "auto":
        names = gpu_names()
        if names:
            return " + ".join(names)
    return f"CPU ({platform.processor() or platform.machine()}, {os.cpu_count()} cores)"


def stamp(device: str, load_before: float | None) -> dict[str, Any]:
    """The environment of a run on ``device`` ("cuda", "cpu", …), taken as it ends; ``load_before``
    is the load average when it began."""
    torch: Any = sys.modules.get("torch")
    try:
        torch_version: str | None = version("torch")
    except PackageNotFoundError:
        torch_version = None
    return {
        "device": device_name(device),
        "torch": torch_version,
        "cuda": getattr(getattr(torch, "version", None), "cuda", None),
        "python": platform.python_version(),
        "commit": commit(),
        "date": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "host": platform.node(),
        "cpus": os.cpu_count(),
        "host_load": load_before,
    }


def stamp_line(s: dict[str, Any]) -> str:
    """A stamp in one line: "NVIDIA H100 80GB HBM3 · torch 2.11.0 (CUDA 13.0) · python 3.12.3 · …",
    what it does not know left out."""
    cuda = f" (CUDA {s['cuda']})" if s.get("cuda") else ""
    host = (f"{s['cpus']} CPUs" if s.get("cpus") else "") + (f" on {s['host']}" if s.get("host") else "")
    host += f", load {s['host_load']}" if s.get("host_load") is not None else ""
    parts = [
        str(s.get("device") or "an unknown device"),
        f"torch {s['torch']}{cuda}" if s.get("torch") else "",
        f"python {s['python']}" if s.get("python") else "",
        host,
        f"commit {s['commit']}" if s.get("commit") else "",
        str(s.get("date") or ""),
    ]
    return " · ".join(p for p in parts if p)
