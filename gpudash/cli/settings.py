"""A command's options with their defaults, lowest first: ``DEFAULTS`` (``gpudash/cli/options.py``),
the user's settings file (``gpudash/arguments/config.py``, each of its problems a warning), then
the options given; ``--theme`` checked and laid over the settings file's. Torch-free; Textual's
themes are read only when a theme is named."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from gpudash.arguments.argtypes import UsageError
from gpudash.cli.messages import warn
from gpudash.cli.options import DEFAULTS


def check_theme(name: str | None) -> None:
    """Raise UsageError unless ``name`` is one of Textual's themes (None: nothing to check)."""
    if name is None:
        return
    from textual.theme import BUILTIN_THEMES

    if name not in BUILTIN_THEMES:
        raise UsageError(f"--theme {name}: not a Textual theme; choose one of: {', '.join(sorted(BUILTIN_THEMES))}")


def user_config() -> Any:
    """The settings file, each of its problems one warning line on stderr."""
    from gpudash.arguments import config

    loaded = config.load()
    for problem in loaded.problems:
        warn(problem)
    return loaded


def with_defaults(given: dict[str, Any], settings: Any) -> argparse.Namespace:
    """The options given, then the settings file's (``settings``), then ``DEFAULTS``."""
    from workloads.registry import DEFAULT_FAMILY

    values = {**DEFAULTS, "workload": DEFAULT_FAMILY}
    values.update(settings.option_defaults(given.get("workload")))
    values.update(given)
    return argparse.Namespace(**values)


def with_theme(settings: Any, theme: str | None) -> Any:
    """The settings file's settings with ``--theme`` on top (None: as they are)."""
    if theme is None:
        return settings
    return dataclasses.replace(settings, values={**settings.values, "theme": theme})


def themed_user_config(theme: str | None) -> Any:
    """The settings file's settings with ``--theme`` on top (UsageError for an unknown theme)."""
    check_theme(theme)
    return with_theme(user_config(), theme)
