#!/usr/bin/env bash
# Issue 74, session 21, call C (2 GPUs alone): what the per-step hooks cost the DDP ResNet-50 step
# (comm_cost_probe.py, 150 steps each, two rounds interleaved): DDP's built-in all-reduce, the
# reference Python hook, the hook with its all-reduce timed in one callback, an event at the call
# alone, every all-reduce timed as gpudash times a timed step, and under gpudash record.
set -u
. docs/bench/h200x2-issue74e/env.sh
P=docs/bench/h200x4-issue74d/comm_cost_probe.py
for round in 1 2; do
  for v in builtin hook hook-one-then hook-arrival hook-timed; do
    tagged "$OUT/cost.jsonl" "\"round\": $round, " 45 $TR $P --variant $v --steps 150
  done
  tagged "$OUT/cost.jsonl" "\"round\": $round, \"gpudash\": true, " 60 python3 -m gpudash record /tmp/c$round.csv --force -- $TR $P --variant builtin --steps 150
done
cat "$OUT/cost.jsonl"; tail -3 "$OUT/cost.jsonl.err"; echo "after ${SECONDS}s"
