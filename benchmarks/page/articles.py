"""The page's opening and the articles' tables reproduced with intervals: the A/A check, ``encdec``'s
pipelining, ``augment``, ``sync_loss`` and the input pipeline's ladder."""

# the page's Markdown templates: one table row per source line, as the page prints it
from __future__ import annotations

from benchmarks.page.sweeps import AA, ALL, PIPE, bound_pct, cell, est, header, ladder, rows, steps, tables, versus
from gpudash.stats.fmt import fmt_pm


def articles_section() -> str:
    """The page up to the sections beyond the articles: its opening and the articles' four tables."""
    parts = [
        page_intro(),
        aa_section(),
        encdec_section(),
        augment_section(),
        sync_loss_section(),
        input_pipeline_section(),
    ]
    return "".join(parts)


def page_intro() -> str:
    """The page's title, how to read it and the runs it quotes."""
    return f"""# Benchmarks: the articles' tables, reproduced with intervals

Written by `python -m benchmarks page` from the results in `docs/bench/` (each sweep's
`sweep.result.json` beside its `sweep.csv`, `sweep.json` and `sweep.md` as the sweep wrote them). One command reproduces the page on
your GPU:

```bash
gpudash sweep --preset all --device cuda --out bench
```

![gpudash sweep on an H100](img/h100-all.png)

How to read it: every figure is a mean over 3 interleaved, shuffled repeats with its 95% interval
(batch means of the per-interval samples, `gpudash/stats/comparison.py`). A ratio is *faster* or *slower*
only when its interval excludes 1 and the change exceeds 2%; otherwise it says *no change detected*
or *within noise*. The articles' own figures (A10G) and the articles' code on an H200 are quoted from
[workloads.md](workloads.md); those runs had no intervals.

**The runs on this page** (NVIDIA H100, 2026-11-22):

1. {header(ALL)} — the `encdec`, `augment` and `sync_loss` tables and the plot above. This sweep
   measured the input pipeline with the 10 s windows every family then used; its table is replaced by run 2.
2. {header(PIPE)} — the input pipeline. Its batches come in bursts (every DataLoader worker finishes one
   at about the same time), so a window must span many bursts: the preset now measures it 30 s after
   10 s of warm-up; this run used 20 s after 8 s to fit the session's GPU time.
3. {header(AA)} — the A/A check below.

"""


def aa_section() -> str:
    """The same configuration measured twice in one sweep."""
    aa = rows(AA)[("encdec", "serial#2", 8)]
    return f"""## A/A: the same configuration twice

`encdec` serial at batch 8, listed twice, measured in the same interleaved rounds:
{fmt_pm(est(rows(AA)[("encdec", "serial", 8)]))} vs {fmt_pm(est(aa))} steps/s, ratio
{float(aa["ratio"]):.2f} ({float(aa["ratio_low"]):.2f}–{float(aa["ratio_high"]):.2f}): **{aa["verdict"]}**.
Batch 8 is the noisiest configuration here (the host launches kernels as fast as the GPU runs them;
GPU utilisation {cell(AA, "encdec", "serial", 8, "gpu_util_pct")}%), and the interval is honest about it.

"""


def encdec_section() -> str:
    """``encdec``: serial against two streams, beside the articles' figures."""
    return f"""## Pipelining: `encdec`, serial vs two streams

| batch | article (A10G) | articles' code, H200 | gpudash, H100 |
|--:|---|---|---|
{encdec_rows()}

At batch 8 the H100 showed no change that the noise lets one claim: between the three rounds the
whole machine ran at different speeds (the serial repeats differ by more than pipelining could give),
which widens both intervals. From batch 16 up the gain is clear and larger than the articles'
(+14–16% against +5–7%), because the pipeline follows [the stream rules](workloads.md#the-stream-rules) (features handed
over with an event per batch, no host syncs in the producer): it reaches close to 90% of the overlap
bound, where the articles' code reached 81% at batch 8 on the H200.

{tables(ALL, skip=("augment", "sync_loss", "input_pipeline"))}
"""


