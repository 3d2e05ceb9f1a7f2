"""The files of ``gpudash tune``: ``tune.csv`` (a row per window as it finishes, then a row per
candidate), ``tune.json`` (the metadata, the answer and ``time_s``: where the time went,
``gpudash.sweep.timing``), ``tune.md`` (the winner with its intervals, the diagnosis before and
after, every candidate's fate, the command that runs the winner, where the time went) and
``tune.png``/``tune.svg``. Torch-free; matplotlib is imported only to draw.
"""

from __future__ import annotations

import json
import os
import shlex
from typing import Any

from gpudash.core.protocol import Event, ExitCode
from gpudash.diagnosis.judge import judgement_of
from gpudash.report import sync_md
from gpudash.stats.comparison import Comparison, Estimate, compare
from gpudash.stats.fmt import fmt_pm, fmt_ratio
from gpudash.sweep.report import FlushedCsv, now_iso
from gpudash.sweep.results import ConfigSummary, RepeatResult, summarize_one
from gpudash.sweep.timing import TimeLedger
from gpudash.tune import race
from gpudash.tune.candidates import Candidate
from gpudash.tune.plan import TunePlan
from gpudash.tune.plot import Bar

CSV_COLUMNS = (
    "row_kind",  # window: one measuring window; candidate: one candidate over all its windows
    "candidate",
    "variant",
    "knobs",
    "batch_size",
    "stage",
    "rung",
    "seconds",
    "n_samples",
    "samples_per_s",
    "samples_per_s_low",
    "samples_per_s_high",
    "steps_per_s",
    "gpu_util_pct",
    "fate",
    "error",
    "mfu_pct",
    "sm_active_pct",
)


def _mean(e: Estimate | None) -> float | None:
    return None if e is None else e.mean


def reproduce(plan: TunePlan, c: Candidate) -> str:
    """The one command line that runs ``c`` in the dashboard (``--record`` makes it headless)."""
    from workloads.knobs import parse_knobs

    argv = ["gpudash", "-w", plan.family, "-v", c.config.variant, "-b", str(c.config.batch_size)]
    for name, value in parse_knobs(c.config.knobs).items():
        argv += ["--knob", name if value == "on" else f"{name}={value}"]
    if plan.settings.device != "auto":
        argv += ["--device", plan.settings.device]
    if plan.settings.seed:
        argv += ["--seed", str(plan.settings.seed)]
    if plan.settings.image_size is not None:
        argv += ["--image-size", str(plan.settings.image_size)]
    if plan.settings.workers is not None:
        argv += ["--workers", str(plan.settings.workers)]
    return shlex.join(argv)


