#!/usr/bin/env bash
# Issue 74, session 21, call B (2 GPUs alone): the straggler with only spaced steps timed — rank 0
# late, rank 1 late (25 ms before each batch), and even; then 5 traced runs against 5 bare again.
set -u
. docs/bench/h200x2-issue74e/env.sh
JOB=benchmarks/jobs/ddp_resnet_job.py
record wait0 $TR $JOB --steps 500 --bucket-view --wait-rank 0 --wait-ms 25
record wait1 $TR $JOB --steps 500 --bucket-view --wait-rank 1 --wait-ms 25
record even $TR $JOB --steps 500 --bucket-view
grep -H "straggler\|exit" $R/record-*.txt > "$OUT/stragglers.txt" 2>&1
(cd /tmp && tar czf "$OUT/records.tgz" r); cat "$OUT/stragglers.txt"; echo "after ${SECONDS}s"
windows
