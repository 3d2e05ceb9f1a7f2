"""Record every workload family with ``gpudash --record`` and summarise the CSVs as markdown.

    python benchmarks/record_families.py --out docs/measurements/record_families.md
    python benchmarks/record_families.py --all-variants --seconds 30 --out docs/...md
    python benchmarks/record_families.py --device cpu --seconds 5 --families encdec sync_loss

Each run is the real CLI in a subprocess (child process, real NVML). The summary skips the
first ``--warmup`` seconds after the workload started, then reports over the rest:
steps/s and samples/s (steps done over elapsed time), the median of the per-sample step
p50, mean GPU kernel-active % and power, joules per step (NVML energy delta over steps
delta) and mean syncs per step. Device, driver and torch version come from the runs'
metadata JSON; nothing is typed by hand.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def floats(rows: list[dict[str, str]], col: str) -> list[float]:
    return [float(r[col]) for r in rows if r.get(col, "") != ""]


def summarise(csv_path: Path, warmup_s: float) -> dict[str, object]:
    with open(csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    started = [float(r["time_s"]) for r in rows if r["row_kind"] == "event" and r["event_kind"] == "started"]
    t0 = (started[0] if started else 0.0) + warmup_s
    s = [r for r in rows if r["row_kind"] == "sample" and float(r["time_s"]) >= t0]
    errors = [r["event_message"] for r in rows if r["row_kind"] == "event" and r["event_kind"] in ("error", "crashed")]
    out: dict[str, object] = {"rows": len(s), "errors": errors}
    if len(s) < 2:
        return out
    first, last = s[0], s[-1]
    # the first kept row's counters mark the start of the window
    dt_s = float(last["time_s"]) - float(first["time_s"])
    d_steps = int(float(last["steps"])) - int(float(first["steps"]))
    d_samples = int(float(last["samples"])) - int(float(first["samples"]))
    out["batch"] = last["batch_size"]
    out["steps_per_s"] = d_steps / dt_s if dt_s > 0 else None
    out["samples_per_s"] = d_samples / dt_s if dt_s > 0 else None
    p50 = floats(s, "step_ms_p50")
    out["step_ms_p50"] = statistics.median(p50) if p50 else None
    for col in ("gpu_util_pct", "power_w", "syncs_per_step"):
        v = floats(s, col)
        out[col] = statistics.fmean(v) if v else None
    e = [(float(r["energy_j"]), int(float(r["steps"]))) for r in s if r["energy_j"] != ""]
    if len(e) >= 2 and e[-1][1] > e[0][1]:
        out["joules_per_step"] = (e[-1][0] - e[0][0]) / (e[-1][1] - e[0][1])
    else:
        out["joules_per_step"] = None
    return out


def fmt(v: object, digits: int = 1) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.{digits}f}" if abs(v) >= 0.1 or v == 0 else f"{v:.3g}"
    return str(v)


def main() -> int:
    from workloads.registry import FAMILIES

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=30.0, help="recording per run, after the workload starts")
    p.add_argument("--warmup", type=float, default=3.0, help="seconds at the start of each run left out")
    p.add_argument("--device", default="cuda")
    p.add_argument("--all-variants", action="store_true", help="every variant, not only the default")
    p.add_argument("--families", nargs="*", default=list(FAMILIES))
    p.add_argument("--workdir", help="where CSVs/JSON/logs go (default: a new temp dir)")
    p.add_argument("--out", help="also write the markdown here")
    args = p.parse_args()

    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="gpudash-record-"))
    workdir.mkdir(parents=True, exist_ok=True)
    runs: list[tuple[str, str, Path, int]] = []
    for name in args.families:
        info = FAMILIES[name]
        variants = [v for v in info.variants if args.all_variants or v.name == info.default_variant]
        for v in variants:
            if v.needs_cuda and args.device == "cpu":
                continue
            csv_path = workdir / f"{name}-{v.name}.csv"
            cmd = [sys.executable, "-m", "gpudash", "--record", str(csv_path), "--force", "-w", name, "-v", v.name,
                   "--device", args.device, "--duration", str(args.seconds), "-q"]
            print(f"$ {shlex.join(cmd[1:])}", file=sys.stderr, flush=True)
            r = subprocess.run(cmd, cwd=ROOT, timeout=args.seconds + 600, stderr=subprocess.PIPE, text=True)
            if r.returncode:
                print(r.stderr, file=sys.stderr)
            runs.append((name, v.name, csv_path, r.returncode))

    meta: dict[str, object] = {}
    for *_, path, _code in runs:
        j = path.with_suffix(".json")
        if j.exists():
            meta = json.loads(j.read_text())
            if meta.get("torch_version"):
                break
    now = dt.datetime.now().astimezone().isoformat(timespec="seconds")
    gpu = meta.get("gpu_name") or meta.get("device_name") or (meta.get("device") or args.device)
    lines = [
        f"## gpudash --record, every family ({'all variants' if args.all_variants else 'default variants'})",
        "",
        f"- device: {gpu} (`--device {args.device}`); driver {meta.get('driver') or '–'}; "
        f"NVML: {'ok' if not meta.get('nvml_unavailable') else meta.get('nvml_unavailable')}",
        f"- torch {meta.get('torch_version') or '–'} (CUDA {meta.get('cuda_version') or '–'}), "
        f"python {platform.python_version()}, {os.cpu_count()} CPUs, host {meta.get('hostname') or platform.node()}",
        f"- date: {now}; {args.seconds:g} s per run, the first {args.warmup:g} s after start left out",
        f"- command: `python benchmarks/{Path(__file__).name} {shlex.join(sys.argv[1:])}`",
        "",
        "| family | variant | batch | steps/s | samples/s | step p50 ms | GPU kernel-active % | power W | J/step | syncs/step | notes |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for name, variant, path, code in runs:
        s = summarise(path, args.warmup) if path.exists() else {"rows": 0, "errors": []}
        notes = []
        if code:
            notes.append(f"exit {code}")
        notes += [str(e) for e in s.get("errors", [])][:2]  # type: ignore[union-attr]
        if s.get("rows", 0) < 2:
            notes.append("too few samples")
        lines.append(
            f"| {name} | {variant} | {fmt(s.get('batch'))} | {fmt(s.get('steps_per_s'))} | "
            f"{fmt(s.get('samples_per_s'))} | {fmt(s.get('step_ms_p50'), 2)} | {fmt(s.get('gpu_util_pct'))} | "
            f"{fmt(s.get('power_w'))} | {fmt(s.get('joules_per_step'), 3)} | {fmt(s.get('syncs_per_step'), 2)} | "
            f"{'; '.join(notes).replace('|', '/')} |"
        )
    lines += ["", f"CSVs, metadata and workload logs: `{workdir}`", ""]
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text)
    return 0 if all(code == 0 for *_, code in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
