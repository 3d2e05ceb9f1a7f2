"""The files of ``gpudash tune``: ``tune.csv`` (a row per window as it finishes, then a row per
candidate), ``tune.json`` (the metadata, the answer and ``time_s``: where the time went,
``gpudash.sweep.timing``), ``tune.md`` (``gpudash.tune.tune_md``: the winner with its intervals,
the diagnosis before and after, every candidate's fate, the command that runs the winner, where
the time went) and ``tune.png``/``tune.svg``; what stdout says at the end. The figures are the
race's tally's (``gpudash.tune.tally``). Torch-free; matplotlib is imported only to draw.
"""

from __future__ import annotations

import json
import os
from typing import Any

from gpudash.core.protocol import ExitCode
from gpudash.diagnosis.judge import judgement_of
from gpudash.stats.comparison import Estimate
from gpudash.stats.fmt import fmt_pm, fmt_ratio
from gpudash.sweep.csv_rows import FlushedCsv
from gpudash.sweep.report import now_iso
from gpudash.sweep.results import RepeatResult
from gpudash.tune.plan import TunePlan
from gpudash.tune.plot import Bar
from gpudash.tune.tally import TuneTally, mean_of, reproduce
from gpudash.tune.tune_md import markdown

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


class TuneReport(TuneTally):
    """Collects the race's windows and decisions and writes its files into ``plan.out_dir``."""

    def __init__(self, plan: TunePlan) -> None:
        super().__init__(plan)
        self.out_dir = plan.out_dir
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
                "samples_per_s": mean_of(e.get("samples_per_s")),
                "steps_per_s": mean_of(e.get("steps_per_s")),
                "gpu_util_pct": mean_of(e.get("gpu_util_pct")),
                "mfu_pct": mean_of(e.get("mfu_pct")),
                "sm_active_pct": mean_of(e.get("sm_active_pct")),
                "error": result.error,
            }
        )

    def note_session(self, session: Any) -> None:
        """The workload started: GPU, driver, torch and CUDA into the metadata."""
        from gpudash.recording.metadata import started_metadata

        info = session.gpu_info
        self.meta.update(gpu_name=info.name, driver=info.driver, nvml_unavailable=info.unavailable)
        if session.info.started is not None:
            self.meta.update(started_metadata(session.info.started, self.meta))
        self.write_json()

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
                    "samples_per_s": mean_of(e),
                    "samples_per_s_low": None if e is None else e.low,
                    "samples_per_s_high": None if e is None else e.high,
                    "steps_per_s": mean_of(s.steps),
                    "gpu_util_pct": mean_of(s.stats.get("gpu_util_pct")),
                    "mfu_pct": mean_of(s.stats.get("mfu_pct")),
                    "sm_active_pct": mean_of(s.stats.get("sm_active_pct")),
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
        (self.out_dir / "tune.md").write_text(markdown(self, self.meta, status, elapsed_s), encoding="utf-8")
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
