"""``gpudash replay PATH [NODE.csv ...]``: a recorded CSV in the dashboard."""

from __future__ import annotations

import os
from typing import Any

from gpudash.arguments.argtypes import UsageError
from gpudash.cli.messages import fail
from gpudash.cli.settings import themed_user_config


def replay(given: dict[str, Any]) -> int:
    """Check the files can be read and the theme exists, then open the dashboard on them."""
    path = given["path"]
    for each in (path, *given.get("nodes", ())):
        if not os.path.isfile(each):
            return fail(f"no such file: {each}")
        if not os.access(each, os.R_OK):
            return fail(f"cannot read {each}")
    try:
        user_config = themed_user_config(given.get("theme"))
    except UsageError as exc:
        return fail(str(exc))
    from gpudash.tui.entry_points import run_replay

    return int(run_replay(path, given.get("follow", False), user_config, given.get("nodes", ())) or 0)
