#!/usr/bin/env bash
# Issue 74, for the next session (2 GPUs alone, about 6 min): what gpudash costs a DDP of short
# steps (memory_probe.py --model ddp: 8 linear layers of 4096, 3.9 ms a step, 9 buckets), bare, with
# DDP's reference Python hook alone (which gpudash gives a DDP model) and under gpudash record — 5
# rounds of the three (ROUNDS=N: N), for an interval (session 20 had two rounds: 0.76x and 0.60x, no verdict).
# Then `python docs/bench/h200x2-issue74e/summarize.py` reads callG/ddp_short.jsonl.
set -u
. docs/bench/h200x2-issue74e/env.sh
P=docs/bench/h200x4-issue74d/memory_probe.py
probe() {  # ROUND ARM SECONDS CMD...: the probe's "JOB {...}" lines, tagged, into ddp_short.jsonl
  local round=$1 arm=$2 seconds=$3; shift 3
  timeout "$seconds" "$@" 2>>"$OUT/ddp_short.jsonl.err" | sed -n "s/^JOB {/{\"round\": $round, \"arm\": \"$arm\", /p" >> "$OUT/ddp_short.jsonl"
}
for round in $(seq 1 "${ROUNDS:-5}"); do
  probe $round bare 60 $TR $P --model ddp
  probe $round hook 60 $TR $P --model ddp --python-hook
  probe $round gpudash 75 python3 -m gpudash record /tmp/ddp-$round.csv --force -- $TR $P --model ddp
done
cat "$OUT/ddp_short.jsonl"; tail -3 "$OUT/ddp_short.jsonl.err"; echo "after ${SECONDS}s"
