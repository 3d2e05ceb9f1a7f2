"""The dashboard's actions: one table feeding the key bindings, the help screen and the palette.

To add an action: one row here and an ``action_<name>`` method on the app (which forwards
to the controller).
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.binding import Binding, BindingType

from gpudash.tui.job_notices import OUTPUT  # the job's output pane (elsewhere: where the output went)
from workloads.knobs import KNOBS, OFF, ON  # torch-free
from workloads.registry import FAMILIES  # torch-free

STEER, LOOK, KEEP, SCREEN = "Steer the run", "Look closer", "Keep a record", "The screen"
GROUPS = (STEER, LOOK, KEEP, SCREEN)  # the help screen's headings, in its order


@dataclass(frozen=True)
class Action:
    name: str  # the app's action_<name>
    keys: str  # Textual key names, comma-separated
    footer: str  # the Footer's short label
    title: str  # the command palette's title
    help: str  # the help screen's and the palette's description
    steers: bool = False  # controls the workload: hidden in a replay
    key_display: str | None = None
    tooltip: str | None = None
    in_footer: bool = True  # False: in the help screen and the palette only (the footer is full)
    footer_first: bool = False  # first in the footer, so a narrow terminal cuts the others, not it
    group: str = ""  # the help screen's heading it stands under (GROUPS; "": by whether it steers)

    @property
    def heading(self) -> str:
        """The help screen's heading this action stands under."""
        return self.group or (STEER if self.steers else SCREEN)

    @property
    def key(self) -> str:
        """The key as the help screen and the palette show it."""
        return self.key_display or self.keys.split(",")[0]

    def binding(self) -> Binding:
        return Binding(
            self.keys,
            self.name,
            self.footer,
            key_display=self.key_display,
            tooltip=self.tooltip or "",
            show=self.in_footer,
        )


ACTIONS: tuple[Action, ...] = (
    Action(
        "output",
        "o",
        "Output",
        "Output of the job",
        "a job's (gpudash -- CMD): its output, live, in place of the charts (o again: the charts); "
        "arrows, page keys and the wheel scroll it, end follows it again; a family's run: names its log file",
        tooltip="The job's output (o again: the charts)",
        group=LOOK,
    ),
    Action(
        "toggle_pipeline",
        "p",
        "Pipeline",
        "Toggle pipelining",
        "switch between the family's serial and pipelined variants",
        steers=True,
        tooltip="Toggle serial ↔ pipelined",
    ),
    Action(
        "cycle_variant",
        "v",
        "Variant",
        "Next variant",
        "switch to the next variant of this workload family",
        steers=True,
        tooltip="Next variant of this workload",
    ),
    Action(
        "switch_workload",
        "w",
        "Workload",
        "Switch workload",
        f"pick another workload family ({', '.join(FAMILIES)})",
        steers=True,
        tooltip="Switch to another workload family",
    ),
    Action(
        "batch_double",
        "plus,equals_sign",
        "Batch×2",
        "Batch size ×2",
        "double the batch size",
        steers=True,
        key_display="+",
    ),
    Action("batch_half", "minus", "÷2", "Batch size ÷2", "halve the batch size", steers=True, key_display="-"),
    Action(
        "batch_typed", "b", "Batch=", "Type a batch size", "type a batch size", steers=True, tooltip="Type a batch size"
    ),
    Action(
        "time_stages",
        "t",
        "Stages",
        "Time the two stages alone",
        "time each stage of a pipelined family alone (20 steps each) and show the overlap bound "
        "1/max(t1, t2) that pipelining can reach",
        steers=True,
        group=LOOK,
    ),
    Action(
        "trace_window",
        "T",
        "Profile",
        "Profile 20 steps (torch.profiler window)",
        "run the next 20 steps under torch.profiler: a Chrome trace (.json.gz, open it in ui.perfetto.dev) "
        "and its figures (GPU busy, idle, stream overlap, kernels/step) under the stats; those steps stay "
        "out of the statistics",
        steers=True,
        tooltip="Profile 20 steps with torch.profiler",
        group=LOOK,
    ),
    Action(
        "diagnose",
        "d",
        "Diagnose",
        "Diagnose: what holds the step back",
        "time 30 steps (the wait for each batch, the syncs) and, on a GPU, profile 30 more: input-bound, "
        "sync-bound, host/launch-bound or GPU-bound, the evidence and what to try next, in a line above "
        "the statistics until the configuration changes; those steps stay out of the statistics",
        steers=True,
        in_footer=False,
        group=LOOK,
    ),
    Action(
        "memory_peak",
        "m",
        "Memory",
        "Memory: the lines that hold the peak",
        "record the next 2 steps with the CUDA allocator's history and Python stacks: the lines alive at "
        "their peak, each with its bytes and kind (forward, backward, optimizer); those steps stay out of the "
        "statistics (CUDA only)",
        steers=True,
        in_footer=False,
        group=LOOK,
    ),
    Action(
        "sync_sites",
        "y",
        "Syncs",
        "Sync table: which lines make the host wait",
        "each host-device sync in the step by its source line (waits per step, share, the line), live "
        "for the configuration running now; CUDA only",
        in_footer=False,
        group=LOOK,
    ),
    Action(
        "compiles",
        "g",
        "Compiles",
        "Compile table: recompiles and graph breaks by line",
        "each function torch.compile compiled, with its recompiles' causes and seconds, and each graph "
        "break's line and reason, with what to do about each, live (a job's torch.compile, the compile knob)",
        in_footer=False,
        group=LOOK,
    ),
    Action(
        "tune",
        "u",
        "Tune",
        "Tune: race variants × knobs for the fastest configuration",
        "pause the run and race its variants × knobs at this batch size (gpudash tune, successive halving "
        "with intervals) for at most the minutes you give; then run the winner here or keep the current "
        "configuration; u again stops the race and keeps what it measured",
        steers=True,
        in_footer=False,
        group=LOOK,
    ),
    Action(
        "measure_scaling",
        "e",
        "Scaling",
        "Measure the data-parallel scaling efficiency",
        "with --nproc 2 or more: rank 0 trains alone for 50 steps (the others wait, the training is put "
        "back) and the running rate is compared with it: N-rank samples/s ÷ (N × one rank's)",
        steers=True,
        tooltip="Scaling efficiency of a --nproc run",
        in_footer=False,
        group=LOOK,
    ),
    Action(
        "knobs",
        "k",
        "Knobs",
        "Knobs panel",
        f"set the knobs ({', '.join(KNOBS)}): precision, layout, autotuning, graphs, compilation; "
        "applied at a step boundary, compile and capture show their progress",
        steers=True,
        tooltip="Set the knobs (amp, channels_last, compile, …)",
    ),
    Action(
        "pause_resume",
        "space",
        "Pause",
        "Pause / resume",
        "pause the training loop at the next step, or resume it",
        steers=True,
    ),
    Action(
        "restart", "r", "Restart", "Restart the workload", "start the workload again after a crash or stop", steers=True
    ),
    Action(
        "record",
        "c",
        "Record",
        "Start / stop recording to CSV",
        "record the run to a CSV file (same format as gpudash record); again to stop",
        steers=True,
        tooltip="Start/stop recording to CSV",
        group=KEEP,
    ),
    Action(
        "screenshot",
        "s,ctrl+s",
        "Shot",
        "Save a screenshot (SVG)",
        "save the screen as an SVG file in the current directory (or the configured record directory) and say where",
        key_display="s",
        tooltip="Save an SVG screenshot",
        in_footer=False,
        group=KEEP,
    ),
    Action(
        "reset_zoom",
        "0",
        "Unzoom",
        "Show the whole run (reset the time zoom)",
        "show the whole run again after zooming the time axis with the scroll wheel",
        tooltip="Reset the scroll-wheel zoom of the time axis",
        in_footer=False,
    ),
    Action(
        "help",
        "question_mark,f1",
        "Help",
        "Help: keys and charts",
        "the keys and what every chart means",
        key_display="?",
        footer_first=True,
    ),
    # ctrl+c quits like q, as in most terminal monitors; with text selected it copies it instead
    # (Textual's screen binding, tried first, passes the key on when nothing is selected)
    Action(
        "quit",
        "q,ctrl+c",
        "Quit",
        "Quit",
        "stop the workload cleanly and leave (also ctrl+c)",
        key_display="q",
        footer_first=True,
    ),
)

