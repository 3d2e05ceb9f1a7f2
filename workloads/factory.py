"""Creating a workload: the family's module is imported only when one is built (torch comes with it)."""

from __future__ import annotations

import importlib
from typing import Any

from workloads.base import Workload, WorkloadOptions
from workloads.registry import family


def build(name: str, device: Any, options: WorkloadOptions | None = None) -> Workload:
    """Create and set up the workload ``name`` on ``device`` (a torch.device or a string)."""
    info = family(name)
    cls = getattr(importlib.import_module(info.module), info.class_name)
    return cls(device, options)
