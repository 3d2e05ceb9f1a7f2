"""The diagnosis of the reference cases, run again and again: each run's verdict and its evidence.

    python benchmarks/diagnosis_cases.py [--runs 10] [--device cuda] [--case encdec:pipelined:8:none ...]
        [--trace-out DIR]

Each case is ``family:variant:batch:knobs`` (batch ``-`` for the family's default) with the bottleneck
the diagnosis must name. A case is built once, warmed up, then diagnosed ``--runs`` times in one
process (a 30-step window each, as ``gpudash diagnose`` takes), and every run's verdict and figures
are printed: busy share of the steps' span, the GPU's and the host's ms per step, the untraced step,
the median launch delay. The last column counts the runs whose verdict was the expected one.
``--trace-out`` keeps, per case, one profiler window's trace events (only those the figures read),
gzipped: the replayable evidence of ``tests/data/diagnosis/``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BEST = "amp=bf16,channels_last,cudnn_benchmark,cuda_graph"
DEFAULT_CASES = (
    "sync_loss:sync-heavy:-:none=sync-bound",
    "input_pipeline:baseline:32:none=input-bound",
    "encdec:pipelined:8:none=host/launch-bound",
    "encdec:serial:8:none=host/launch-bound",
    f"encdec:serial:32:{BEST}=GPU-bound (compute)",
)
KEPT_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "user_annotation")


@dataclass(frozen=True)
class Case:
    family: str
    variant: str
    batch_size: int | None
    knobs: str
    expected: str

    @classmethod
    def parse(cls, text: str) -> Case:
        spec, _, expected = text.rpartition("=")
        family, variant, batch, knobs = spec.split(":", 3) if spec.count(":") >= 3 else [*spec.split(":"), "none"]
        return cls(family, variant, None if batch == "-" else int(batch), knobs, expected)

    @property
    def label(self) -> str:
        knobs = "" if self.knobs == "none" else " +knobs"
        return f"{self.family} {self.variant} b{self.batch_size or '-'}{knobs}"


def diagnosed(case: Case, device: str, runs: int, warmup: int) -> list[Any]:
    """``runs`` diagnosis events of one case, from one workload process-alike (a StepLoop here)."""
    from gpudash.core.protocol import Diagnose, Event, EventKind
    from gpudash.engine.loop import StepLoop
    from workloads.base import WorkloadOptions
    from workloads.factory import build
    from workloads.knobs import parse_knobs

    options = WorkloadOptions(variant=case.variant, batch_size=case.batch_size, knobs=parse_knobs(case.knobs))
    w = build(case.family, device, options)
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
        raise SystemExit(f"{case.label}: {errors[0].message}")
    return [m for m in got if isinstance(m, Event) and m.what == "diagnosis"]


def keep_trace(case: Case, device: str, out: Path, warmup: int) -> Path:
    """One 30-step profiler window of ``case``, its events trimmed to what the figures read."""
    import tempfile

    import torch

    from gpudash.engine.traces import _profiled  # noqa: PLC2701 - the diagnosis' own window
    from workloads.base import WorkloadOptions
    from workloads.factory import build
    from workloads.knobs import parse_knobs

    w = build(
        case.family,
        device,
        WorkloadOptions(variant=case.variant, batch_size=case.batch_size, knobs=parse_knobs(case.knobs)),
    )
    for _ in range(warmup):
        w.step()
    w.drain()
    prof, wall_ms = _profiled(torch, w, 30)
    w.close()
    with tempfile.TemporaryDirectory() as scratch:
        raw = Path(scratch) / "t.json"
        prof.export_chrome_trace(str(raw))
        events = json.loads(raw.read_text())["traceEvents"]
    kept = [e for e in events if e.get("cat") in KEPT_CATEGORIES]
    name = f"{case.family}-{case.variant}-b{case.batch_size or 'default'}.json.gz"
    path = out / name
    with gzip.open(path, "wt", encoding="utf-8") as f:
        json.dump({"steps": 30, "wall_ms": wall_ms, "case": case.label, "traceEvents": kept}, f)
    return path


def _f(details: dict[str, str], key: str, fmt: Callable[[float], str] = lambda v: f"{v:.3g}") -> str:
    text = details.get(key)
    return "-" if text is None else fmt(float(text))


def table(rows: list[tuple[Case, list[Any]]]) -> str:
    head = "| case | run | verdict | busy % | GPU ms/step | host ms/step | step ms (untraced) | launch delay µs |"
    lines = [head, "|" + "---|" * 8]
    for case, events in rows:
        for i, e in enumerate(events, 1):
            d = e.details
            lines.append(
                f"| {case.label} | {i} | {d['bound']} | {_f(d, 'diag_gpu_busy_pct')} | {_f(d, 'diag_gpu_ms_per_step')}"
                f" | {_f(d, 'diag_host_ms_per_step')} | {_f(d, 'diag_step_ms')} | {_f(d, 'diag_launch_delay_us')} |"
            )
    lines += ["", "| case | expected | runs right |", "|---|---|---|"]
    for case, events in rows:
        right = sum(e.details["bound"] == case.expected for e in events)
        lines.append(f"| {case.label} | {case.expected} | {right}/{len(events)} |")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=10, help="diagnoses per case (default 10)")
    p.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    p.add_argument("--warmup", type=int, default=40, help="steps before the first diagnosis (default 40)")
    p.add_argument("--case", action="append", help="family:variant:batch:knobs=expected bound (repeatable)")
    p.add_argument("--trace-out", type=Path, help="keep one trimmed profiler window per case here")
    args = p.parse_args()
    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("diagnosis_cases: --device cuda needs a CUDA GPU (none here); try --device cpu", file=sys.stderr)
        return 2
    cases = [Case.parse(text) for text in args.case or DEFAULT_CASES]
    rows = [(case, diagnosed(case, args.device, args.runs, args.warmup)) for case in cases]
    if args.trace_out:
        args.trace_out.mkdir(parents=True, exist_ok=True)
        for case in cases:
            print("kept", keep_trace(case, args.device, args.trace_out, args.warmup))
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name() if torch.cuda.is_available() else 'CPU'}")
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
