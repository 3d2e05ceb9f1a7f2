#!/usr/bin/env bash
# Issue 74's third device call (2 GPUs): diagnose on the even job and on rank 1 waiting (the wait
# capped by the untraced steps), and kernels-only periodic windows against bare.
set -u
export PYTHONUNBUFFERED=1
TR="python3 -m torch.distributed.run --nproc-per-node 2"
JOB=benchmarks/jobs/ddp_resnet_job.py  # was benchmarks/jobs/ddp_wait_job.py before the scripts merged
for r in -1 1; do
  timeout 150 python3 -m gpudash diagnose --json -- $TR $JOB --steps 1500 --bucket-view --wait-rank $r --wait-ms 25 > $OUT/diagnose-wait$r.json 2> $OUT/diagnose-wait$r.err
  echo "exit $?" >> $OUT/diagnose-wait$r.err
done
timeout 330 python3 -m benchmarks run torchrun_windows -p job=$JOB,--bucket-view,--steps,600 -p runs=3 -p bare=3 -p out=/tmp/tw --out /tmp/twres > /tmp/twres.txt 2>&1
echo "exit $?" >> /tmp/twres.txt
(cd /tmp && tar czf $OUT/windows.tgz twres twres.txt tw/traced.log tw/bare.log 2>/dev/null)
ls -la $OUT
