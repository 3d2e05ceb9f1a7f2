"""``gpudash report RUN.csv [RUN2.csv …] [--out DIR [--html]]``: recordings and sweeps as a
Markdown report — on stdout, or with ``--out`` in a folder with its plots. Torch- and Textual-free;
matplotlib only to draw (``report_plot``), and only with ``--out``.

``DIR/report.md``: each run's configurations (mean ± 95% interval, syncs/step, GPU %, SM %, MFU %, power,
J/step), the verdict between consecutive segments of a recording, and between runs (A/B,
``gpudash.report.ab``: each configuration against its counterpart in the baseline run, or in the
runs before it; the verdicts also on stderr).
``DIR/report.png``/``.svg``: throughput and GPU utilisation over time with the changes
labelled (recordings), bars with their intervals (sweeps). ``--html``: ``DIR/report.html``,
one self-contained file (inline SVG, no network). Bad input: one line, exit status 2. The
files are read as ``gpudash replay`` reads them (``report_load``): no text from them reaches
report.md or the terminal with a control character in it.
"""

from __future__ import annotations

import datetime as _dt
import json
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpudash.arguments import shared_flags
from gpudash.arguments.argtypes import Parser, UsageError, check_out_dir, non_negative_float
from gpudash.core.lenient import float_or_none
from gpudash.core.protocol import NOT_THE_JOBS, PHASES, ExitCode
from gpudash.core.textfmt import clip, fmt_num, strip_controls
from gpudash.report import compile_md, memory_md, sync_md, world
from gpudash.report.ab import Pair, pairs, relative_table
from gpudash.report.load import ConfigFigures, ReportInputError, Run, load_run
from gpudash.stats.comparison import Comparison, Estimate, compare
from gpudash.stats.fmt import fmt_pm, fmt_ratio
from gpudash.stats.noise_tally import MARK, markdown_section

METHOD = (
    "Each figure is a mean after warm-up with its 95% interval: batch means over the per-interval "
    "samples, which are autocorrelated (`gpudash/stats/comparison.py`). A ratio is new / old steps/s with "
    "its 95% interval; the verdict is *faster* or *slower* only when that interval excludes 1 and the "
    "change exceeds 2%, *within noise* when it is significant but smaller, *no change detected* when "
    "it is not significant, *too short* when a side has no interval."
)


def build_parser() -> Parser:
    """The parser of ``gpudash report``."""
    p = Parser(
        prog="gpudash report",
        description="Summaries, verdicts and plots of recordings (--record CSVs) and sweeps (sweep.csv).",
    )
    p.add_argument("runs", nargs="+", metavar="RUN.csv", help="recordings or sweep CSVs; the first is the reference")
    p.add_argument(
        "--out",
        metavar="DIR",
        help="write report.md and its plots (.png/.svg) in this directory (created); default: the report on stdout, "
        "no plots",
    )
    p.add_argument(
        "--html", action="store_true", help="with --out, also write report.html: one file, inline SVG, no network"
    )
    p.add_argument(
        "--baseline",
        metavar="RUN.csv",
        help="compare every run's configurations with this run's (one of the runs; default: each run "
        "with the runs before it); a configuration is paired with the same one, else with the first "
        "of its family and batch size",
    )
    p.add_argument(
        "--smooth",
        type=non_negative_float,
        default=0.0,
        metavar="SECONDS",
        help="also draw each recording's throughput as a moving mean over this many seconds (default 0: raw)",
    )
    shared_flags.add_quiet(p)
    shared_flags.add_json(p)
    return p


# -- comparisons ---------------------------------------------------------------------------------------
def versus(base: Estimate | None, new: Estimate | None) -> Comparison | None:
    """Steps/s of ``new`` against ``base`` (None when a side has no figure)."""
    return None if base is None or new is None else compare(base, new)


def fmt_comparison(c: Comparison | None) -> str:
    """ "1.07× [1.05–1.09] faster" ("–" when there is nothing to compare)."""
    return "–" if c is None else f"{fmt_ratio(c)} {c.verdict}"


def segment_change(before: ConfigFigures, after: ConfigFigures) -> str:
    """``after`` against ``before``: steps/s, or samples/s when the batch size changed (a
    step of another size is not the same work)."""
    if before.key[2] == after.key[2]:
        return fmt_comparison(versus(before.steps, after.steps))
    c = versus(before.stats.get("samples_per_s"), after.stats.get("samples_per_s"))
    return "–" if c is None else "samples/s " + fmt_comparison(c)


