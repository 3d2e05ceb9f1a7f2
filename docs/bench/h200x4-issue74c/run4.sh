#!/usr/bin/env bash
# Issue 74, session 19, call 5 (4 GPUs of one host, two pairs side by side): hook_probe.py — DDP's
# built-in all-reduce against the Python reference hook gpudash registers, each with and without
# NCCL's own timing — interleaved, two rounds on each pair. No gpudash.
set -u
. docs/bench/h200x4-issue74c/calls.sh  # OUT, TR, tagged
P=docs/bench/h200x4-issue74c/hook_probe.py
for pair in 01 23; do
  (
    export CUDA_VISIBLE_DEVICES=${pair:0:1},${pair:1:1}
    for round in 1 2; do
      for timing in 0 1; do
        export TORCH_NCCL_ENABLE_TIMING=$timing
        tagged "$OUT/probe-pair$pair.jsonl" "\"pair\": \"$pair\", \"round\": $round, " 90 $TR $P
        tagged "$OUT/probe-pair$pair.jsonl" "\"pair\": \"$pair\", \"round\": $round, " 90 $TR $P --python-hook
      done
    done
  ) &
done
wait
cat "$OUT"/probe-pair*.jsonl | wc -l
