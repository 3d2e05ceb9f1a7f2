#!/usr/bin/env bash
# Issue 74, session 19, call 4 (4 GPUs of one host, two pairs side by side): after call 3, the
# verdicts again (diagnose --no-check: the even job, rank 0 late, rank 1 late) with this version's
# rules, and gpudash record of each late rank three times and of the even job once: is the
# straggler named in every run, and none on the even job? Everything in one tarball (8 files come back).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
R=/tmp/r4; mkdir -p $R
export PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
  python3 -c "import torch, sys; print('torch', torch.__version__, 'python', sys.version.split()[0])"; date -u +%Y-%m-%dT%H:%MZ; } > "$R/env4.txt" 2>&1
TR="python3 -m torch.distributed.run --standalone --nproc-per-node 2"
JOB=benchmarks/jobs/ddp_resnet_job.py
DIR=$R CSV_DIR=$R DIAGNOSE_S=150 DIAGNOSE_FLAGS=--no-check RECORD_S=100
. docs/bench/h200x4-issue74c/calls.sh  # diagnose, record
(
  export CUDA_VISIBLE_DEVICES=0,1
  diagnose even $TR $JOB --steps 3000 --bucket-view
  diagnose wait0 $TR $JOB --steps 3000 --bucket-view --wait-rank 0 --wait-ms 25
  for i in 1 2 3; do record wait0-$i $TR $JOB --steps 500 --bucket-view --wait-rank 0 --wait-ms 25; done
) &
(
  export CUDA_VISIBLE_DEVICES=2,3
  diagnose wait1 $TR $JOB --steps 3000 --bucket-view --wait-rank 1 --wait-ms 25
  for i in 1 2 3; do record wait1-$i $TR $JOB --steps 500 --bucket-view --wait-rank 1 --wait-ms 25; done
  record even-1 $TR $JOB --steps 500 --bucket-view
) &
wait
grep -H "straggler" $R/record-*.txt > "$R/stragglers.txt" 2>&1
(cd /tmp && tar czf "$OUT/call4.tgz" r4)
cp $R/stragglers.txt "$OUT/"
for n in even wait0 wait1; do python3 -c "import json,sys; d=json.load(open('$R/diagnose-$n.json')); print('$n', '|', d['bound'], '|', d['why'], '|', d.get('straggler',''))" >> "$OUT/verdicts.txt" 2>&1; done
ls -la "$OUT"