def _time_span(c: ConfigFigures) -> str:
    return "–" if c.start_s is None or c.end_s is None else f"{c.start_s:.1f}–{c.end_s:.1f}"


TABLE_KEYS = ("syncs_per_step", "gpu_util_pct", "sm_active_pct", "mfu_pct", "power_w", "joules_per_step")
TABLE_HEADS = "syncs/step | GPU % | SM % | MFU % | power (W) | J/step"  # TABLE_KEYS' headings


def _cells(c: ConfigFigures) -> list[str]:
    """steps/s ± CI, then ``TABLE_KEYS``' means (– where a run has none: SM % before Hopper, MFU
    where the FLOPs or the peak are not known, both in a recording from before them)."""
    steps = fmt_pm(c.steps) if c.steps is not None else "– (no samples after warm-up)"
    rest = [fmt_num(None if (e := c.stats.get(k)) is None else e.mean) for k in TABLE_KEYS]
    return [steps, *rest]


def run_table(run: Run) -> list[str]:
    """A run's configurations; a recording's also against the segment before each."""
    if run.kind == "sweep":
        lines = [
            f"| configuration | steps/s ± CI | {TABLE_HEADS} | the sweep's relative speed |",
            "|---|--:|--:|--:|--:|--:|--:|--:|---|",
        ]
        for c in run.configs:
            ratio = f"failed: {c.error}" if c.error and c.steps is None else c.sweep_ratio or "–"
            ratio += f" {MARK}" if c.noise else ""
            lines.append(f"| {c.name} | " + " | ".join([*_cells(c), ratio]) + " |")
        return lines
    lines = [
        f"| # | configuration | time (s) | steps/s ± CI | {TABLE_HEADS} | vs the segment before |",
        "|--:|---|---|--:|--:|--:|--:|--:|--:|--:|---|",
    ]
    before: ConfigFigures | None = None
    for i, c in enumerate(run.configs, start=1):
        vs = "–" if before is None else segment_change(before, c)
        if before is not None and vs != "–" and (c.noise or before.noise):
            vs += f" {MARK}"
        lines.append(f"| {i} | {c.name} | {_time_span(c)} | " + " | ".join([*_cells(c), vs]) + " |")
        before = c
    return lines


# -- the Markdown ----------------------------------------------------------------------------------------
def run_line(i: int, run: Run) -> str:
    """One row of the runs table: what the file is, where and when it ran."""
    m = run.meta
    device = m.get("gpu_name") or m.get("device") or "?"
    torch = m.get("torch_version") or "?"
    when = str(m.get("start_time") or "?")
    ending = run.ending or ("sweep " + str(m.get("status") or "?") if run.kind == "sweep" else "–")
    return f"| {i} | `{run.shown_path}` | {run.kind} | {device} | {torch} | {when} | {ending} |"


def phases_section(run: Run) -> list[str]:
    """A job's wall time by phase and its goodput (none for other runs)."""
    p = run.phases
    if p is None:
        return []
    goodput = "–" if p.goodput_pct is None else f"**{p.goodput_pct:.1f}%**"
    rows = [f"| {k} | {v:.1f} | {100 * v / p.wall_s:.1f}% |" for k, v in p.seconds.items() if v > 0 and p.wall_s > 0]
    theirs = [k for k in NOT_THE_JOBS if p.seconds.get(k, 0.0) > 0]
    less = f" less its {' and '.join(theirs)}, not the job's own time" if theirs else ""
    return [
        "### Wall time by phase",
        "",
        f"Goodput (training's share of the wall time{less}): {goodput} of {p.wall_s:.1f} s. The figures above "
        "are over training steps alone.",
        "",
        "| phase | seconds | share |",
        "|---|--:|--:|",
        *rows,
        "",
    ]


