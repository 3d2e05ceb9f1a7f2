"""Textual's private names the dashboard's app needs, in one place (an adapter allowed by
tests/test_private_apis.py; ``footer.py`` and ``render_cache.py`` are the others on Textual's side).

Textual has no public hook for an exception nothing caught: it lands in ``App._handle_exception``,
which makes the app exit with status 1 and queues a full-screen traceback in
``App._exit_renderables``, printed on the terminal once the app has exited (asked for in
Textualize/textual#2818, closed without a public hook). ``QuietCrashApp`` calls
``unhandled_exception`` first and drops that traceback: the dashboard writes it to a log file and
prints one line instead. Should Textual rename either name, the crash test of
tests/test_replay_hostile.py fails (a traceback on the terminal, or an ``AttributeError``).
"""

from __future__ import annotations

from textual.app import App, ReturnType


class QuietCrashApp(App[ReturnType]):
    """An ``App`` that hands an exception nothing caught to ``unhandled_exception`` and prints no
    traceback of it on the terminal (Textual still exits with status 1)."""

    def unhandled_exception(self, error: Exception) -> None:
        """An exception nothing caught, before Textual exits: override to report it."""

    def _handle_exception(self, error: Exception) -> None:
        self.unhandled_exception(error)
        super()._handle_exception(error)
        self._exit_renderables.clear()  # Textual's full-screen traceback: reported by unhandled_exception instead