def augment_section() -> str:
    """``augment``: CPU, GPU and pipelined GPU augmentation, rung by rung."""
    return f"""## Augmentation: CPU vs GPU vs pipelined GPU (`augment`, batch 32)

Article (A10G): cpu 20.41, gpu 35.22, pipelined 38.82 steps/s. Articles' code, H200 with its loader:
cpu 26.6, gpu 66.6, pipelined 68.2; with the batches already pinned, a vectorized rotation: gpu 168,
pipelined 184.

| step | steps/s | ratio (95% CI), verdict |
|---|---|---|
{ladder(ALL, "augment", 32, ["cpu", "gpu", "gpu-vectorized", "pipelined"])}
| gpu → pipelined-loop | {steps(ALL, "augment", "gpu", 32)} → {steps(ALL, "augment", "pipelined-loop", 32)} | {versus(ALL, "augment", "gpu", "pipelined-loop", 32)} |

The per-image rotation loop (`gpu`, the articles') syncs the host 64 times a step; the vectorized
rotation removes every sync and is the big win. Pipelining the vectorized chain then gains nothing
measurable: augmenting takes {cell(ALL, "augment", "pipelined", 32, "stage1_ms")} ms against
{cell(ALL, "augment", "pipelined", 32, "stage2_ms")} ms of training, so one stream already keeps the GPU
{cell(ALL, "augment", "gpu-vectorized", 32, "gpu_util_pct")}% busy. Unlike the articles' H200 run, the
pipelined loop is not slower than the loop here; it is no faster than the syncs allow either.

{tables(ALL, skip=("encdec", "sync_loss", "input_pipeline"))}
"""


def sync_loss_section() -> str:
    """``sync_loss``: the host-device syncs removed."""
    return f"""## Host-device syncs: `sync_loss`, batch 32

Article (A10G, bs 256): 1.3 s → 5.4 ms per step read off a profiler trace. Articles' code, H200:
36.0 → 24.5 ms per step (1.47×). gpudash, H100: {steps(ALL, "sync_loss", "sync-heavy", 32)} →
{steps(ALL, "sync_loss", "fixed", 32)} steps/s, {versus(ALL, "sync_loss", "sync-heavy", "fixed", 32)},
with {cell(ALL, "sync_loss", "sync-heavy", 32, "syncs_per_step")} syncs per step → {cell(ALL, "sync_loss", "fixed", 32, "syncs_per_step")}. The article's 240× came from a
profiler-inflated trace; the ratio the H200 measured with its code is the one reproduced here.

{tables(ALL, skip=("encdec", "augment", "input_pipeline"))}
"""


def input_pipeline_section() -> str:
    """The input pipeline's ladder, rung by rung, and its sweep."""
    return f"""## The input pipeline, fixed step by step (`input_pipeline`, batch 256)

Article (A10G, 8 vCPUs): 1.3 → 1.17 → 0.78 → 0.72 → 0.75 s per step. Articles' code, H200, 16 CPUs:
0.66 → 0.32 → 0.25 → 0.248 s per step (baseline, workers, dilation, reorder).

| step | steps/s | ratio (95% CI), verdict |
|---|---|---|
{ladder(PIPE, "input_pipeline", 256, ["baseline", "workers", "dilation", "reorder", "batch-transform"])}

Every step is faster than the baseline (the table below), but step by step only more workers is a
gain these intervals confirm: the bursty loader leaves each later step, against the one before,
at *no change detected*. The articles' figures (0.78 → 0.72 → 0.75 s for dilation, reorder, batch
transform) came without a noise estimate; differences of that size are inside this one.

{tables(PIPE)}
![the input pipeline sweep](img/h100-input-pipeline.png)
"""


def encdec_rows() -> str:
    spec = {
        8: ("279 → 296 (+6%), bound 365", "83 → 91 (+9.6%)"),
        16: ("194 → 208 (+7%), bound 251", "–"),
        32: ("129 → 136 (+5%), bound 162", "–"),
    }
    out = []
    for b in (8, 16, 32):
        pct = fmt_pm(bound_pct(ALL, "encdec", "pipelined", b))
        out.append(
            f"| {b} | {spec[b][1]} | {spec[b][0]} | {steps(ALL, 'encdec', 'serial', b)} → "
            f"{steps(ALL, 'encdec', 'pipelined', b)}, {versus(ALL, 'encdec', 'serial', 'pipelined', b)}; "
            f"bound {cell(ALL, 'encdec', 'pipelined', b, 'overlap_bound')}, pipelined at {pct}% of it |"
        )
    return "\n".join(out)