class TuneReport:
    """Collects the race's windows and decisions and writes its files into ``plan.out_dir``."""

    def __init__(self, plan: TunePlan) -> None:
        self.plan = plan
        self.out_dir = plan.out_dir
        self.results: list[RepeatResult] = []
        self.candidates: list[Candidate] = []
        self.stage_of: dict[int, str] = {}  # rung number → the stage's name
        self.fates: dict[Candidate, str] = {}
        self.notes: list[str] = []
        self.refusals: list[str] = []
        self.before: Event | None = None
        self.after: Event | None = None
        self.loss: Event | None = None
        self.winner: Candidate | None = None
        self.plain: Candidate | None = None
        self.single: Candidate | None = None
        self.current: Candidate | None = None  # what ran when tune was asked (--current), at the first batch
        self.time = TimeLedger()  # where the wall clock went; per configuration, its switches' seconds
        self.meta: dict[str, Any] = {
            "command": plan.command,
            "start_time": now_iso(),
            "workload": plan.family,
            "batch_sizes": list(plan.batch_sizes),
            "knob_pool": [f"{n}={v}" for n, v in plan.pool],
            "settings": {k: v for k, v in vars(plan.settings).items() if not k.startswith("_")},
            "skipped": list(plan.skipped),
            "cpu_count": os.cpu_count(),
            "status": "running",
        }
        self._csv = FlushedCsv(self.out_dir / "tune.csv", CSV_COLUMNS)
        self.write_json()

    # -- as the race goes -----------------------------------------------------------------------
    def _row(self, row: dict[str, Any]) -> None:
        self._csv.row(row)

    def add_candidates(self, candidates: list[Candidate]) -> None:
        self.candidates.extend(c for c in candidates if c not in self.candidates)

    def candidate_of(self, result: RepeatResult) -> Candidate:
        return next(c for c in self.candidates if c.config == result.config)

    def add_result(self, result: RepeatResult) -> None:
        """A window finished: its row now (flushed: a kill keeps it)."""
        self.results.append(result)
        c = self.candidate_of(result)
        e = result.estimates()
        self._row(
            {
                "row_kind": "window",
                "candidate": c.label,
                "variant": c.config.variant,
                "knobs": c.config.knobs,
                "batch_size": c.config.batch_size,
                "stage": self.stage_of.get(result.repeat, ""),
                "rung": result.repeat,
                "seconds": result.seconds,
                "n_samples": result.n_samples,
                "samples_per_s": _mean(e.get("samples_per_s")),
                "steps_per_s": _mean(e.get("steps_per_s")),
                "gpu_util_pct": _mean(e.get("gpu_util_pct")),
                "mfu_pct": _mean(e.get("mfu_pct")),
                "sm_active_pct": _mean(e.get("sm_active_pct")),
                "error": result.error,
            }
        )

    def note_session(self, session: Any) -> None:
        """The workload started: GPU, driver, torch and CUDA into the metadata."""
        from gpudash.recording.record import started_metadata

        info = session.gpu_info
        self.meta.update(gpu_name=info.name, driver=info.driver, nvml_unavailable=info.unavailable)
        self.meta.update(started_metadata(session.started_details, self.meta))
        self.write_json()

    def note(self, text: str) -> None:
        self.notes.append(text)

    # -- the figures ----------------------------------------------------------------------------
    def summary(self, c: Candidate) -> ConfigSummary:
        return summarize_one(c.config, self.results)

    def speed(self, c: Candidate | None) -> Estimate | None:
        return None if c is None else self.summary(c).stats.get("samples_per_s")

    def versus(self, base: Candidate | None) -> Comparison | None:
        """The winner's samples/s over ``base``'s, with its interval and verdict."""
        new, old = self.speed(self.winner), self.speed(base)
        if new is None or old is None or base == self.winner:
            return None
        return compare(old, new)

    def references(self) -> list[tuple[str, str, Candidate | None]]:
        """What the winner is weighed against, as (JSON key, words, candidate): what ran when tune
        was asked (where ``--current`` named it), the plain variant, the best single knob."""
        refs: list[tuple[str, str, Candidate | None]] = []
        if self.plan.current is not None:
            refs.append(("vs_current", "what runs now", self.current))
        refs.append(("vs_plain", "the plain variant", self.plain))
        refs.append(("vs_best_single_knob", "the best single knob", self.single))
        return refs

    def ranked(self) -> list[Candidate]:
        """Every candidate, the measured ones fastest first, then the unmeasured."""
        speeds = {c: self.speed(c) for c in self.candidates}
        return sorted(self.candidates, key=lambda c: (speeds[c] is None, -(_mean(speeds[c]) or 0.0)))

    def fate(self, c: Candidate) -> str:
        if c == self.winner:
            return "the winner"
        if c in self.fates:
            return self.fates[c]
        return "not measured (the race stopped first)" if self.speed(c) is None else "finalist"

    # -- the files ------------------------------------------------------------------------------
    def write_json(self) -> None:
        path = self.out_dir / "tune.json"
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.meta, indent=2, default=str) + "\n", encoding="utf-8")
        os.replace(tmp, path)

    def finish(self, status: str, code: ExitCode, elapsed_s: float) -> list[str]:
        """The candidate rows, the JSON, the Markdown and the plot; returns the files written."""
        for c in self.ranked():
            s, e = self.summary(c), self.speed(c)
            self._row(
                {
                    "row_kind": "candidate",
                    "candidate": c.label,
                    "variant": c.config.variant,
                    "knobs": c.config.knobs,
                    "batch_size": c.config.batch_size,
                    "stage": c.stage,
                    "seconds": s.seconds,
                    "n_samples": s.n_samples,
                    "samples_per_s": _mean(e),
                    "samples_per_s_low": None if e is None else e.low,
                    "samples_per_s_high": None if e is None else e.high,
                    "steps_per_s": _mean(s.steps),
                    "gpu_util_pct": _mean(s.stats.get("gpu_util_pct")),
                    "mfu_pct": _mean(s.stats.get("mfu_pct")),
                    "sm_active_pct": _mean(s.stats.get("sm_active_pct")),
                    "fate": self.fate(c),
                    "error": s.error,
                }
            )
        self._csv.close()
        self.meta.update(
            end_time=now_iso(), status=status, exit_code=int(code), elapsed_s=round(elapsed_s, 1), notes=self.notes
        )
        self.meta.update(time_s=self.time.as_dict(elapsed_s), answer=self.answer())
        self.write_json()
        (self.out_dir / "tune.md").write_text(markdown(self, status, elapsed_s), encoding="utf-8")
        written = ["tune.csv", "tune.json", "tune.md"]
        bars = self.bars()
        if bars:
            from gpudash.tune.plot import plot

            try:
                written += [p.name for p in plot(bars, self.out_dir, f"gpudash tune · {self.plan.family}")]
            except ImportError:
                self.note("no plot: matplotlib is not installed (pip install 'gpudash[report]')")
        return written

    def bars(self) -> list[Bar]:
        """The plot's bars: every measured candidate, fastest first, and how it fared."""
        out = []
        for c in self.ranked():
            e = self.speed(c)
            if e is not None:
                fared = "winner" if c == self.winner else ("dropped" if c in self.fates else "finalist")
                out.append(Bar(f"{c.label} · b{c.config.batch_size}", e, fared))
        return out

    def answer(self) -> dict[str, Any] | None:
        """The winner, its figures and its command (for tune.json)."""
        w = self.winner
        if w is None:
            return None
        out: dict[str, Any] = {
            "winner": w.label,
            "variant": w.config.variant,
            "knobs": w.config.knobs,  # their text form, "none" for none (workloads.knobs)
            "batch_size": w.config.batch_size,
            "samples_per_s": _estimate_dict(self.speed(w)),
            "command": reproduce(self.plan, w),
        }
        for name, _, base in self.references():
            c = self.versus(base)
            if c is not None and base is not None:
                out[name] = {
                    "base": base.label,
                    "ratio": c.ratio,
                    "low": c.low,
                    "high": c.high,
                    "verdict": str(c.verdict),
                }
        for name, event in (("diagnosis_before", self.before), ("diagnosis_after", self.after), ("loss", self.loss)):
            if event is not None:
                out[name] = {"message": event.message, **event.details}
                if (judged := judgement_of(event)) is not None:  # the verdict and what it stands on
                    out[name] |= {"bound": str(judged.head.bound), "judgement": judged.as_dict()}
        return out

    def summary_lines(self) -> list[str]:
        """What stdout says: the winner and its command (or that there is none)."""
        w = self.winner
        if w is None:
            return ["no winner: nothing was measured"]
        lines = [f"fastest: {w.label} at batch {w.config.batch_size}: {fmt_pm(self.speed(w))} samples/s"]
        for _, name, base in self.references():
            c = self.versus(base)
            if base is not None and base == w:
                lines.append(f"  it is {name}")
            elif c is not None and base is not None:
                lines.append(f"  vs {name} ({base.label}): {fmt_ratio(c)}, {c.verdict}")
        if self.loss is not None:
            lines.append(f"  {self.loss.message}")
        lines.append(f"run it: {reproduce(self.plan, w)}")
        return lines


