#!/usr/bin/env bash
# Issue 89 on 2 GPUs (one call): `gpudash diagnose --json` of the torchrun job of
# tests/data/jobs/ddp_ranks.py, whose rank 0, rank 1 or neither reads 2 ms more a sample, RUNS times
# each, interleaved: the rank each verdict's head names (none for the even job), with its own work
# against the other's. Usage: [RUNS=3] bash docs/bench/h200x2-issue89r/ranks.sh  (outputs in $OUT)
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
  python3 -c "import torch, sys; print('torch', torch.__version__, 'python', sys.version.split()[0])"; date -u +%Y-%m-%dT%H:%MZ; } > "$OUT/env-ranks.txt" 2>&1
for run in $(seq "${RUNS:-3}"); do
  for slow in 0 1 -1; do
    timeout 150 python3 -m gpudash diagnose --json --warmup 1 --no-check -- python3 -m torch.distributed.run \
      --standalone --nproc-per-node 2 tests/data/jobs/ddp_ranks.py --steps 100000 --slow-rank "$slow" --item-ms 2 \
      > "$OUT/ranks-$run-$slow.json" 2> "$OUT/ranks-$run-$slow.err"
    python3 - "$OUT/ranks-$run-$slow.json" "$run" "$slow" <<'PY' | tee -a "$OUT/ranks.txt"
import json, sys
path, run, slow = sys.argv[1:]
try:
    text = open(path).read()
    d = json.loads(text[text.index("{"):])
except (OSError, ValueError) as e:
    print(f"run {run} slow rank {slow}: no verdict ({e})"); raise SystemExit
w = d.get("waiting_for")
named = f"names rank {w['rank']}: its own work {w['own_ms']:.1f} ms against {w['others_own_ms']:.1f} ms" if w else "names no rank"
print(f"run {run} slow rank {slow}: {named}; evidence of rank {d.get('evidence_rank')}; {d.get('bound')}")
PY
  done
done
