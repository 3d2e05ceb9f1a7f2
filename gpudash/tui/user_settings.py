"""The dashboard's side of the settings file (``gpudash/arguments/config.py``): start on its theme, show
what was wrong with it, and save the theme the palette picks."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gpudash.arguments.config import UserConfig, save_setting

if TYPE_CHECKING:  # pragma: no cover
    from textual.app import App
    from textual.theme import Theme

Say = Callable[..., None]  # the dashboard's message bar: say(text, severity="info", toast=False)


def keep_user_settings(app: App[Any], say: Say, config: UserConfig) -> None:
    """Call once the app is mounted: problems of the file pop up (through ``say``), its theme
    applies (an unknown one is a warning), and from now on every theme change is written back
    to the file."""
    for problem in config.problems:
        say(problem, "warning", toast=True)
    theme = config.get("theme")
    if theme is not None and theme in app.available_themes:
        app.theme = theme
    elif theme is not None:
        say(
            f"config {config.path}: theme {theme!r} is not a Textual theme (ctrl+p, Change theme lists "
            f"them); using {app.theme}",
            "warning",
            toast=True,
        )
    current = app.theme

    def save(new: Theme) -> None:
        nonlocal current
        if new.name == current:  # the start-up theme being applied, or no change
            return
        current = new.name
        why_not = save_setting("theme", new.name, config.path)
        if why_not is None:
            say(f"theme {new.name} saved in {config.path}")
        else:
            say(f"theme {new.name} not saved: {why_not}", "warning", toast=True)

    app.theme_changed_signal.subscribe(app, save)
