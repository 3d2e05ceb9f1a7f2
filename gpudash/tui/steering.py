"""The dashboard's steering keys and the notices they bring: each key asks the ``DashController``
(``controller.py``, Textual-free) and shows the ``Notice`` it returns in the message bar.

``SteeringApp`` is the base of ``GpuDashApp`` (``app.py``), which builds the controller, lays
out the screen and runs the source; this is the Textual side of the controls.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from textual.css.query import NoMatches
from textual.timer import Timer

from gpudash.core import protocol
from gpudash.tui import actions
from gpudash.tui.controller import DashController
from gpudash.tui.job_view import JobView
from gpudash.tui.notices import Notice, Severity, error, short_path
from gpudash.tui.screens import KnobsScreen, PickScreen, PromptScreen, TuneResultScreen
from gpudash.tui.state import DashState
from gpudash.tui.textual_adapter import QuietCrashApp
from gpudash.tui.widgets import MessageBar
from gpudash.tune.job import TuneAnswer, TuneJob, default_out_dir, parse_minutes
from workloads.catalog_types import WorkloadError
from workloads.registry import FAMILIES, parse_batch_size

DETAIL_TOAST_S = 12  # a toast of several lines (a diagnosis' remedies) stays this long


class SteeringApp(QuietCrashApp[int]):
    """The keys that steer a run (and the palette's commands for them), and the message bar
    that answers them."""

    controller: DashController  # set by the app
    replay: bool  # a recording: the steering keys only say why they do nothing
    toasts: bool  # a notice that asks for a toast also pops up
    save_dir: str | None  # where files the dashboard writes go (None: the working directory)
    tune_job: TuneJob | None = None  # the tune under way or last finished
    job: JobView | None = None  # the user's own command (gpudash -- CMD): its output pane and its quit
    _tune_timer: Timer | None = None

    @property
    def state(self) -> DashState:
        """The controller's, read-only here."""
        return self.controller.state

    def say(self, text: str, severity: str = "info", toast: bool = False) -> None:
        try:
            bar = self.query_one(MessageBar)
        except NoMatches:  # closing: the widgets are gone before the timers stop
            return
        bar.say(text, str(severity.value if isinstance(severity, Severity) else severity))
        if toast and self.toasts:
            error = severity == Severity.ERROR
            self.notify(text, severity="error" if error else "information", timeout=6 if error else 3)

    def tell(self, notices: Iterable[Notice | None]) -> None:
        for n in notices:
            if n is None:
                continue
            self.say(n.text, n.severity, n.toast and not n.detail)
            if n.toast and n.detail and self.toasts:  # the bar's line, and a toast that says more
                self.notify(
                    n.detail,
                    severity="error" if n.severity == Severity.ERROR else "information",
                    timeout=DETAIL_TOAST_S,
                )

    # -- the steering keys ------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == actions.REFUSED:  # the key's own action is disabled: say why, rather than nothing
            (name,) = parameters
            return not self._enabled(str(name))
        return self._enabled(action)

    def _enabled(self, action: str) -> bool:
        if action == actions.OUTPUT:  # a job's pane; for any other run the key's twin says where the output went
            return self.job is not None
        return self.controller.enabled(action, action in actions.STEERING)

    def shown_actions(self) -> list[actions.Action]:
        """The actions of the help screen and the palette: a replay has no steering ones, a job
        only those that apply to it."""
        return [a for a in actions.shown(self.replay) if self.controller.applies(a.name, a.steers)]

    def action_refused_in_replay(self, name: str) -> None:
        """A key whose action does not apply now (a replay, a job, ``r`` while running): say why."""
        self.tell([self.controller.not_now(name, actions.BY_NAME[name].title)])

    def action_output(self) -> None:
        """A job's output in place of the charts (again: the charts); any other run's key says where it went."""
        if self.job is None:
            self.action_refused_in_replay(actions.OUTPUT)
        else:
            self.job.toggle()

    def action_toggle_pipeline(self) -> None:
        self.tell([self.controller.requests.toggle_pipeline()])

    def action_cycle_variant(self) -> None:
        self.tell([self.controller.requests.next_variant()])

    def action_switch_workload(self) -> None:
        choices = [(f.name, f.title) for f in FAMILIES.values()]
        self.push_screen(
            PickScreen("Switch workload (enter picks, escape cancels)", choices, self.state.run.workload),
            lambda name: self.tell([self.controller.requests.switch_workload(name)]),
        )

    def set_batch(self, n: int) -> None:
        self.tell([self.controller.requests.set_batch(n)])

    def action_batch_double(self) -> None:
        self.tell([self.controller.requests.scale_batch(double=True)])

    def action_batch_half(self) -> None:
        self.tell([self.controller.requests.scale_batch(double=False)])

    def action_batch_typed(self) -> None:
        """The edge's one check of a typed batch size: the prompt parses it, or says why not."""
        prompt = PromptScreen(
            f"Batch size (now {self.state.run.batch_size or '?'})",
            placeholder="a whole number ≥ 1",
            parse=parse_batch_size,
            errors=(WorkloadError,),
        )
        self.push_screen(prompt, lambda n: None if n is None else self.set_batch(n))

    def action_time_stages(self) -> None:
        self.tell([self.controller.requests.time_stages()])

    def action_trace_window(self) -> None:
        self.tell([self.controller.requests.trace_window()])

    def action_diagnose(self) -> None:
        self.tell([self.controller.requests.diagnose()])

    def action_memory_peak(self) -> None:
        self.tell([self.controller.requests.memory_peak()])

    # -- tune: the race in a child process while the run is paused (gpudash.tune.job) -----------
    def action_tune(self) -> None:
        """Start a tune of what runs (a prompt asks for its budget), or stop the one under way."""
        job = self.tune_job
        if job is not None and job.running:
            job.stop()
            self.say(job.progress())
            return
        refusal = self.controller.tune.refusal()
        if refusal is not None:
            self.tell([refusal])
            return
        s = self.state
        prompt = PromptScreen(
            f"Tune {s.run.workload} at batch {s.run.batch_size}: race its variants × knobs for at most how many "
            "minutes? (the run pauses meanwhile)",
            value="5",
            placeholder="minutes, 0.5 to 120",
            parse=parse_minutes,
        )
        self.push_screen(prompt, lambda minutes: None if minutes is None else self.start_tune(minutes))

    def start_tune(self, minutes: float, seconds: float | None = None, warmup: float | None = None) -> None:
        """Pause the run and start ``gpudash tune`` on it (``seconds``/``warmup``: tune's own, for tests)."""
        refusal = self.controller.tune.refusal()
        if refusal is not None:
            self.tell([refusal])
            return
        request = dataclasses.replace(self.controller.tune.request(minutes), seconds=seconds, warmup=warmup)
        job = TuneJob(request, default_out_dir(self.save_dir, request.workload))
        try:
            job.start()
        except OSError as exc:
            self.tell([error(f"✗ could not start gpudash tune: {exc}")])
            return
        self.tune_job = job
        if not self.state.paused:
            self.controller.send(protocol.Pause(), "pausing for the tune…")
        self.say(job.progress())
        self._tune_timer = self.set_interval(1.0, self._poll_tune)

    def _poll_tune(self) -> None:
        job = self.tune_job
        if job is None:
            return
        if job.running:
            job.check_stop_deadline()
            self.say(job.progress())
            return
        if self._tune_timer is not None:
            self._tune_timer.stop()
            self._tune_timer = None
        result = job.result()
        if isinstance(result, str):
            self.say(result, "error", toast=True)
            self._resume_after_tune()
            return
        same = self.state.run.workload == job.request.workload
        lines = [*result.lines, f"run it: {result.command}", f"report: {short_path(str(result.out_dir / 'tune.md'))}"]
        if not same:
            lines.append(f"(the run is on {self.state.run.workload} now: the winner is not applied here)")
        title = f"Tune of {job.request.workload} at batch {job.request.batch_size}: {job.windows()} windows measured"
        self.push_screen(TuneResultScreen(title, lines, can_apply=same), lambda apply: self._tuned(result, bool(apply)))

    def _tuned(self, answer: TuneAnswer, apply: bool) -> None:
        if apply:
            self.tell(self.controller.tune.apply(answer))
        else:
            self._resume_after_tune()

    def _resume_after_tune(self) -> None:
        if self.state.paused:
            self.tell([self.controller.send(protocol.Resume(), "resuming…")])

    def action_measure_scaling(self) -> None:
        self.tell([self.controller.requests.measure_scaling()])

    def action_knobs(self) -> None:
        ctl, s = self.controller, self.state
        title = f"Knobs for {s.run.workload}/{s.run.variant} on {s.device} — applied at a step boundary, all at once"
        panel = KnobsScreen(title, ctl.knobs.base(), ctl.knobs.refusals(), check=ctl.knobs.refusal)
        self.push_screen(panel, lambda knobs: None if knobs is None else self.tell([ctl.knobs.ask_all(knobs)]))

    def set_knob(self, name: str, value: str | None) -> None:
        """One knob from the palette: ``value`` None toggles an on/off knob."""
        ctl = self.controller
        self.tell([ctl.knobs.toggle(name) if value is None else ctl.knobs.ask(name, value)])

    def action_pause_resume(self) -> None:
        self.tell([self.controller.requests.pause_resume()])
