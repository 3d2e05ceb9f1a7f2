"""Why ``reorder`` and ``batch-transform`` cannot help on this machine: the input pipeline's
published profile (``input_pipeline_profile.py``, a probe removed after commit e4133ae; its result)."""

from __future__ import annotations

from benchmarks.harness.result import Table
from benchmarks.page.results import overhead, result
from benchmarks.page.sweeps import DOCS

LADDER_PROFILE = "h100-input-pipeline-profile.md"


def by_rung(t: Table) -> dict[str, dict[str, str]]:
    """A table as {rung: {column: cell}}."""
    return {row[0]: dict(zip(t.columns, row, strict=False)) for row in t.rows}


def profile_tables() -> tuple[str, dict[str, dict[str, str]], dict[str, dict[str, str]]]:
    """The profile as printed, and its two tables by rung (one thread; training)."""
    one, train = result(DOCS / "bench", LADDER_PROFILE).tables()[:2]
    return overhead(LADDER_PROFILE, DOCS / "bench"), by_rung(one), by_rung(train)


def _ms(cell: str) -> float:
    return float(cell.split()[0])


def ladder_profile_section() -> str:
    """Why reorder and batch-transform cannot help on this machine: the profile's figures."""
    tables, one, train = profile_tables()
    total = {r: _ms(c["total (25–75%)"]) for r, c in one.items()}
    decode = {r: _ms(c["decode"]) for r, c in one.items()}
    later = ["dilation", "reorder", "batch-transform", "gpu-transform"]
    share = [100 * decode[r] / total[r] for r in later]
    colour = _ms(one["reorder"]["colour"]) + _ms(one["reorder"]["scale"])
    collate = _ms(one["batch-transform"]["colour in collate"])
    saved = (_ms(one["dilation"]["to tensor"]) - _ms(one["reorder"]["to tensor"])) + max(colour - collate, 0.0)
    waits = [train[r]["loop waiting for a batch"] for r in train if r != "baseline"]
    busy = [train[r]["CPUs busy"] for r in train if r != "baseline"]
    worker = {r: train[r]["worker CPU ms/sample"] for r in train}
    rates = ", ".join(f"{r} {train[r]['steps/s (95% CI)']}" for r in train)
    return f"""### Why `reorder` and `batch-transform` cannot help on this machine: a profile

One run of `benchmarks/input_pipeline_profile.py`, a probe removed after commit e4133ae
(`git show e4133ae:benchmarks/input_pipeline_profile.py`): the one-thread figures are medians of
200 samples with the total's 25–75% range, the training figures means of 4 windows with their 95%
interval: a diagnosis, not a comparison (the comparisons, with their verdicts, are the sweep's
ladder above).

{tables}

- **Decoding is most of a sample, and no CPU rung touches it.** From `dilation` on, decoding the
  800×533 JPEG is {min(share):.0f}–{max(share):.0f}% of a sample's time on one thread
  ({min(decode[r] for r in later):.2f}–{max(decode[r] for r in later):.2f} ms of
  {min(total[r] for r in later):.2f}–{max(total[r] for r in later):.2f}). `reorder` crops before the
  tensor conversion, but PIL decodes the whole image before it can crop a JPEG, so it saves only the
  conversion of the full image ({one["dilation"]["to tensor"]} → {one["reorder"]["to tensor"]} ms); the
  chain's total goes {one["dilation"]["total (25–75%)"]} → {one["reorder"]["total (25–75%)"]} ms.
  `batch-transform` moves colour conversion and scaling ({colour:.2f} ms a sample) into collate,
  where the batch at 256 px costs {one["batch-transform"]["colour in collate"]} ms a sample: nothing
  saved. Together the two rungs save at most the conversion `reorder` skips, {saved:.2f} ms of the
  {total["dilation"]:.2f} ms a sample costs ({100 * saved / total["dilation"]:.0f}%); the medians of
  the whole chain moved {total["dilation"]:.2f} → {total["reorder"]:.2f} → {total["batch-transform"]:.2f} ms,
  inside each one's 25–75% range.
- **The loader is the bottleneck on every rung from `workers` on**: the training loop waits for a
  batch {min(waits)}–{max(waits)} of its wall time, with the CPUs {min(busy)}–{max(busy)} busy. The
  workers' CPU time per sample follows the one-thread chain: {worker["workers"]} ms (`workers`) →
  {worker["dilation"]} (`dilation`) → {worker["reorder"]} (`reorder`) → {worker["batch-transform"]}
  (`batch-transform`) → {worker["gpu-transform"]} (`gpu-transform`, no colour work on the CPUs).
- **So on this machine** `dilation` is the one CPU rung after `workers` that removes CPU work
  worth measuring, and `reorder` and `batch-transform` can move a step by no more than the CPU time
  they save, which is inside the spread of these windows (steps/s: {rates}). No rung measured
  slower than the one before it, in the sweep above or here. The step that does move the
  ladder is taking the decode off the CPUs: `gpu-decode`, above.
"""
