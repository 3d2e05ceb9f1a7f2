#!/usr/bin/env bash
# Issue 74, session 19, call 1 (4 GPUs of one host): the DDP job under gpudash record --trace-every 5
# against bare, on two pairs of GPUs side by side (CUDA_VISIBLE_DEVICES 0,1 and 2,3), 5 runs each way
# on each pair, interleaved; then the two pairs' runs joined: 10 traced runs against 10 bare.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader; nvidia-smi topo -m
  python3 -c "import torch, sys; print('torch', torch.__version__, 'python', sys.version.split()[0])"; nproc; date -u +%Y-%m-%dT%H:%MZ; } > "$OUT/env.txt" 2>&1
JOB=job=benchmarks/jobs/ddp_resnet_job.py,--bucket-view,--steps,400
for pair in 01 23; do
  CUDA_VISIBLE_DEVICES=${pair:0:1},${pair:1:1} timeout 575 python3 -m benchmarks run torchrun_windows -p $JOB \
    -p runs=5 -p bare=5 -p out=/tmp/tw$pair --out /tmp/twres$pair > "$OUT/windows-pair$pair.txt" 2>&1 &
done
wait
python3 -m benchmarks run torchrun_windows -p $JOB -p runs=0 -p bare=0 \
  -p earlier=/tmp/twres01/torchrun_windows.result.json,/tmp/twres23/torchrun_windows.result.json --out /tmp/twres > "$OUT/windows-joined.txt" 2>&1
echo "exit $?" >> "$OUT/windows-joined.txt"
(cd /tmp && find tw01 tw23 -name '*.csv' -o -name '*.log' -o -name '*.json' | grep -v traces | tar czf "$OUT/tw.tgz" -T - twres01 twres23 twres 2>/dev/null)
ls -la "$OUT"
