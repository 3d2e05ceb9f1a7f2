#!/usr/bin/env bash
# Issue 74, session 20, call 4 (2 GPUs alone): comm_cost_probe.py — which of gpudash's per-step work
# costs the DDP ResNet-50 step its 5% — each variant bare, and the built-in one under gpudash record,
# interleaved, two rounds.
set -u
. docs/bench/h200x4-issue74c/calls.sh  # OUT, TR, tagged
P=docs/bench/h200x4-issue74d/comm_cost_probe.py
for round in 1 2; do
  for v in builtin hook hook-timed hook-one-then sync-debug; do
    [ $SECONDS -gt 470 ] && break 2
    tagged "$OUT/cost.jsonl" "\"round\": $round, " 60 $TR $P --variant $v
  done
  [ $SECONDS -gt 470 ] && break
  tagged "$OUT/cost.jsonl" "\"round\": $round, \"gpudash\": true, " 75 python3 -m gpudash record /tmp/cost-$round.csv --force -- $TR $P --variant builtin
done
cat "$OUT/cost.jsonl"
