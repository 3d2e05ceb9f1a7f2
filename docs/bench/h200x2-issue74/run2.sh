#!/usr/bin/env bash
# Issue 74's second device call (2 GPUs), after the fixes: the straggler on rank 0, rank 1 and none;
# diagnose's transfer/wait split on the waiting job and the even one; kernels-only periodic windows.
set -u
export PYTHONUNBUFFERED=1
TR="python3 -m torch.distributed.run --nproc-per-node 2"
JOB=benchmarks/jobs/ddp_resnet_job.py  # was benchmarks/jobs/ddp_wait_job.py before the scripts merged
for r in 0 1 -1; do
  timeout 120 python3 -m gpudash record /tmp/w$r.csv -- $TR $JOB --steps 500 --bucket-view --wait-rank $r --wait-ms 25 > $OUT/record-wait$r.txt 2>&1
  echo "exit $?" >> $OUT/record-wait$r.txt
done
for r in 0 -1; do
  timeout 150 python3 -m gpudash diagnose --json -- $TR $JOB --steps 1500 --bucket-view --wait-rank $r --wait-ms 25 > $OUT/diagnose-wait$r.json 2> $OUT/diagnose-wait$r.err
  echo "exit $?" >> $OUT/diagnose-wait$r.err
done
timeout 260 python3 -m benchmarks run torchrun_windows -p job=$JOB,--bucket-view,--steps,600 -p runs=2 -p bare=2 -p out=/tmp/tw --out /tmp/twres > $OUT/windows.txt 2>&1
echo "exit $?" >> $OUT/windows.txt
(cd /tmp && tar czf $OUT/logs.tgz tw twres w0.csv w1.csv 2>/dev/null)
ls -la $OUT
