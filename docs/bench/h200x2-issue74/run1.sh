#!/usr/bin/env bash
# Issue 74's first device call (2 GPUs): the probe (even, rank 0 waiting, one rank), gpudash record on
# the waiting job (rank 0, rank 1), gpudash diagnose on the even job. Outputs to $OUT.
# The job: benchmarks/jobs/ddp_resnet_job.py --bucket-view (was benchmarks/jobs/ddp_wait_job.py before the scripts merged).
set -u
export PYTHONUNBUFFERED=1
H=docs/bench/h200x2-issue74
TR="python3 -m torch.distributed.run --nproc-per-node"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/gpus.txt
nvidia-smi topo -m >> $OUT/gpus.txt 2>&1
{
  echo "== probe even"; timeout 150 $TR 2 $H/comm_probe.py --out /tmp/p-even 2>&1 | grep -v "^\*\|OMP_NUM"
  echo "== probe wait rank 0"; timeout 150 $TR 2 $H/comm_probe.py --out /tmp/p-w0 --wait-rank 0 --wait-ms 25 2>&1 | grep PROBE
  echo "== probe one rank"; timeout 120 $TR 1 $H/comm_probe.py --out /tmp/p-one 2>&1 | grep PROBE
} > $OUT/probe.txt 2>&1
for r in 0 1; do
  timeout 150 python3 -m gpudash record /tmp/w$r.csv -- $TR 2 benchmarks/jobs/ddp_resnet_job.py --steps 500 --bucket-view --wait-rank $r --wait-ms 25 > $OUT/record-wait$r.txt 2>&1
  echo "exit $?" >> $OUT/record-wait$r.txt
done
timeout 180 python3 -m gpudash diagnose --json -- $TR 2 benchmarks/jobs/ddp_resnet_job.py --steps 800 --bucket-view > $OUT/diagnose-even.json 2> $OUT/diagnose-even.err
echo "exit $?" >> $OUT/diagnose-even.err
(cd /tmp && tar czf $OUT/traces-cuda.tgz p-even/cuda-* p-w0/cuda-* p-one/cuda-* w0.csv w1.csv)
(cd /tmp && tar cf $OUT/traces-cpu.tar p-even/cpu_cuda-rank0.json.gz p-w0/cpu_cuda-rank1.json.gz)
ls -la $OUT
