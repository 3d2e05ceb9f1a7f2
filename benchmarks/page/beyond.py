"""The "Beyond the articles" section: PyTorch's own knobs on the articles' families (one
``--preset beyond`` sweep per family), issue 9's targets, and what each knob does and why."""

# the page's Markdown templates: one table row per source line, as the page prints it
from __future__ import annotations

from benchmarks.page.ladder_profile import ladder_profile_section
from benchmarks.page.results import overhead
from benchmarks.page.sweeps import (
    ALL,
    BEYOND,
    DECODE,
    DOCS,
    FAST,
    at_least,
    best_label,
    bound_pct,
    cell,
    est,
    header,
    ladder,
    ratio,
    rows,
    seconds_per_step,
    steps,
    tables,
    target_row,
    versus,
)
from gpudash.stats.fmt import fmt_pm
from workloads.registry import FAMILIES

# the ladder up to gpu-transform, as the 20 s sweep ran it (the catalog's order; gpu-decode has its own sweep)
LADDER_ORDER = [name for name in FAMILIES["input_pipeline"].variant_names if name != "gpu-decode"]


def ladder_verdicts(name: str, w: str, b: int, order: list[str]) -> str:
    """Each rung against the one before, by verdict: "faster 1, no change detected 4"."""
    verdicts = [ratio(name, w, old, new, b).verdict for old, new in zip(order, order[1:], strict=False)]
    return ", ".join(f"{v} {verdicts.count(v)}" for v in dict.fromkeys(verdicts))


def beyond_section() -> str:
    """The knobs' sweeps against the articles' fixes, issue 9's targets and what each knob does."""
    parts = [beyond_overview(), issue9_targets(), host_bound_note(), model_knob_notes(), input_knob_notes()]
    return "".join([*parts, input_ladder_and_tables()])


def beyond_overview() -> str:
    """The runs, and per family: plain, the article's fix and the fastest knobs."""
    runs = "\n".join(f"- {header(n)}" for n in BEYOND.values())
    return f"""## Beyond the articles: PyTorch's own knobs

The articles teach three fixes (streams, GPU augmentation, no syncs). The knobs they never touch
(`gpudash list`; `--knob`, the `k` panel in the dashboard) move the same steps further. Per family:
the plain variant, the article's fix and the fastest knob setting measured, each with its 95%
interval; the ratios are `gpudash.stats.comparison.compare` over the batch means each `sweep.csv` carries.
`gpudash sweep --preset beyond --device cuda --out beyond` reproduces these runs (here split into one
run per family, with shorter windows, to fit the session's GPU time):

{runs}

| family | batch | plain | the article's fix (vs plain) | fastest with knobs | vs plain | vs the fix |
|---|--:|---|---|---|---|---|
{beyond_rows()}

![encdec with knobs](img/h100-beyond-encdec.png)

"""


def issue9_targets() -> str:
    """Issue 9's targets against the measured ratios and intervals."""
    verdicts = ladder_verdicts(BEYOND["input_pipeline"], "input_pipeline", 256, LADDER_ORDER)
    return f"""### The targets of issue 9, measured

| target | goal | measured (95% CI) | |
|---|---|---|---|
{beyond_targets()}
| encdec batch 16: plain pipelined at ≥ 92% of the overlap bound | ≥ 92% | {fmt_pm(bound_pct(ALL, "encdec", "pipelined", 16))}% (run 1 of the page) | {at_least(bound_pct(ALL, "encdec", "pipelined", 16), 92.0)} |
| input pipeline: the best rung at ≤ 0.12 s per step, batch 256, 16 CPUs | ≤ 0.12 s | gpu-decode {seconds_per_step(DECODE, "input_pipeline", "gpu-decode", 256)} | {at_least(est(rows(DECODE)[("input_pipeline", "gpu-decode", 256)]), 1 / 0.12)} |
| input pipeline: each rung at least as fast as the one before, or a profile says why it cannot help | no rung slower | {verdicts} | {"**not met**: a rung is slower" if "slower" in verdicts else "met: none slower; the profile below shows the CPU time each saves, and why `reorder` and `batch-transform` cannot help here"} |

"""


