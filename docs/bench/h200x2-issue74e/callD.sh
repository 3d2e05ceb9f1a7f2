#!/usr/bin/env bash
# Issue 74, session 21, call D (2 GPUs alone): kernels_only_probe.py — a window without CUPTI's
# runtime and driver records against gpudash's GPU-only window, 3 windows of each kind interleaved.
set -u
. docs/bench/h200x2-issue74e/env.sh
timeout 110 $TR docs/bench/h200x2-issue74e/kernels_only_probe.py --windows 3 > "$OUT/kernels_only.jsonl" 2> "$OUT/kernels_only.err"
echo "exit $? after ${SECONDS}s" >> "$OUT/kernels_only.err"
cat "$OUT/kernels_only.jsonl"; tail -5 "$OUT/kernels_only.err"
