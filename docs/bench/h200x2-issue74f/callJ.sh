#!/usr/bin/env bash
# Issue 74, session 22, call J (2 GPUs alone, after call H, whose 95 s cut three diagnoses short):
# every multigpu test, then those three again with 150 s each.
set -u
. docs/bench/h200x2-issue74e/env.sh
timeout 200 python3 -m pytest -q -o addopts="" -p no:cacheprovider -m multigpu tests/test_comm_times_nccl.py tests/test_ddp_multigpu.py > "$OUT/multigpu.txt" 2>&1
echo "exit $? after ${SECONDS}s" >> "$OUT/multigpu.txt"; tail -4 "$OUT/multigpu.txt"
DIR=$R DIAGNOSE_S=150 DIAGNOSE_FLAGS=""
JOB=benchmarks/jobs/ddp_resnet_job.py
diagnose wait0-1 $TR $JOB --steps 100000 --bucket-view --wait-rank 0 --wait-ms 25
diagnose wait1-1 $TR $JOB --steps 100000 --bucket-view --wait-rank 1 --wait-ms 25
diagnose even-2 $TR $JOB --steps 100000 --bucket-view
(cd /tmp && tar czf "$OUT/diagnose.tgz" r)
python3 docs/bench/h200x2-issue74f/verdicts.py $R/diagnose-*.json | tee "$OUT/verdicts.txt"
echo "after ${SECONDS}s"
