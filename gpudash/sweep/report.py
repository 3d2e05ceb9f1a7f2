"""The files of ``gpudash sweep``: ``sweep.csv`` (row by row), ``sweep.json``, ``sweep.md`` and
``sweep.png``/``sweep.svg``; the JSON's ``time_s`` and the Markdown's last section say where the
time went (``gpudash.sweep.timing``). The CSV's columns and rows are ``gpudash.sweep.csv_rows``'.
Torch-free; matplotlib is imported only to draw, with Agg.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import json
import os
from typing import Any

from gpudash.core.metrics import metric
from gpudash.core.protocol import ExitCode
from gpudash.core.textfmt import fmt_num
from gpudash.stats.comparison import Verdict
from gpudash.stats.fmt import fmt_pm, fmt_ratio
from gpudash.stats.noise_tally import MARK, markdown_section
from gpudash.sweep.csv_rows import CSV_COLUMNS, FlushedCsv, repeat_row, summary_row
from gpudash.sweep.plan import FamilyPlan, SweepPlan, run_config
from gpudash.sweep.plot import plot, plot_title
from gpudash.sweep.results import ConfigSummary, RepeatResult, summarize
from gpudash.sweep.timing import TimeLedger

BASELINE = "(baseline)"


class SweepReport:
    """Collects a sweep's results and writes its files into ``plan.out_dir``."""

    def __init__(self, plan: SweepPlan) -> None:
        self.plan = plan
        self.out_dir = plan.out_dir
        self.results: list[RepeatResult] = []
        self.summaries: list[tuple[FamilyPlan, list[ConfigSummary]]] = []
        self.notes: list[str] = []
        self.time = TimeLedger()  # where the wall clock went (the measuring loops add to it)
        self.elapsed_s = 0.0
        self.meta = sweep_metadata(plan)
        self._csv = FlushedCsv(self.out_dir / "sweep.csv", CSV_COLUMNS)
        self.write_json()

    def _row(self, row: dict[str, Any]) -> None:
        self._csv.row(row)

    def add_result(self, result: RepeatResult) -> None:
        """A configuration × repeat finished: its row now."""
        self.results.append(result)
        self._row(repeat_row(result))

    def add_family(self, fp: FamilyPlan, results: list[RepeatResult], notes: list[str]) -> None:
        """A family is done (or stopped): its configurations' summary rows."""
        self.notes.extend(notes)
        if not results:
            return
        measured = tuple(c for c in fp.configurations if any(r.config == c for r in results))
        summaries = summarize(measured, results)
        self.summaries.append((fp, summaries))
        for s in summaries:
            self._row(summary_row(s))

    def note_session(self, session: Any) -> None:
        """The workload started: the GPU, driver, torch and CUDA versions into the metadata."""
        from gpudash.recording.metadata import started_metadata

        info = session.gpu_info
        self.meta.update(
            gpu_name=info.name,
            gpu_names=list(info.names),
            gpu_index=info.index,
            driver=info.driver,
            nvml_unavailable=info.unavailable,
        )
        if session.info.started is not None:
            self.meta.update(started_metadata(session.info.started, self.meta))
        self.write_json()

    def write_json(self) -> None:
        """``sweep.json``, replaced atomically."""
        path = self.out_dir / "sweep.json"
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.meta, indent=2, default=str) + "\n", encoding="utf-8")
        os.replace(tmp, path)

    def finish(self, status: str, code: ExitCode, elapsed_s: float | None = None) -> list[str]:
        """Close the CSV; write the JSON, the Markdown and the plots; drop the empty workload
        logs. ``elapsed_s``: the sweep's wall clock (None: no account of it). Returns the files written."""
        self._csv.close()
        self.meta.update(
            end_time=now_iso(), status=status, exit_code=int(code), notes=self.notes, measurements=len(self.results)
        )
        if elapsed_s is not None:
            self.elapsed_s = elapsed_s
            self.meta.update(elapsed_s=round(elapsed_s, 1), time_s=self.time.as_dict(elapsed_s))
        self.write_json()
        (self.out_dir / "sweep.md").write_text(markdown(self, status), encoding="utf-8")
        written = ["sweep.csv", "sweep.json", "sweep.md"]
        if self.summaries:
            written += write_plots(self)
        for fp in self.plan.families:  # a workload log says nothing after a clean run: not left behind
            log = self.out_dir / f"sweep-{fp.family}.log"
            with contextlib.suppress(OSError):
                if log.stat().st_size == 0:
                    log.unlink()
        return written

    def summary_lines(self) -> list[str]:
        """One line per configuration: steps/s ± interval and the comparison."""
        lines = []
        for _, summaries in self.summaries:
            for s in summaries:
                lines.append(summary_line(s))
        return lines


