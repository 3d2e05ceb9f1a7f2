#!/usr/bin/env bash
# Issue 89's third point on 2 GPUs (one call): the DDP ResNet-50 under `gpudash record
# --trace-every 5` against bare, interleaved, at this session's code: each window's traced step
# over an untraced one, the job traced over bare, gpudash's figure over bare.
# Usage: [RUNS=6 BARE=4] bash docs/bench/h200x2-issue89w/call.sh
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
  python3 -c "import torch, sys; print('torch', torch.__version__, 'python', sys.version.split()[0])"; nproc; date -u +%Y-%m-%dT%H:%MZ; } > "$OUT/env.txt" 2>&1
timeout $((570 - SECONDS)) python3 -m benchmarks run torchrun_windows -p job=benchmarks/jobs/ddp_resnet_job.py,--bucket-view,--steps,400 \
  -p runs="${RUNS:-6}" -p bare="${BARE:-4}" -p out=/tmp/tw --out /tmp/twres > "$OUT/windows.txt" 2>&1
echo "exit $? after ${SECONDS}s" >> "$OUT/windows.txt"
cp /tmp/twres/torchrun_windows.result.json "$OUT/windows.result.json" 2>/dev/null
(cd /tmp && find tw -name '*.csv' -o -name '*.log' -o -name '*.json' | grep -v traces | tar czf "$OUT/tw.tgz" -T - 2>/dev/null)
tail -12 "$OUT/windows.txt"
