#!/usr/bin/env bash
# Issue 74, session 18, call 4 (2 GPUs): the collectives' bus bandwidth against the link's peak
# (diagnose --json on the even DDP job; a --trace-every 5 recording's window), and the window probe
# bare and under gpudash record on the same machine (do gpudash's hooks slow a traced step?).
ENV_FILE=env4.txt . docs/bench/h200x2-issue74b/setup.sh  # $OUT, $D, $TR, $JOB; the GPUs, torch, the date
timeout 110 python3 -m gpudash diagnose --json --no-check -- $TR $JOB --steps 3000 --bucket-view > "$OUT/diagnose-even.json" 2> "$OUT/diagnose-even.err"
echo "exit $?" >> "$OUT/diagnose-even.err"
timeout 60 python3 -m gpudash record /tmp/r.csv --force --trace-every 5 -- $TR $JOB --steps 400 --bucket-view > "$OUT/record-trace-every.txt" 2>&1
echo "exit $?" >> "$OUT/record-trace-every.txt"
V=profile_cuda,profile_cuda_again
TEARDOWN_CUPTI=1 timeout 60 $TR $D/window_probe.py --out /tmp/pb --variants $V > "$OUT/probe-bare.txt" 2>&1
TEARDOWN_CUPTI=1 timeout 70 python3 -m gpudash record /tmp/pg.csv --force -- $TR $D/window_probe.py --out /tmp/pg --variants $V > "$OUT/probe-gpudash.txt" 2>&1
ls -la "$OUT"
