#!/usr/bin/env bash
# Issue 74, session 24, call M (2 GPUs): a window's cost on each launch, Kineto's against CUPTI's own
# kernel tracing driven raw (cupti_probe.py): the host-bound launch loop on GPU 0, then the DDP
# ResNet-50's windows, each kind in its own process, two rounds interleaved.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
P=docs/bench/h200x2-issue74h/cupti_probe.py
TR="python3 -m torch.distributed.run --standalone --nproc-per-node 2"
{ nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
  python3 -c "import torch, sys; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'python', sys.version.split()[0])"; nproc; date -u +%Y-%m-%dT%H:%MZ; } > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
for kind in kineto raw raw+api; do
  CUDA_VISIBLE_DEVICES=0 timeout 90 python3 $P micro --kind $kind >> "$OUT/micro.jsonl" 2>> "$OUT/micro.err"
done
for round in 1 2; do
  for kind in kineto raw raw+api; do
    timeout 120 $TR $P ddp --kind $kind --windows 4 2>> "$OUT/ddp.err" | grep '^{' | sed "s/^{/{\"round\": $round, /" >> "$OUT/ddp.jsonl"
  done
done
python3 - "$OUT" <<'PY'
import json, statistics, sys
for name in ("micro", "ddp"):
    rows = [json.loads(l) for l in open(f"{sys.argv[1]}/{name}.jsonl")]
    for kind in ("kineto", "raw", "raw+api"):
        mine = [r for r in rows if r["kind"] == kind]
        if mine:
            ratios = [r["ratio"] for r in mine]
            extra = [f"{r.get('untraced_us_per_launch')}->{r.get('traced_us_per_launch')}us" for r in mine] if name == "micro" else []
            print(name, kind, "ratios", ratios, "median", round(statistics.median(ratios), 3), mine[0]["records"], mine[0]["started"], mine[0]["hw_trace"], extra)
PY
tail -5 "$OUT/micro.err" "$OUT/ddp.err"; echo "after ${SECONDS}s"
