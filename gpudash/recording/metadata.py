"""A recording's metadata, the JSON beside its CSV (``run.csv`` → ``run.json``): what is known before
the workload starts (GPU, driver, configuration, start time, why NVML was unavailable, host,
gpudash's version), what its "started" event adds (torch, CUDA, device), and a dashboard's
recording begun mid-run. ``CsvRecorder`` (``gpudash.recording.record``) keeps it up to date."""

from __future__ import annotations

import dataclasses
import datetime as _dt
import os
import socket
from pathlib import Path
from typing import Any

from gpudash.core.protocol import Event, GpuInfo, RunConfig
from gpudash.core.start_note import StartNote


def gpudash_version() -> str:
    """The installed version; from a source tree that is not installed, its pyproject.toml's."""
    try:
        from importlib.metadata import version

        return version("gpudash")
    except Exception:  # noqa: BLE001 - not installed
        pass
    try:
        import tomllib

        with open(Path(__file__).resolve().parents[1] / "pyproject.toml", "rb") as f:
            return str(tomllib.load(f)["project"]["version"]) + " (source tree)"
    except Exception:  # noqa: BLE001 - neither
        return "unknown"


def meta_path_for(csv_path: str | os.PathLike[str]) -> Path:
    """``run.csv`` → ``run.json`` (any other name: name + ``.json``)."""
    p = Path(csv_path)
    return p.with_suffix(".json") if p.suffix.lower() == ".csv" else p.with_name(p.name + ".json")


def run_metadata(config: RunConfig, gpu_info: GpuInfo | None = None, **extra: Any) -> dict[str, Any]:
    """The metadata known before the workload starts (the recorder adds the rest)."""
    meta: dict[str, Any] = {
        "gpudash_version": gpudash_version(),
        "start_time": _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "hostname": socket.gethostname(),
        "config": dataclasses.asdict(config),
        "gpu_name": None,
        "gpu_names": [],
        "gpu_index": None,
        "gpus_sampled": [],  # the GPUs with per-GPU columns (NVML indexes, in the columns' order)
        "driver": None,
        "nvml_unavailable": None,
        "gpm_unavailable": None,  # why the GPM columns are empty (None: they were read, or no NVML at all)
        "torch_version": None,
        "cuda_version": None,
        "device": None,
    }
    if gpu_info is not None:
        meta.update(
            gpu_name=gpu_info.name,
            gpu_names=list(gpu_info.names),
            gpu_index=gpu_info.index,
            gpus_sampled=list(gpu_info.sampled),
            driver=gpu_info.driver,
            nvml_unavailable=gpu_info.unavailable,
            gpm_unavailable=gpu_info.gpm_unavailable,
        )
    meta.update(extra)
    return meta


def started_metadata(event: Event, meta: dict[str, Any]) -> dict[str, Any]:
    """The metadata a run's "started" event gives (what ``meta`` has stays unless replaced): its
    configuration and what it said of itself (``StartNote``; a job's settings as ``started.settings``,
    an object) as ``started``; the configuration's defaults, ``null`` until then, become what started."""
    note = event.data if isinstance(event.data, StartNote) else StartNote()
    running = event.running
    started = {**(running.said() if running is not None else {}), **note.said()}
    config = dict(meta.get("config") or {})
    for key in ("workload", "variant", "batch_size", "image_size", "workers"):
        if config.get(key) is None and started.get(key) not in (None, "", 0):  # 0: a job's batches not counted
            config[key] = started[key]
    return {
        "torch_version": note.torch or meta.get("torch_version"),
        "cuda_version": note.cuda or meta.get("cuda_version"),
        "device": (running.device if running is not None else "") or meta.get("device"),
        "device_name": note.device_name,
        "config": config,
        "started": started,
    }


def dashboard_metadata(
    config: RunConfig,
    gpu_info: GpuInfo | None,
    started: Event | None,
    *,
    device: str,
    run_s: float,
    running: dict[str, Any],
) -> dict[str, Any]:
    """The metadata of a recording begun from the dashboard, possibly mid-run: it never sees
    the child's "started" event, so what the session kept of it goes in now."""
    meta = run_metadata(
        config,
        gpu_info,
        recorded_by="gpudash dashboard",
        device=device,
        recording_started_at_run_s=round(run_s, 3),
        running_at_start=running,
    )
    if started is not None:
        meta.update(started_metadata(started, meta))
    return meta
