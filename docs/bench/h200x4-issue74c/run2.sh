#!/usr/bin/env bash
# Issue 74, session 19, call 2 (4 GPUs of one host, two pairs side by side): diagnose (with its
# counterfactual checks) on the even DDP job, rank 0 late and rank 1 late, and on FSDP2 after the
# settings fix; and gpudash record of each late rank twice: is the straggler named in every run?
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
  python3 -c "import torch, sys; print('torch', torch.__version__, 'python', sys.version.split()[0])"; date -u +%Y-%m-%dT%H:%MZ; } > "$OUT/env2.txt" 2>&1
TR="python3 -m torch.distributed.run --standalone --nproc-per-node 2"
JOB=benchmarks/jobs/ddp_resnet_job.py
DIR=$OUT CSV_DIR=/tmp DIAGNOSE_S=240 DIAGNOSE_FLAGS= RECORD_S=120
. docs/bench/h200x4-issue74c/calls.sh  # diagnose, record
(
  export CUDA_VISIBLE_DEVICES=0,1
  diagnose even $TR $JOB --steps 3000 --bucket-view
  diagnose wait0 $TR $JOB --steps 3000 --bucket-view --wait-rank 0 --wait-ms 25
  for i in 1 2; do record wait0-$i $TR $JOB --steps 500 --bucket-view --wait-rank 0 --wait-ms 25; done
) &
(
  export CUDA_VISIBLE_DEVICES=2,3
  diagnose wait1 $TR $JOB --steps 3000 --bucket-view --wait-rank 1 --wait-ms 25
  diagnose fsdp2 $TR tests/data/jobs/ddp_ranks.py --fsdp --dim 4096 --batch 64 --item-ms 0 --steps 100000
  for i in 1 2; do record wait1-$i $TR $JOB --steps 500 --bucket-view --wait-rank 1 --wait-ms 25; done
) &
wait
grep -h "straggler" "$OUT"/record-*.txt > "$OUT/stragglers.txt" 2>&1
ls -la "$OUT"