def host_bound_note() -> str:
    """Why the plain pipeline at batch 16 stays below 92% of its bound."""
    return f"""### Why the plain pipeline at batch 16 stays below 92% of its bound: the host

The overlap bound takes each stage's GPU time alone; it assumes the host can enqueue a step
faster than the GPU runs it. It cannot here. A probe, `benchmarks/host_time_probe.py` (removed
after commit e4133ae; `git show e4133ae:benchmarks/host_time_probe.py`), timed how long the host
takes to enqueue a step while the launch queue is empty (right after a synchronize: 3 steps,
divided by 3, median of 30), against the steady wall time per step:

{host_probe()}

At batch 16 the pipelined step costs the host as long to enqueue as the GPU takes to run it (host
share of wall ≈ 100%), and longer than the slower stage alone (the `train` stage, ≈ 4.2 ms): the
~187 kernel launches per step, plus the pipeline's stream switches, events and `record_stream`
bookkeeping, put the host on the critical path (one run, medians of 30 repeats with their p95: a
diagnosis, not a comparison). That is the consumer stream's idle time in the profile of
`benchmarks/pipeline_profile.py` (docs/measurements.md; a probe removed after commit e4133ae).
Only removing host work lifts it: with CUDA graphs (the `cuda_graph` knob) the same pipeline
replays each stage in one launch. The 92% target of the plain variant stays unmet on this host;
the figure is not tuned by changing the workload's model.

"""


def model_knob_notes() -> str:
    """What the model's knobs (autocast, graphs, compile, TF32) do here, and why."""
    e, s = BEYOND["encdec"], BEYOND["sync_loss"]
    best, piped, comp = f"serial+{FAST}+cuda_graph", f"pipelined+{FAST}+cuda_graph", "serial+compile"
    fast = f"serial+{FAST}"
    return f"""### What each knob does here, and why (from the sweeps' own GPU % and stage times)

GPU % and stage times below are the sweeps' means; their intervals are in the sweep tables at the
end of this section. Every ratio carries its own interval and verdict.

- **bf16 autocast, channels_last and cudnn.benchmark together** make every kernel cheaper, and that
  alone can make a small step *slower*: encdec at batch 8 goes {steps(e, "encdec", "serial", 8)} →
  {steps(e, "encdec", fast, 8)} steps/s ({versus(e, "encdec", "serial", fast, 8)}) while NVML's
  kernel-active share falls from {cell(e, "encdec", "serial", 8, "gpu_util_pct")}% to
  {cell(e, "encdec", fast, 8, "gpu_util_pct")}%: the GPU now waits for the host to launch kernels
  (autocast adds a cast kernel before each convolution). At batch 32 the kernels are large enough
  to keep the GPU busy ({cell(e, "encdec", fast, 32, "gpu_util_pct")}%), and the same three knobs give
  {versus(e, "encdec", "serial", fast, 32)}. The stage times say where: the decoder's training step
  {cell(e, "encdec", "serial", 32, "stage2_ms")} → {cell(e, "encdec", fast, 32, "stage2_ms")} ms,
  the encoder {cell(e, "encdec", "serial", 32, "stage1_ms")} → {cell(e, "encdec", fast, 32, "stage1_ms")} ms.
- **CUDA graphs** remove the host's launch cost, so they pay where the host is the limit: on top of
  the three knobs at encdec batch 8, {versus(e, "encdec", fast, best, 8)} (kernel-active
  {cell(e, "encdec", best, 8, "gpu_util_pct")}%); on a step that already keeps the GPU busy they add
  little: `sync_loss fixed` at batch 32 {versus(s, "sync_loss", "fixed", "fixed+cuda_graph", 32)}.
  Capture needs a step that never waits for the host, so `sync-heavy` and the per-image rotation loop
  are refused with that reason.
- **Pipelining with graphs.** Each stage is captured on its own and replayed on its own stream, so the
  overlap survives: {versus(e, "encdec", best, piped, 8)} over the graphed serial step at batch 8
  and {versus(e, "encdec", best, piped, 32)} at batch 32, at
  {fmt_pm(bound_pct(e, "encdec", piped, 8))}% and {fmt_pm(bound_pct(e, "encdec", piped, 32))}%
  of their overlap bounds.
- **torch.compile (default mode)** compiles the model modules (forward and backward), not the
  optimizer or the loss: {versus(e, "encdec", "serial", comp, 32)} at batch 32, and
  {versus(e, "encdec", "serial", comp, 8)} at batch 8, where its kernel-active share is
  {cell(e, "encdec", comp, 8, "gpu_util_pct")}%: the compiled code's host-side work per call
  outweighs fewer, fused kernels on a launch-bound step. `compile=reduce-overhead` (which captures
  CUDA graphs itself) is the mode for that case; it was not in these runs.
- **TF32** is not in the sweeps: cuDNN already runs float32 convolutions in TF32 by default, and the
  only matrix product the models have is augment's 4096×10 classifier, so the knob has nothing here
  to speed up. It is there for models with large linear layers.
"""


