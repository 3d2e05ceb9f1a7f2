"""Two results of one case set side by side (``python -m benchmarks compare A.json B.json``): each arm
both measured, B's values against A's through gpudash's ``compare`` (each value a batch, so the
interval and the verdict are the ones gpudash prints, its noise threshold included), and each
figure both hold, A's and B's as printed."""

from __future__ import annotations

from benchmarks.harness.result import Result
from benchmarks.harness.stamp import stamp_line
from gpudash.stats.comparison import compare, estimate_from_batches
from gpudash.stats.fmt import fmt_pm, fmt_ratio


def comparison(a: Result, b: Result) -> str:
    """The Markdown of B against A: the runs, their arms and their figures."""
    if a.case != b.case:
        raise ValueError(f"results of two cases ({a.case} and {b.case}): compare runs of one case")
    lines = [
        f"# {a.case}: B against A",
        f"# A: `{a.command}` · {stamp_line(a.stamp)}",
        f"# B: `{b.command}` · {stamp_line(b.stamp)}",
        "",
    ]
    arms = [name for name in a.series if name in b.series]
    if arms:
        lines += ["| arm | A | B | B/A (95% CI) | verdict |", "|---|--:|--:|---|---|"]
        for name in arms:
            sa, sb = a.series[name], b.series[name]
            ea, eb = estimate_from_batches(sa.values), estimate_from_batches(sb.values)
            c = compare(ea, eb, higher_is_better=sa.higher_is_better)
            unit = f" {sa.unit}" if sa.unit else ""
            lines.append(f"| {name} | {fmt_pm(ea)}{unit} | {fmt_pm(eb)}{unit} | {fmt_ratio(c)} | {c.verdict} |")
        lines.append("")
    shared = [name for name in a.figures if name in b.figures]
    if shared:
        lines += ["| figure | A | B |", "|---|---|---|"]
        lines += [f"| {n} | {_said(n, a.figures[n].text)} | {_said(n, b.figures[n].text)} |" for n in shared]
    if not arms and not shared:
        lines.append("(the two runs share no arm and no figure)")
    return "\n".join(lines) + "\n"


def _said(name: str, text: str) -> str:
    """A figure's text without its name in front, as a table cell."""
    return text.removeprefix(f"{name}: ").replace("|", "\\|")
