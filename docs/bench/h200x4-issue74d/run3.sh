#!/usr/bin/env bash
# Issue 74, session 20, call 4 (2 GPUs alone): comm_cost_probe.py — which of gpudash's per-step work
# costs the DDP ResNet-50 step its 5% — each variant bare, and the built-in one under gpudash record,
# interleaved, two rounds.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
TR="python3 -m torch.distributed.run --standalone --nproc-per-node 2"
P=docs/bench/h200x4-issue74d/comm_cost_probe.py
for round in 1 2; do
  for v in builtin hook hook-timed hook-one-then sync-debug; do
    [ $SECONDS -gt 470 ] && break 2
    timeout 60 $TR $P --variant $v 2>/dev/null | grep '^{' | sed "s/^{/{\"round\": $round, /" >> "$OUT/cost.jsonl"
  done
  [ $SECONDS -gt 470 ] && break
  timeout 75 python3 -m gpudash record /tmp/cost-$round.csv --force -- $TR $P --variant builtin 2>/dev/null | grep '^{' | sed "s/^{/{\"round\": $round, \"gpudash\": true, /" >> "$OUT/cost.jsonl"
done
cat "$OUT/cost.jsonl"