def _estimate_dict(e: Estimate | None) -> dict[str, Any] | None:
    return None if e is None else {"mean": e.mean, "low": e.low, "high": e.high}


def _versus_row(report: TuneReport, name: str, base: Candidate | None) -> str:
    if base is not None and base == report.winner:
        return f"| {name} | – | – | the winner is {name} |"
    c = report.versus(base)
    if c is None or base is None:
        return f"| {name} | – | – | not measured |"
    who = f"{name} (`{base.label}` b{base.config.batch_size})"
    return f"| {who} | {fmt_pm(report.speed(base))} | {fmt_ratio(c)} | {c.verdict} |"


def _device_name(meta: dict[str, Any]) -> str:
    return str(meta.get("device_name") or meta.get("gpu_name") or "CPU")


def _diagnosis_line(event: Event | None) -> str:
    return "not measured" if event is None else (event.message or "")


def sync_lines(report: TuneReport) -> list[str]:
    """The host-device syncs by line that each diagnosis counted (CUDA only; none: nothing)."""
    lines: list[str] = []
    for name, event in (("the plain run", report.before), ("the winner", report.after)):
        judgement = judgement_of(event) if event is not None else None
        table = judgement.evidence.sync_sites if judgement is not None else None
        if table is not None:
            lines += sync_md.table_lines(name, table)
    return ["### Host-device syncs by line", "", *lines] if lines else []


