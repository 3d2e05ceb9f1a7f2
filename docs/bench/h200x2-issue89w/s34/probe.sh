#!/usr/bin/env bash
# The window alone, bare and under `gpudash record` (no --trace-every), alternated twice each.
# Usage: bash docs/bench/h200x2-issue89w/s34/probe.sh   (outputs in $OUT)
set -u; OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader; python3 -c "import torch, sys; print('torch', torch.__version__, 'python', sys.version.split()[0])"; nproc; date -u +%Y-%m-%dT%H:%MZ; } > "$OUT/env-probe.txt" 2>&1
JOB="python3 -m torch.distributed.run --standalone --nproc-per-node 2 docs/bench/h200x2-issue89w/s34/window_probe.py --windows 6"
for round in 1 2; do
  echo "# round $round bare: $JOB" >> "$OUT/probe.txt"
  timeout 200 $JOB >> "$OUT/probe.txt" 2>> "$OUT/probe.err"
  echo "# round $round under: gpudash record /tmp/p$round.csv -- $JOB" >> "$OUT/probe.txt"
  timeout 200 python3 -m gpudash record /tmp/p$round.csv -- $JOB >> "$OUT/probe.txt" 2>> "$OUT/probe.err"
done
grep -h "^#\|PROBE" "$OUT/probe.txt" | python3 -c '
import json, sys, statistics
by = {}
for line in sys.stdin:
    if line.startswith("PROBE "):
        r = json.loads(line[6:]); by.setdefault(r["under"], []).append(r["ratio"])
for k, v in by.items():
    v = [x for x in v if x is not None]
    print(k, "windows", len(v), "ratio median", round(statistics.median(v), 3), "range", min(v), max(v), "over 1.2:", sum(x > 1.2 for x in v))
' | tee "$OUT/probe-summary.txt"
