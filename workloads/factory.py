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
    if getattr(cls, "info", None) is not info:  # a class for any workload of its kind (workloads.user)
        cls = type(cls.__name__, (cls,), {"info": info})
    return cls(device, options)