def markdown(report: TuneReport, status: str, elapsed_s: float) -> str:
    """``tune.md``."""
    plan = report.plan
    lines = [*_header_lines(report, status, elapsed_s), *_winner_lines(report), *_guard_lines(report)]
    lines += [
        "## What bounds the step",
        "",
        f"- **Before** (the plain run): {_diagnosis_line(report.before)}",
        f"- **After** (the winner): {_diagnosis_line(report.after)}",
        "",
        *sync_lines(report),
    ]
    lines += _candidate_lines(report)
    lines += report.time.markdown(elapsed_s, "race")
    lines += _method_lines(plan)
    refused = [*plan.skipped, *report.refusals]
    if refused:
        lines += ["## Not tried", "", *[f"- {r}" for r in refused], ""]
    if report.notes:
        lines += ["## Notes", "", *[f"- {n}" for n in report.notes], ""]
    return "\n".join(lines)


def _header_lines(report: TuneReport, status: str, elapsed_s: float) -> list[str]:
    """The command, date, device, torch, what was searched and the outcome."""
    plan, meta = report.plan, report.meta
    return [
        "# gpudash tune",
        "",
        f"- **Command:** `{plan.command}`",
        f"- **Date:** {meta['start_time']} to {meta.get('end_time', now_iso())} ({elapsed_s:.0f} s)",
        f"- **Device:** {meta.get('device', plan.settings.device)} · {_device_name(meta)}",
        f"- **torch** {meta.get('torch_version', '?')} · {os.cpu_count()} CPUs",
        f"- **Searched:** {plan.family} at batch {', '.join(map(str, plan.batch_sizes))}; knobs "
        f"{', '.join(n if v == 'on' else f'{n}={v}' for n, v in plan.pool) or 'none'}"
        f"{' (--exact)' if plan.settings.exact else ''}",
        f"- **Outcome:** {status}; {len(report.results)} windows over {len(report.candidates)} candidates",
        "",
    ]