def input_knob_notes() -> str:
    """What the knobs and the GPU rungs do to the input pipeline."""
    i = BEYOND["input_pipeline"]
    return f"""- **The input pipeline** is bound by its DataLoader workers: the GPU is busy
  {cell(i, "input_pipeline", "gpu-transform", 256, "gpu_util_pct")}% of the time, so the model's knobs
  give {versus(i, "input_pipeline", "gpu-transform", f"gpu-transform+{FAST}", 256)}. The new rung
  `gpu-transform` (colour conversion and scaling per batch on the GPU: batches leave the workers as
  uint8, a quarter of the bytes) ran at {steps(i, "input_pipeline", "gpu-transform", 256)}
  steps/s, but these bursty 20 s windows confirm no single rung against the one before (table below).
- **Decoding on the GPU** is what moves it: the rung `gpu-decode` has the workers read each JPEG's
  bytes and hand them over undecoded, and the training stage decodes the batch with nvjpeg
  (`torchvision.io.decode_jpeg` on a list, on CUDA), crops, masks and colours it on the GPU. In one
  sweep beside `gpu-transform` ({header(DECODE)}): {steps(DECODE, "input_pipeline", "gpu-decode", 256)}
  steps/s, {versus(DECODE, "input_pipeline", "gpu-transform", "gpu-decode", 256)} against
  `gpu-transform`'s {steps(DECODE, "input_pipeline", "gpu-transform", 256)}, and the GPU busy
  {cell(DECODE, "input_pipeline", "gpu-decode", 256, "gpu_util_pct")}% instead of
  {cell(DECODE, "input_pipeline", "gpu-transform", 256, "gpu_util_pct")}%: the workers no longer decode,
  so the model's knobs pay again ({versus(DECODE, "input_pipeline", "gpu-decode", f"gpu-decode+{FAST}", 256)}).

"""


def input_ladder_and_tables() -> str:
    """The input pipeline's ladder, its profile, and the knob sweeps' own tables."""
    e, s, a, i = BEYOND["encdec"], BEYOND["sync_loss"], BEYOND["augment"], BEYOND["input_pipeline"]
    return f"""The ladder of the 20 s windows:

| step | steps/s | ratio (95% CI), verdict |
|---|---|---|
{ladder(i, "input_pipeline", 256, LADDER_ORDER)}

{ladder_profile_section()}

{tables(e)}
{tables(s)}
{tables(a)}
{tables(i)}
{tables(DECODE)}
"""


def beyond_rows() -> str:
    """Per family and batch: plain, the article's fix, the best knobs; each against plain and fix."""
    cases = [
        ("encdec", 8, "serial", "pipelined"),
        ("encdec", 32, "serial", "pipelined"),
        ("sync_loss", 8, "sync-heavy", "fixed"),
        ("sync_loss", 32, "sync-heavy", "fixed"),
        ("augment", 32, "cpu", "pipelined"),
        ("input_pipeline", 256, "baseline", "gpu-transform"),
    ]
    out = []
    for w, b, plain, fix in cases:
        name = BEYOND[w]
        best = best_label(name, w, b)
        out.append(
            f"| {w} | {b} | {plain}: {steps(name, w, plain, b)} | {fix}: {steps(name, w, fix, b)}, "
            f"{versus(name, w, plain, fix, b)} | `{best}`: {steps(name, w, best, b)} | "
            f"{versus(name, w, plain, best, b)} | {versus(name, w, fix, best, b)} |"
        )
    return "\n".join(out)


def beyond_targets() -> str:
    e, s, a = BEYOND["encdec"], BEYOND["sync_loss"], BEYOND["augment"]
    best = f"serial+{FAST}+cuda_graph"
    piped = f"pipelined+{FAST}+cuda_graph"
    fixed = f"fixed+{FAST}+cuda_graph"
    lines = [
        target_row("encdec batch 8: best knobs vs plain serial", ratio(e, "encdec", "serial", best, 8), 2.0),
        target_row("encdec batch 32: best knobs vs plain serial", ratio(e, "encdec", "serial", best, 32), 1.9),
        target_row(
            "encdec batch 8: pipelined vs serial, both with the best knobs", ratio(e, "encdec", best, piped, 8), 1.0
        ),
        target_row(
            "encdec batch 32: pipelined vs serial, both with the best knobs", ratio(e, "encdec", best, piped, 32), 1.0
        ),
        target_row("sync_loss batch 8: best knobs vs plain fixed", ratio(s, "sync_loss", "fixed", fixed, 8), 1.3),
        target_row("sync_loss batch 32: best knobs vs plain fixed", ratio(s, "sync_loss", "fixed", fixed, 32), 1.3),
        target_row("sync_loss batch 8: best knobs vs sync-heavy", ratio(s, "sync_loss", "sync-heavy", fixed, 8), 1.9),
        target_row(
            "augment batch 32: pipelined with the best knobs vs plain pipelined",
            ratio(a, "augment", "pipelined", piped, 32),
            1.3,
        ),
    ]
    return "\n".join(lines)


def host_probe() -> str:
    """The output of host_time_probe.py (a probe removed after commit e4133ae; its result), its table
    and the line naming the run."""
    return overhead("h100-host-time-probe.md", DOCS / "bench")
