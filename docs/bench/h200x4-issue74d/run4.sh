#!/usr/bin/env bash
# Issue 74, session 20, call 5 (2 GPUs alone, the session's last device seconds): comm_cost_probe.py's
# hook-one-then (which call 4 lost: an annotation DDP refused), an event at the call alone, and the
# reference hook between them; 150 steps each.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
TR="python3 -m torch.distributed.run --standalone --nproc-per-node 2"
P=docs/bench/h200x4-issue74d/comm_cost_probe.py
for v in hook hook-one-then hook-arrival hook-timed; do
  timeout 45 $TR $P --variant $v --steps 150 2>>"$OUT/cost5.err" | grep '^{' >> "$OUT/cost5.jsonl"
done
cat "$OUT/cost5.jsonl"; tail -3 "$OUT/cost5.err"