def _winner_lines(report: TuneReport) -> list[str]:
    """The fastest configuration, its command and its comparisons (or that there is none)."""
    w = report.winner
    if w is None:
        return ["No candidate was measured: no winner.", ""]
    return [
        "## The fastest configuration",
        "",
        f"**`{w.label}`** at batch {w.config.batch_size}: {fmt_pm(report.speed(w))} samples/s "
        f"({fmt_pm(report.summary(w).steps)} steps/s).",
        "",
        "```",
        reproduce(report.plan, w),
        "```",
        "",
        "| against | its samples/s | the winner's speed relative to it | verdict |",
        "|---|--:|--:|---|",
        *(_versus_row(report, name, base) for _, name, base in report.references()),
        "",
        "Ratios are samples/s over samples/s with their 95% intervals (each candidate over all its "
        "windows); *faster* only when the interval excludes 1 and the gain exceeds 2%.",
        "",
    ]


def _candidate_lines(report: TuneReport) -> list[str]:
    """Every candidate: its figures, the seconds its switches took and its fate."""
    lines = [
        "## Every candidate",
        "",
        "| # | candidate | batch | samples/s ± CI | MFU % | measured | switching to it | fate |",
        "|--:|---|--:|--:|--:|--:|--:|---|",
    ]
    for i, c in enumerate(report.ranked(), start=1):
        s = report.summary(c)
        mark = " †" if _precision_changed(c) else ""
        switched = report.time.switch_s.get(c.config)
        lines.append(
            f"| {i} | `{c.label}`{mark} | {c.config.batch_size} | {fmt_pm(report.speed(c))} | "
            f"{fmt_pm(s.stats.get('mfu_pct'))} | {s.seconds:.1f} s | "
            f"{'–' if switched is None else f'{switched:.1f} s'} | {report.fate(c)} |"
        )
    return [
        *lines,
        "",
        "† changes a number format (bf16, TF32): `--exact` leaves it out. *Switching to it*: the "
        "seconds its changes took, its knobs' warm-up (capture, compile, autotuning) included.",
        "",
    ]


def _precision_changed(c: Candidate) -> bool:
    from workloads.knobs import KNOBS, parse_knobs

    return any(KNOBS[n].changes_precision for n in parse_knobs(c.config.knobs))


def _guard_lines(report: TuneReport) -> list[str]:
    """The correctness guard's section."""
    w = report.winner
    if w is None:
        return []
    if not _precision_changed(w):
        return [
            "## Correctness",
            "",
            "The winner's knobs change no number format: it trains what the plain run trains (to the "
            "last bits, which a different kernel or summation order may move).",
            "",
        ]
    measured = report.loss.message if report.loss is not None else "not measured (see the notes)"
    return [
        "## Correctness",
        "",
        "The winner changes a number format. A plain fresh copy and the winner, trained from the "
        f"same start on the same batches: {measured}. `--exact` keeps to knobs that change none.",
        "",
    ]


def _method_lines(plan: TunePlan) -> list[str]:
    s = plan.settings
    return [
        "## How it was measured",
        "",
        f"Every window starts {s.warmup:g} s after its switch (a knob's own warm-up — capture, "
        f"compile, autotuning — is over before that) and keeps {s.seconds:g} s of samples in the first "
        f"look, {race.GROWTH:g}× longer at each rung. The plain variants are measured first (again, up "
        "to twice, where a window held too few samples for an interval); those "
        f"clearly slower than their batch size's leader drop out (at most {race.VARIANTS_KEPT} stay per "
        "batch size). The leading variant gets each knob alone and the knob stacks, in the order the "
        "diagnosis of the plain run points to; a runner-up variant gets the stacks that led on it (at "
        f"most {race.STACKS_FOLLOWED}); `compile`, last, goes on the fast stack only where {race.COMPILE_REACH:g}× "
        "that stack's speed would reach the leader. Each rung then drops the candidates whose interval "
        f"lies clearly below the leader's and keeps the best third (at least {race.MIN_KEPT}), in a "
        "seeded shuffled order; the leader, the plain variant and the best single knob share a "
        "last interleaved round (the other finalists too, unless a rung has just measured them); "
        f"then the leader and its closest rival again, up to {race.EXTRA_ROUNDS} times, while the leader's "
        f"interval is wider than ±{race.PRECISION:.0%} of its mean.",
        "",
    ]
