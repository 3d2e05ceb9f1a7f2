#!/usr/bin/env bash
# Issue 74, session 18, call 3 (2 GPUs): the DDP job under gpudash record --trace-every 5 against bare,
# 5 runs each a call, interleaved; the second call with EARLIER=the first call's result.json (5-step kernels-only windows, their traced steps timed).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
timeout 590 python3 -m benchmarks run torchrun_windows -p job=benchmarks/jobs/ddp_resnet_job.py,--bucket-view,--steps,400 -p runs=5 -p bare=5 -p out=/tmp/tw --out /tmp/twres ${EARLIER:+-p earlier=$EARLIER} > "$OUT/windows.txt" 2>&1
echo "exit $?" >> "$OUT/windows.txt"
(cd /tmp && find tw -name '*.csv' -o -name '*.log' -o -name '*.json' | grep -v traces | tar czf "$OUT/tw.tgz" -T - twres 2>/dev/null)
ls -la "$OUT"