def goodput_table(runs: Sequence[Run]) -> list[str]:
    """Each job's goodput and phases side by side (none unless a run is a job's)."""
    if not any(run.phases for run in runs):
        return []
    kinds = [k for k in PHASES if any(run.phases and run.phases.seconds.get(k, 0) > 0 for run in runs)]
    lines = ["| run | goodput | wall s | " + " | ".join(f"{k} s" for k in kinds) + " |"]
    lines.append("|--:|--:|--:|" + "--:|" * len(kinds))
    for i, run in enumerate(runs, start=1):
        p = run.phases
        if p is None:
            lines.append(f"| {i} | – | – |" + " – |" * len(kinds))
            continue
        pct = "–" if p.goodput_pct is None else f"{p.goodput_pct:.1f}%"
        cells = " | ".join(f"{p.seconds.get(k, 0.0):.1f}" for k in kinds)
        lines.append(f"| {i} | {pct} | {p.wall_s:.1f} | {cells} |")
    return [*lines, ""]


def markdown(runs: Sequence[Run], command: str, plots: Sequence[str], baseline: int | None = None) -> str:
    """``report.md``."""
    now = _dt.datetime.now().astimezone().isoformat(timespec="seconds")
    lines = [
        "# gpudash report",
        "",
        f"- **Command:** `{strip_controls(command)}`",
        f"- **Written:** {now}",
        "",
        METHOD,
        "",
        "## Runs",
        "",
        "| run | file | kind | device | torch | started | ended |",
        "|--:|---|---|---|---|---|---|",
        *(run_line(i, r) for i, r in enumerate(runs, start=1)),
        "",
    ]
    for i, run in enumerate(runs, start=1):
        notes = [f"*Note: {note}*" for note in run.notes]  # a metadata file ignored, and why
        lines += [f"## Run {i}: {run.name}", "", *notes, *([""] if notes else []), *run_table(run), ""]
        lines += phases_section(run)
        lines += memory_md.section(run.meta)
        lines += compile_md.section(run.meta)
        sites = run.meta.get("sync_sites")
        lines += sync_md.section(sites if isinstance(sites, dict) else {})
        if run.traces:
            lines += [
                "### Profiler windows",
                "",
                "| time (s) | configuration | figures → trace |",
                "|--:|---|---|",
                *(f"| {t:.1f} | {label} | {text} |" for t, label, text in run.traces),
                "",
            ]
    worlds = world.join(runs)
    for w in worlds:
        lines += world.markdown(w)
    noisy = [(f"{c.name} ({run.name})", c.noise) for run in runs for c in run.configs if c.noise]
    lines += markdown_section(noisy, sum(len(run.configs) for run in runs))
    if len(runs) > 1 and not one_world(runs, worlds):
        against = "each against the runs before it" if baseline is None else f"against run {baseline + 1}"
        lines += [f"## Between runs ({against})", "", *relative_table(runs, baseline), ""]
        lines += goodput_table(runs)
        lines += memory_md.table(runs)
    if plots:
        lines += ["## Plot", "", f"![throughput and GPU utilisation]({plots[0]})", ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def one_world(runs: Sequence[Run], worlds: Sequence[world.World]) -> bool:
    """Every run is a node of one data-parallel run: joined as a world, not compared as A and B."""
    return len(worlds) == 1 and len(worlds[0].nodes) == len(runs)


# -- the command ---------------------------------------------------------------------------------------
def write_report(
    runs: Sequence[Run], out: Path, command: str, html: bool, baseline: int | None = None, smooth_s: float = 0.0
) -> list[str]:
    """Write report.md, the plots and (``html``) report.html; returns the file names."""
    from gpudash.report.plot import html_page, plot_runs

    plots = plot_runs(runs, out, smooth_s)
    text = markdown(runs, command, plots, baseline)
    (out / "report.md").write_text(text, encoding="utf-8")
    written = ["report.md", *plots]
    if html:
        (out / "report.html").write_text(html_page(text, out / "report.svg"), encoding="utf-8")
        written.append("report.html")
    return written


def say(kind: str, message: object) -> None:
    """One line on stderr, ``gpudash: error: …``: no control character, no line break, clipped
    (a message may quote a file name or a cell)."""
    text = " ".join(strip_controls(str(message), keep_newlines=True).split())
    print(f"gpudash: {kind}: {clip(text, 500)}", file=sys.stderr)


def main(argv: list[str]) -> int:
    """``gpudash report ...``: read every file first (bad input: one line, exit 2), then write."""
    args = build_parser().parse_args(argv)
    try:
        if args.html and args.out is None:
            raise UsageError("--html writes report.html in a folder: give it one with --out DIR")
        runs = [load_run(path) for path in args.runs]
        out = None if args.out is None else check_out_dir(args.out)
        baseline = _baseline_index(args.runs, args.baseline)
    except (ReportInputError, UsageError) as exc:
        say("error", exc)
        return ExitCode.USAGE
    for note in (note for run in runs for note in run.notes):  # a metadata file ignored
        say("warning", note)
    command = shlex.join(["gpudash", "report", *argv])
    written: list[str] = []
    if out is not None:
        try:
            written = write_report(runs, out, command, args.html, baseline, args.smooth)
        except OSError as exc:
            say("error", f"cannot write in {out}: {exc.strerror or exc}")
            return ExitCode.FAILED
    worlds = world.join(runs)
    found = [] if one_world(runs, worlds) else pairs(runs, baseline)
    if args.json:
        print(json.dumps(results_document(runs, found, out, written, worlds), indent=2))
    elif out is None:
        sys.stdout.write(markdown(runs, command, [], baseline))
    if not args.quiet:
        for i, run in enumerate(runs, start=1):  # a job's: over training steps, and what share of its time that was
            if run.phases is not None:
                print(f"gpudash: run {i} ({run.name}): {run.phases.line()}", file=sys.stderr)
        for w in worlds:  # every rank of a data-parallel run: the world's rate, its straggler by own work
            print(f"gpudash: {strip_controls(w.sentence())}", file=sys.stderr)
        for pair in found:  # the A/B verdicts, hyperfine-style
            print(f"gpudash: {strip_controls(pair.sentence())}", file=sys.stderr)
        if out is not None:
            print(f"gpudash: wrote {', '.join(written)} in {out}", file=sys.stderr)
        elif not args.json:
            print("gpudash: the report is above (Markdown); --out DIR writes it with its plots", file=sys.stderr)
    return ExitCode.OK


def _estimate(e: Estimate | None) -> dict[str, Any] | None:
    return (
        None
        if e is None
        else {"mean": float_or_none(e.mean), "low": float_or_none(e.low), "high": float_or_none(e.high)}
    )


def results_document(
    runs: Sequence[Run],
    found: Sequence[Pair],
    out: Path | None,
    written: Sequence[str],
    worlds: Sequence[world.World] = (),
) -> dict[str, Any]:
    """``--json``: each run's configurations with steps/s and its interval, each A/B comparison, and
    each data-parallel run's world (every rank); ``out`` null where nothing was written."""
    return {
        "out": None if out is None else str(out),
        "written": list(written),
        "runs": [
            {
                "path": run.shown_path,
                "kind": run.kind,
                "configurations": [_config_dict(c) for c in run.configs],
                "sync_sites": run.meta.get("sync_sites") or {},
                "phases": run.phases.seconds if run.phases else None,
                "wall_s": run.phases.wall_s if run.phases else None,
                "goodput_pct": run.phases.goodput_pct if run.phases else None,
                "memory": memory_md.as_dict(run.meta),
                "compile": run.meta.get("compile") or None,
            }
            for run in runs
        ],
        "comparisons": [_pair_dict(p) for p in found],
        "worlds": [world.as_dict(w) for w in worlds],
    }


def _config_dict(c: ConfigFigures) -> dict[str, Any]:
    workload, _, batch_size, knobs = c.key
    return {
        "name": c.name,
        "workload": workload,
        "variant": c.label,
        "batch_size": batch_size,
        "knobs": knobs,
        "steps_per_s": _estimate(c.steps),
        "n_samples": c.n_samples,
        "noise": c.noise,
        "error": c.error,
    }


def _pair_dict(p: Pair) -> dict[str, Any]:
    c = p.comparison
    return {
        "configuration": p.config.name,
        "run": p.run.name,
        "against": p.base.name,
        "against_run": p.base_run.name,
        "ratio": None if c is None else float_or_none(c.ratio),
        "low": None if c is None else float_or_none(c.low),
        "high": None if c is None else float_or_none(c.high),
        "verdict": None if c is None else str(c.verdict),
        "noisy": p.noisy,
    }


def _baseline_index(paths: Sequence[str], baseline: str | None) -> int | None:
    """Which of the runs ``--baseline`` names (None without it); a path not among them: UsageError."""
    if baseline is None:
        return None
    for i, path in enumerate(paths):
        if path == baseline or Path(path).resolve() == Path(baseline).resolve():
            return i
    raise UsageError(f"--baseline {baseline}: not one of the runs given; list it among them")