def summary_line(s: ConfigSummary) -> str:
    """One line for stderr: steps/s ± interval, and the relative speed with its verdict."""
    head = f"{s.config.name}: "
    if s.steps is None:
        return head + f"failed: {s.error}" if s.error else head + "no samples"
    text = head + fmt_pm(s.steps) + " steps/s"
    if s.comparison is not None and s.base is not None:
        text += f", {fmt_ratio(s.comparison)} of {s.base.label}: {s.comparison.verdict}"
    elif s.is_base:
        text += " " + BASELINE
    if s.noise:
        text += f" (⚠ {s.noise})"
    return text


def now_iso() -> str:
    """Local time, ISO 8601 with the offset (as ``run_metadata``'s start_time)."""
    return _dt.datetime.now().astimezone().isoformat(timespec="seconds")


def sweep_metadata(plan: SweepPlan) -> dict[str, Any]:
    """What ``sweep.json`` says before the workload starts (the session adds GPU and torch)."""
    from gpudash.recording.metadata import run_metadata

    first = plan.families[0].configurations[0]
    meta = run_metadata(
        run_config(first, plan.settings),
        command=plan.command,
        preset=plan.preset,
        settings=dataclasses.asdict(plan.settings),
        cpu_count=os.cpu_count(),
        skipped=list(plan.skipped),
        knobs=plan.knobs,
        status="running",
    )
    meta.pop("config", None)  # one session per family: their configurations are below
    meta["families"] = [
        {
            "family": fp.family,
            "title": fp.title,
            "seconds": fp.seconds,
            "warmup": fp.warmup,
            "configurations": [
                {"label": c.label, "variant": c.variant, "batch_size": c.batch_size, "knobs": c.knobs}
                for c in fp.configurations
            ],
        }
        for fp in plan.families
    ]
    meta["out_dir"] = str(plan.out_dir)
    return meta


def write_plots(report: SweepReport) -> list[str]:
    """``sweep.png`` and ``sweep.svg``: steps/s bars with their intervals, one panel per (family,
    batch size). Without matplotlib: a note, and no plot."""
    try:
        paths = plot(report.summaries, report.out_dir, title=plot_title(report.meta))
    except ImportError as exc:  # matplotlib is not a dependency of the dashboard
        report.notes.append(f"no plot: {exc} (pip install matplotlib)")
        return []
    return [p.name for p in paths]


# -- sweep.md ------------------------------------------------------------------------------------
METHOD = (
    "Each figure is the mean over every measured repeat with its 95% interval (batch means of the "
    "per-interval samples, `gpudash/stats/comparison.py`). Relative speed is steps/s over the first "
    "configuration's at the same batch size, with its 95% interval. The verdict is *faster* or "
    "*slower* only when that interval excludes 1 and the change exceeds 2%; *within noise* when "
    "it is significant but smaller; *no change detected* when not significant. "
    f"GPU % is NVML's {metric('gpu_util_pct').description}; SM % is {metric('sm_active_pct').description}; "
    f"MFU % is {metric('mfu_pct').description}; J/step is NVML energy over the steps done."
)
TABLE_KEYS = ("samples_per_s", "syncs_per_step", "gpu_util_pct", "sm_active_pct", "mfu_pct", "joules_per_step")
TABLE_HEAD = (
    "| variant | steps/s ± CI | samples/s | syncs/step | GPU % | SM % | MFU % | J/step | relative speed | verdict |\n"
    "|---|--:|--:|--:|--:|--:|--:|--:|--:|---|"
)


def table_row(s: ConfigSummary, base: ConfigSummary | None = None) -> str:
    """One variant's row of a family's table (``base``: the one it is compared with, whose own
    shortness the verdict then names)."""
    if s.steps is None:
        why = f"failed: {s.error}" if s.error else "no samples"
        return f"| {s.config.label} | – | – | – | – | – | – | – | – | {why} |"
    cells = [fmt_pm(s.steps), *(fmt_pm(s.stats.get(k)) for k in TABLE_KEYS)]
    base_advice = base.too_short_advice() if base is not None else ""
    advice = s.too_short_advice() or (base_advice + " (the base)" if base_advice else "")
    if s.comparison is not None:
        verdict = s.comparison.verdict
        cells += [
            fmt_ratio(s.comparison),
            advice or ("too short (the base's)" if verdict == Verdict.TOO_SHORT else str(verdict)),
        ]
    else:
        cells += ["1.00×", " ".join(t for t in (BASELINE if s.is_base else "–", advice) if t)]
    if s.error:
        cells[-1] += f" (then failed: {s.error})"
    if s.noise or (base is not None and base.noise and s.comparison is not None):
        cells[-1] += f" {MARK}"  # measured while the machine was noisy: the Noise section says why
    return f"| {s.config.label} | " + " | ".join(cells) + " |"


