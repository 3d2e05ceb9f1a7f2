"""What a job's "started" event says of it: its torch, CUDA, device, optimizer and settings, as its
lead rank's hooks said them at its first step, beside the run's configuration. Torch-free."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpudash.job import command as job_command


def started_details(
    config: dict[str, str], lead: dict[str, Any], pid: int | None, command: Sequence[str]
) -> dict[str, str]:
    """The started event's details: ``config`` (the run's configuration) and the lead rank's hello."""
    return {
        **config,
        "torch": str(lead.get("torch", "")),
        "cuda": str(lead.get("cuda", "") or ""),
        "pid": str(pid or ""),
        "device_name": str(lead.get("gpu_name", "") or ""),
        "gpu_uuid": str(lead.get("gpu_uuid", "") or ""),
        "optimizer": str(lead.get("optimizer", "")),
        "settings": str(lead.get("settings", "")),  # its training DataLoader's arguments and site, its flags
        "command": job_command.display(command),
    }
