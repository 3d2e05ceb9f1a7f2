"""``gpudash list``: the workload families, their variants and defaults, and the knobs."""

from __future__ import annotations

from typing import Any

from gpudash.cli.messages import fail
from gpudash.core.protocol import ExitCode


def list_workloads(given: dict[str, Any]) -> int:
    """Print every family and the knobs (``-w NAME``: that family only)."""
    from workloads import knobs
    from workloads.catalog_types import WorkloadError
    from workloads.registry import describe, family

    if "workload" in given:
        try:
            only = family(given["workload"]).name
        except WorkloadError as exc:
            return fail(str(exc))
        print(describe(only))
        return ExitCode.OK
    print(describe())
    print()
    print(knobs.describe())
    return ExitCode.OK
