#!/usr/bin/env bash
# Issue 74, session 20, call 5 (2 GPUs alone, the session's last device seconds): comm_cost_probe.py's
# hook-one-then (which call 4 lost: an annotation DDP refused), an event at the call alone, and the
# reference hook between them; 150 steps each.
set -u
. docs/bench/h200x4-issue74c/calls.sh  # OUT, TR, tagged
P=docs/bench/h200x4-issue74d/comm_cost_probe.py
for v in hook hook-one-then hook-arrival hook-timed; do
  tagged "$OUT/cost5.jsonl" "" 45 $TR $P --variant $v --steps 150
done
cat "$OUT/cost5.jsonl"; tail -3 "$OUT/cost5.jsonl.err"
