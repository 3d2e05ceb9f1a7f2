#!/usr/bin/env bash
# Issue 74, session 25, call C (2 GPUs): call B's code, the DDP ResNet-50 under --trace-every 5 against
# bare, interleaved, in the time left; its runs join call B's (-p earlier).
set -u
. docs/bench/h200x2-issue74e/env.sh
timeout $((585 - SECONDS)) python3 -m benchmarks run torchrun_windows -p job=benchmarks/jobs/ddp_resnet_job.py,--bucket-view,--steps,400 \
  -p runs=${RUNS:-7} -p bare=${RUNS:-7} -p earlier=docs/bench/h200x2-issue74i/callB/windows.result.json \
  -p out=/tmp/tw --out /tmp/twres > "$OUT/windows.txt" 2>&1
echo "exit $?" >> "$OUT/windows.txt"
cp /tmp/twres/torchrun_windows.result.json "$OUT/windows.result.json" 2>/dev/null
(cd /tmp && find tw -name '*.csv' -o -name '*.log' -o -name '*.json' | grep -v traces | tar czf "$OUT/tw.tgz" -T - twres 2>/dev/null)
tail -8 "$OUT/windows.txt"
echo "after ${SECONDS}s"
