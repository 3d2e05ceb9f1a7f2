"""The diagnosis of the reference cases, run again and again: each run's verdict and its evidence.

Each reference case is ``family:variant:batch:knobs=bound`` (knobs joined by ``+``; variant ``-`` for the family's
default, or a role the registry names: ``sync-making``, the first variant that makes the host wait;
``pipelining``, its first pipelined one; batch ``-`` for the family's default) with the bottleneck the
diagnosis must name. A case is built once, warmed up, then diagnosed ``runs`` times in one process
(a 30-step window each, as ``gpudash diagnose`` takes), and every run's verdict and figures are
kept: busy share of the steps' span, the GPU's and the host's ms per step, the untraced step, the
median launch delay; and how many runs named the expected bottleneck. ``trace_out`` keeps, per case,
one profiler window's trace events (only those the figures read), gzipped: the replayable evidence
of ``tests/data/diagnosis/``."""

from __future__ import annotations

import gzip
import json
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.harness.case import Unavailable
from benchmarks.harness.context import Run
from benchmarks.harness.params import param

BEST = "amp=bf16+channels_last+cudnn_benchmark+cuda_graph"
DEFAULT_CASES = (
    "sync_loss:sync-making:-:none=sync-bound",
    "input_pipeline:-:32:none=input-bound",
    "encdec:pipelining:8:none=host/launch-bound",
    "encdec:-:8:none=host/launch-bound",
    f"encdec:-:32:{BEST}=GPU-bound (compute)",
)
KEPT_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "user_annotation")


@dataclass(frozen=True)
class Params:
    cases: tuple[str, ...] = param(DEFAULT_CASES, "family:variant:batch:knobs=expected bound, each")
    runs: int = param(10, "diagnoses a case")
    device: str = param("cuda", "cuda, or cpu for the CPU verdicts")
    warmup: int = param(40, "steps before the first diagnosis")
    trace_out: str | None = param(None, "a folder: keep one trimmed profiler window a case there")


@dataclass(frozen=True)
class Reference:
    family: str
    variant: str | None
    batch_size: int | None
    knobs: str
    expected: str

    @classmethod
    def parse(cls, text: str) -> Reference:
        """``family:variant:batch:knobs=bound``, the variant a name, ``-`` or a role (see the module)."""
        from workloads.registry import FAMILIES

        spec, _, expected = text.rpartition("=")
        family, variant, batch, knobs = spec.split(":", 3) if spec.count(":") >= 3 else [*spec.split(":"), "none"]
        info = FAMILIES[family]
        roles = {
            "-": None,
            "sync-making": next((v.name for v in info.variants if not v.sync_free), None),
            "pipelining": next((v.name for v in info.variants if v.pipelined), None),
        }
        chosen = roles[variant] if variant in roles else variant
        return cls(family, chosen, None if batch == "-" else int(batch), knobs.replace("+", ","), expected)

    @property
    def label(self) -> str:
        from workloads.registry import FAMILIES

        knobs = "" if self.knobs == "none" else " +knobs"
        variant = self.variant or FAMILIES[self.family].default_variant
        return f"{self.family} {variant} b{self.batch_size or '-'}{knobs}"

    def build(self, device: str) -> Any:
        from workloads.base import WorkloadOptions
        from workloads.factory import build
        from workloads.knobs import parse_knobs

        options = WorkloadOptions(variant=self.variant, batch_size=self.batch_size, knobs=parse_knobs(self.knobs))
        return build(self.family, device, options)


def diagnosed(case: Reference, device: str, runs: int, warmup: int) -> list[Any]:
    """``runs`` diagnoses of one case, from one workload process-alike (a StepLoop here), each window's
    findings judged as its source judges them (without NVML's tick: the window's own figures)."""
    from gpudash.core.protocol import Diagnose, Event, EventKind
    from gpudash.diagnosis.judge import Findings, judge
    from gpudash.engine.loop import StepLoop

    w = case.build(device)
    got: list[object] = []
    due = [warmup + i * 80 for i in range(runs)]

    def controls(_timeout: float) -> Diagnose | None:
        if due and loop.steps_issued >= due[0]:
            due.pop(0)
            return Diagnose(30)
        return None

    loop = StepLoop(w, emit=got.append, controls=controls, sample_interval_s=0.1)
    loop.run(steps=warmup + runs * 80 + 5)
    w.close()
    errors = [m for m in got if isinstance(m, Event) and m.kind == EventKind.ERROR]
    if errors:
        raise RuntimeError(f"{case.label}: {errors[0].message}")
    return [judge(m.data) for m in got if isinstance(m, Event) and isinstance(m.data, Findings)]


def keep_trace(case: Reference, device: str, out: Path, warmup: int) -> Path:
    """One 30-step profiler window of ``case`` (the diagnosis' own: ``profile_window``), its events
    trimmed to what the figures read."""
    import torch

    from gpudash.engine.trace_figures import read_events
    from gpudash.engine.traces import profile_window

    w = case.build(device)
    for _ in range(warmup):
        w.step()
    w.drain()
    with tempfile.TemporaryDirectory() as scratch:
        trace, figures = profile_window(torch, w, 30, scratch, 0.0, keep=1)
        events = read_events(trace)
    variant = w.variant
    w.close()
    kept = [e for e in events if e.get("cat") in KEPT_CATEGORIES]
    path = out / f"{case.family}-{variant}-b{case.batch_size or 'default'}.json.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        json.dump({"steps": 30, "wall_ms": figures.wall_ms, "case": case.label, "traceEvents": kept}, f)
    return path


def figure(value: float | None, fmt: Callable[[float], str] = lambda v: f"{v:.3g}") -> str:
    return "-" if value is None else fmt(value)


def measure(run: Run, p: Params) -> None:
    import torch

    if p.device.startswith("cuda") and not torch.cuda.is_available():
        raise Unavailable("-p device=cuda needs a CUDA GPU; -p device=cpu gives the CPU verdicts")
    cases = [Reference.parse(text) for text in p.cases]
    rows = [(case, diagnosed(case, p.device, p.runs, p.warmup)) for case in cases]
    if p.trace_out:
        Path(p.trace_out).mkdir(parents=True, exist_ok=True)
        for case in cases:
            run.progress(f"kept {keep_trace(case, p.device, Path(p.trace_out), p.warmup)}")
    cols = ["case", "run", "verdict", "busy %", "GPU ms/step", "host ms/step", "step ms (untraced)", "launch delay µs"]
    table = run.table(cols)
    for case, events in rows:
        for i, e in enumerate(events, 1):
            ev = e.evidence
            shown = (ev.gpu_busy_pct, ev.gpu_ms_per_step, ev.host_ms_per_step, ev.step_ms, ev.launch_delay_us)
            run.row(table, case.label, i, str(e.head.bound), *(figure(v) for v in shown))
    run.line()
    right = run.table(["case", "expected", "runs right"])
    for case, events in rows:
        run.row(
            right, case.label, case.expected, f"{sum(str(e.head.bound) == case.expected for e in events)}/{len(events)}"
        )
