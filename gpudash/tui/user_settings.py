"""The dashboard's side of the settings file (``gpudash/config.py``): start on its theme, show
what was wrong with it, and save the theme the palette picks."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpudash.config import UserConfig, save_setting

if TYPE_CHECKING:  # pragma: no cover
    from textual.theme import Theme

    from gpudash.tui.app import GpuDashApp


def keep_user_settings(app: GpuDashApp, config: UserConfig) -> None:
    """Call once the app is mounted: problems of the file pop up, its theme applies (an unknown
    one is a warning), and from now on every theme change is written back to the file."""
    for problem in config.problems:
        app.say(problem, "warning", toast=True)
    theme = config.get("theme")
    if theme is not None and theme in app.available_themes:
        app.theme = theme
    elif theme is not None:
        app.say(f"config {config.path}: theme {theme!r} is not a Textual theme (ctrl+p, Change theme lists "
                f"them); using {app.theme}", "warning", toast=True)
    current = app.theme

    def save(new: Theme) -> None:
        nonlocal current
        if new.name == current:  # the start-up theme being applied, or no change
            return
        current = new.name
        why_not = save_setting("theme", new.name, config.path)
        if why_not is None:
            app.say(f"theme {new.name} saved in {config.path}")
        else:
            app.say(f"theme {new.name} not saved: {why_not}", "warning", toast=True)

    app.theme_changed_signal.subscribe(app, save)
