#!/usr/bin/env bash
# Issue 74, session 18, call 2 (2 GPUs): diagnose with its counterfactual (the job on one rank) on the
# even DDP job and on rank 0 waiting; FSDP2's diagnosis; the window probe under gpudash record (do
# gpudash's hooks slow the traced steps?).
ENV_FILE=env2.txt . docs/bench/h200x2-issue74b/setup.sh  # $OUT, $D, $TR, $JOB; the GPUs, torch, the date
for r in -1 0; do
  timeout 200 python3 -m gpudash diagnose --json -- $TR $JOB --steps 3000 --bucket-view --wait-rank $r --wait-ms 25 > "$OUT/diagnose-wait$r.json" 2> "$OUT/diagnose-wait$r.err"
  echo "exit $?" >> "$OUT/diagnose-wait$r.err"
done
timeout 150 python3 -m gpudash diagnose --json --warmup 3 -- $TR tests/data/jobs/ddp_ranks.py --fsdp --dim 4096 --batch 64 --item-ms 0 --steps 100000 > "$OUT/fsdp2-diagnose.json" 2> "$OUT/fsdp2-diagnose.err"
echo "exit $?" >> "$OUT/fsdp2-diagnose.err"
TEARDOWN_CUPTI=1 timeout 120 python3 -m gpudash record /tmp/probe.csv --force -- $TR $D/window_probe.py --out /tmp/probe3 > "$OUT/probe-under-gpudash.txt" 2>&1
echo "exit $?" >> "$OUT/probe-under-gpudash.txt"
ls -la "$OUT"
