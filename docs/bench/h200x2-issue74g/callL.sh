#!/usr/bin/env bash
# Issue 74, session 23, call L (2 GPUs alone): the window's trace written by a thread of its own
# beside the job's steps; 2 traced runs against 2 bare (all the device time left: 323 s).
set -u
. docs/bench/h200x2-issue74e/env.sh
timeout $((200 - SECONDS)) python3 -m benchmarks run torchrun_windows -p job=benchmarks/jobs/ddp_resnet_job.py,--bucket-view,--steps,400 \
  -p runs=2 -p bare=2 -p out=/tmp/tw --out /tmp/twres > "$OUT/windows.txt" 2>&1
echo "exit $?" >> "$OUT/windows.txt"
cp /tmp/twres/torchrun_windows.result.json "$OUT/windows.result.json" 2>/dev/null
(cd /tmp && find tw -name '*.csv' -o -name '*.log' -o -name '*.json' | grep -v traces | tar czf "$OUT/tw.tgz" -T - twres 2>/dev/null)
tail -8 "$OUT/windows.txt"
echo "after ${SECONDS}s"
