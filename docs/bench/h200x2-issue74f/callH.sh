#!/usr/bin/env bash
# Issue 74, session 22, call H (2 GPUs alone): diagnose's verdict now that the wait for a straggler is
# the ranks' untraced one (measured on the GPU's stream) — the DDP ResNet-50 with rank 0 late, rank 1
# late (25 ms before each batch) and even, two rounds; verdicts.py sums up each verdict.
set -u
. docs/bench/h200x2-issue74e/env.sh  # OUT, R, TR, diagnose, record; env.txt
DIR=$R DIAGNOSE_S=95 DIAGNOSE_FLAGS=""
JOB=benchmarks/jobs/ddp_resnet_job.py
for round in 1 2; do
  diagnose wait0-$round $TR $JOB --steps 100000 --bucket-view --wait-rank 0 --wait-ms 25
  diagnose wait1-$round $TR $JOB --steps 100000 --bucket-view --wait-rank 1 --wait-ms 25
  diagnose even-$round $TR $JOB --steps 100000 --bucket-view
  echo "round $round after ${SECONDS}s"
done
(cd /tmp && tar czf "$OUT/diagnose.tgz" r)
python3 docs/bench/h200x2-issue74f/verdicts.py $R/diagnose-*.json | tee "$OUT/verdicts.txt"
echo "after ${SECONDS}s"
