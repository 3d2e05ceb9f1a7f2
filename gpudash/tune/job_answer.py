"""The answer of ``gpudash tune [OPTIONS] -- CMD``: what the winner changes beyond the speed
(``notes``), the one JSON document (``--json``'s and tune.json's, every setting typed) and the files
in ``--out``: tune.md, tune.csv (one row a run, as text), tune.json and tune.png/svg. Torch-free;
matplotlib is imported only to draw.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gpudash.core.textfmt import plain
from gpudash.stats.comparison import Estimate, compare
from gpudash.tune import job_edits
from gpudash.tune.job_runs import Run, typed
from gpudash.tune.worker_cpu import GIB


def _lines(mark: str, text: str) -> str:
    return "".join(f"{mark}{line}\n" for line in text.splitlines())


def _interval(e: Estimate | None) -> str:
    if e is None:
        return "–"
    if e.low is None or e.high is None:
        return plain(e.mean)
    return f"{plain(e.mean)} [{plain(e.low)}–{plain(e.high)}]"


def _estimate(e: Estimate | None) -> dict[str, float | None] | None:
    return None if e is None else {"mean": e.mean, "low": e.low, "high": e.high}


def notes(have: dict[str, str], base: Run, winner: Run) -> list[str]:
    """What the winner changes beyond the speed: a Dataset's random draws under workers, the numbers."""
    out = []
    workers = dict(winner.settings).get("num_workers")
    if have.get("draws") == "True" and workers is not None and workers != have.get("num_workers"):
        out.append(
            "the job's Dataset draws random numbers for each sample: with workers each worker draws from its "
            "own seed, so the job's numbers differ in those draws only"
        )
    changed = [k for k in ("tf32", "autocast", "compile") if k in dict(winner.settings)]
    if changed:
        out.append(f"{', '.join(changed)} change the numbers the job computes: compare its loss with the job's own")
    if (batch := dict(winner.settings).get("batch_size")) is not None:
        now = base.memory.get("batch") or "the job's"
        out.append(
            f"batch {batch} instead of {now} changes the training: fewer steps an epoch, and the learning rate "
            "usually scaled with it (linearly, or by its square root with Adam); compare its loss curve with the "
            "job's own"
        )
    return out


def answer(
    base: Run, winner: Run, runs: list[Run], edits: list[job_edits.Edit], stopped: str | None = None
) -> dict[str, Any]:
    """``--json``'s document (and tune.json's): every setting typed (``typed``), the edits and their
    unified ``diff`` (None: no edit), what stopped the worker climb where a bound did."""
    c = compare(base.rate, winner.rate) if base.rate and winner.rate else None
    speedup = {"mean": c.ratio, "low": c.low, "high": c.high, "verdict": str(c.verdict)} if c else None

    def side(r: Run) -> dict[str, Any]:
        return {"settings": typed(r.settings), "steps_per_s": _estimate(r.steps), "samples_per_s": _estimate(r.samples)}

    def row(r: Run) -> dict[str, Any]:
        memory = None if r.worker_memory is None else r.worker_memory.per_worker / GIB
        return {
            **side(r),
            "name": r.name,
            "error": r.error,
            "dropped_early": r.dropped,
            "worker_busy": r.worker_busy,
            "worker_memory_gib": memory,
        }

    edited = [e.as_dict() for e in edits]  # (keyword names: "baseline" is a family's variant too)
    diff = job_edits.unified_diff(edits) or None
    return dict(
        baseline=side(base),
        winner=side(winner),
        speedup=speedup,
        edits=edited,
        diff=diff,
        climb_stopped=stopped,
        candidates=[row(r) for r in runs],
    )


def _csv_row(r: Run) -> list[str]:
    """One run's tune.csv row: its samples/s with the interval's ends and its steps/s, as text ("" where unknown)."""
    s = r.samples
    samples = ["", "", ""] if s is None else ["" if v is None else f"{v:.6g}" for v in (s.mean, s.low, s.high)]
    return [r.name, *samples, f"{r.steps.mean:.6g}" if r.steps else "", r.error]


def write_files(out: Path, command: list[str], runs: list[Run], doc: dict[str, Any], sentence: str) -> list[str]:
    """tune.md, tune.csv (one row a run, as text) and tune.json (``doc``, typed) in ``out``."""
    import csv

    (out / "tune.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    with open(out / "tune.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["candidate", "samples_per_s", "ci_low", "ci_high", "steps_per_s", "error"])
        for r in runs:
            w.writerow(_csv_row(r))
    rows = [f"| {r.name} | {_interval(r.rate)} | {r.error} |" for r in runs]
    edits = [
        f"`{e['file']}`, line {e['line']}:\n\n```diff\n{_lines('-', e['before'])}{_lines('+', e['after'])}```\n"
        for e in doc["edits"]
    ]
    text = "\n".join(
        [
            "# gpudash tune: your job",
            "",
            f"- **Command:** `{' '.join(command)}`",
            f"- **Answer:** {sentence}",
            *(f"- **Note:** {note}" for note in doc["notes"]),
            "",
            "| candidate | rate (95% interval) | error |",
            "|---|---|---|",
            *rows,
            "",
            "## The change",
            "",
            *(edits or ["- none: the job as written is as fast as any candidate measured"]),
            "",
        ]
    )
    (out / "tune.md").write_text(text, encoding="utf-8")
    return ["tune.md", "tune.csv", "tune.json", *_draw(out, runs, doc)]


def _draw(out: Path, runs: list[Run], doc: dict[str, Any]) -> list[str]:
    """tune.png and tune.svg: each run's rate with its interval, fastest on top, the winner in colour."""
    from gpudash.tune.plot import Bar, plot

    winner = doc["winner"]["settings"]
    measured = [r for r in runs if r.rate is not None]
    ranked = sorted(measured, key=lambda r: r.rate.mean if r.rate else 0.0, reverse=True)
    bars = [Bar(r.name, r.rate, "winner" if typed(r.settings) == winner else "dropped") for r in ranked if r.rate]
    return [path.name for path in plot(bars, out, "gpudash tune: your job's settings")] if bars else []