STEERING: frozenset[str] = frozenset(a.name for a in ACTIONS if a.steers)
BY_NAME: dict[str, Action] = {a.name: a for a in ACTIONS}
REFUSED = "refused_in_replay"  # the app's action for a steering key in a replay: it says why not


def bindings() -> list[BindingType]:
    """The app's bindings; the footer shows them in this order: help and quit first, so at 80
    columns the keys a terminal cuts are the steering ones at the end, never ? and q."""
    ordered = sorted(ACTIONS, key=lambda a: not a.footer_first)  # stable: the table's order otherwise
    out: list[BindingType] = [a.binding() for a in ordered]
    # a steering key's second, hidden binding: Textual tries it when the first is disabled (a
    # replay, a job), and it says why nothing happens instead of nothing at all
    out += [Binding(a.keys, f"{REFUSED}('{a.name}')", show=False) for a in ACTIONS if a.steers or a.name == OUTPUT]
    return out


@dataclass(frozen=True)
class KnobCommand:
    """A palette entry for one knob: an on/off knob toggles (``value`` None), a valued one is set."""

    knob: str
    value: str | None
    title: str
    help: str


def knob_commands() -> list[KnobCommand]:
    """Every knob in the palette: "Knob: turn channels_last on/off", "Knob: compile=max-autotune", …"""
    out: list[KnobCommand] = []
    for k in KNOBS.values():
        about = k.summary + ("; needs CUDA" if k.needs_cuda else "")
        if k.values == (OFF, ON):
            out.append(KnobCommand(k.name, None, f"Knob: turn {k.name} on/off", about))
        else:
            out.extend(KnobCommand(k.name, v, f"Knob: {k.name}={v}", about) for v in k.values)
    return out


def shown(replay: bool) -> list[Action]:
    """The actions that apply: a replay has no steering ones."""
    return [a for a in ACTIONS if not (replay and a.steers)]