STAGE_HEAD = "| variant | each stage alone | overlap bound (steps/s) | steps/s as % of the bound |\n|---|---|--:|--:|"


def stage_table(summaries: list[ConfigSummary]) -> list[str]:
    """A two-stage family's stage times, the overlap bound 1000 / max(t1, t2) and how close
    each variant comes to it (empty when no stages were timed)."""
    timed = [s for s in summaries if s.stages is not None]
    if not timed:
        return []
    lines = [
        "",
        "Each stage timed alone right after each repeat (20 calls each, CUDA events on a GPU); "
        "a perfect two-stage pipeline runs at the overlap bound.",
        "",
        STAGE_HEAD,
    ]
    for s in timed:
        assert s.stages is not None
        lines.append(
            f"| {s.config.label} | {s.stages.describe()} | {fmt_num(s.stages.bound)} | {fmt_pm(s.pct_of_bound)} |"
        )
    return lines


def noise_section(summaries: list[ConfigSummary]) -> list[str]:
    """``## Noise``: which configurations were measured while the machine was noisy, and why."""
    noisy = [(f"{s.config.family}/{s.config.label} bs{s.config.batch_size}", s.noise) for s in summaries if s.noise]
    return markdown_section(noisy, len(summaries))


def header_lines(report: SweepReport, status: str) -> list[str]:
    """``sweep.md``'s header: the command, date, device, torch, settings and outcome."""
    meta, plan, st = report.meta, report.plan, report.plan.settings
    gpu = meta.get("gpu_name") or meta.get("device_name")
    telemetry = (
        f"{gpu}, driver {meta.get('driver') or '?'}"
        if gpu
        else f"no GPU telemetry ({meta.get('nvml_unavailable') or '?'})"
    )
    order = f"configurations in a shuffled order each repeat (seed {st.seed})"
    until = f"; then rounds until every steps/s interval is within ±{st.until_ci:g}%" if st.until_ci else ""
    knobs = [f"- **Knobs on every configuration:** {plan.knobs}"] if plan.knobs != "none" else []
    every = [s for _, summaries in report.summaries for s in summaries]
    n_noisy = sum(1 for s in every if s.noise)
    noisy = [f"- **⚠ The machine was noisy** while {n_noisy} of {len(every)} configurations were measured (see Noise)"]
    return [
        f"- **Command:** `{plan.command}`",
        f"- **Date:** {meta.get('start_time')} to {meta.get('end_time') or '?'} · host {meta.get('hostname')} "
        f"· gpudash {meta.get('gpudash_version')}",
        f"- **Device:** {meta.get('device') or st.device} · {telemetry}",
        f"- **torch** {meta.get('torch_version') or '?'} · CUDA {meta.get('cuda_version') or '–'} "
        f"· {meta.get('cpu_count')} CPUs",
        f"- **Settings:** {st.repeats} repeats, a sample every {st.sample_interval_s:g} s; {order}{until}",
        *knobs,
        f"- **Outcome:** {status}; {len(report.results)} configuration × repeat measurements finished",
        *(noisy if n_noisy else []),
    ]


def markdown(report: SweepReport, status: str) -> str:
    """``sweep.md``: a header (device, torch, date, the command), then per family and batch size a table."""
    lines = ["# gpudash sweep", "", *header_lines(report, status), "", METHOD, ""]
    for fp, summaries in report.summaries:
        for batch in dict.fromkeys(s.config.batch_size for s in summaries):
            timing = (
                f"{report.plan.settings.repeats} repeats × {fp.seconds:g} s measured after {fp.warmup:g} s "
                "of warm-up per configuration"
            )
            lines += [f"## {fp.family} · batch {batch}", "", f"{fp.title}. {timing}.", "", TABLE_HEAD]
            at_batch = [s for s in summaries if s.config.batch_size == batch]
            base = next((b for b in at_batch if b.is_base), None)
            lines += [table_row(s, base) for s in at_batch]
            lines += stage_table(at_batch)
            lines.append("")
    lines += noise_section([s for _, summaries in report.summaries for s in summaries])
    lines += report.time.markdown(report.elapsed_s, "sweep")
    extra = [f"- skipped: {line}" for line in report.plan.skipped] + [f"- {note}" for note in report.notes]
    if extra:
        lines += ["## Notes", "", *extra, ""]
    return "\n".join(lines).rstrip("\n") + "\n"
