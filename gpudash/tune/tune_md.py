"""``tune.md``, the page of a ``gpudash tune`` race: the winner with its intervals and the command
that runs it, the correctness guard, the diagnosis before and after (with the host-device syncs
by line), every candidate's figures and fate, where the time went, how it was measured, what was
not tried. Read from the race's ``TuneTally``. Torch-free.
"""

from __future__ import annotations

import os
from typing import Any

from gpudash.core.protocol import Event
from gpudash.diagnosis.judge import judgement_of
from gpudash.report import sync_md
from gpudash.stats.fmt import fmt_pm, fmt_ratio
from gpudash.sweep.report import now_iso
from gpudash.tune import race
from gpudash.tune.candidates import Candidate
from gpudash.tune.plan import TunePlan
from gpudash.tune.tally import TuneTally, reproduce


def _versus_row(report: TuneTally, name: str, base: Candidate | None) -> str:
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


def sync_lines(report: TuneTally) -> list[str]:
    """The host-device syncs by line that each diagnosis counted (CUDA only; none: nothing)."""
    lines: list[str] = []
    for name, event in (("the plain run", report.before), ("the winner", report.after)):
        judgement = judgement_of(event) if event is not None else None
        table = judgement.evidence.sync_sites if judgement is not None else None
        if table is not None:
            lines += sync_md.table_lines(name, table)
    return ["### Host-device syncs by line", "", *lines] if lines else []


def markdown(report: TuneTally, meta: dict[str, Any], status: str, elapsed_s: float) -> str:
    """``tune.md`` (``meta``: tune.json's metadata, for its header)."""
    plan = report.plan
    lines = [*_header_lines(report, meta, status, elapsed_s), *_winner_lines(report), *_guard_lines(report)]
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


def _header_lines(report: TuneTally, meta: dict[str, Any], status: str, elapsed_s: float) -> list[str]:
    """The command, date, device, torch, what was searched and the outcome."""
    plan = report.plan
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


def _winner_lines(report: TuneTally) -> list[str]:
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


def _candidate_lines(report: TuneTally) -> list[str]:
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


def _guard_lines(report: TuneTally) -> list[str]:
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
