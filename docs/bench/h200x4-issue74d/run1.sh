#!/usr/bin/env bash
# Issue 74, session 20, call 1 (4 GPUs of one host, two pairs side by side). NCCL's collectives
# timed without TORCH_NCCL_ENABLE_TIMING (an event at each call and at each end):
# pair 0,1 — the multigpu test of each rank's wait; window_probe.py (which traced steps a GPU-only
# window slows); memory_probe.py bare and under gpudash record (FSDP2 and DDP: speed and peaks), twice;
# pair 2,3 — gpudash record of the DDP job with rank 0 late, rank 1 late (twice each) and even:
# is the straggler named?
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
R=/tmp/r1; mkdir -p $R
export PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader; nvidia-smi topo -m
  python3 -c "import torch, sys; print('torch', torch.__version__, 'python', sys.version.split()[0])"; nproc; date -u +%Y-%m-%dT%H:%MZ; } > "$R/env.txt" 2>&1
TR="python3 -m torch.distributed.run --standalone --nproc-per-node 2"
B=docs/bench/h200x4-issue74d
JOB=benchmarks/jobs/ddp_resnet_job.py
DIR=$R CSV_DIR=$R DIAGNOSE_S=150 DIAGNOSE_FLAGS=--no-check RECORD_S=100
. docs/bench/h200x4-issue74c/calls.sh  # diagnose, record
(
  export CUDA_VISIBLE_DEVICES=0,1
  timeout 120 python3 -m pytest -q -o addopts="" -p no:cacheprovider -m multigpu -s tests/test_comm_times_nccl.py > $R/multigpu.txt 2>&1
  timeout 150 $TR $B/window_probe.py --windows 3 > $R/window_probe.jsonl 2> $R/window_probe.err
  for round in 1 2; do
    for model in fsdp ddp; do
      timeout 90 $TR $B/memory_probe.py --model $model 2>>$R/memory.err | grep '^JOB' >> $R/memory.txt
      timeout 90 python3 -m gpudash record $R/mem-$model-$round.csv --force -- $TR $B/memory_probe.py --model $model 2>>$R/memory.err | grep '^JOB' >> $R/memory.txt
    done
  done
) &
(
  export CUDA_VISIBLE_DEVICES=2,3
  for i in 1 2; do
    record wait0-$i $TR $JOB --steps 500 --bucket-view --wait-rank 0 --wait-ms 25
    record wait1-$i $TR $JOB --steps 500 --bucket-view --wait-rank 1 --wait-ms 25
  done
  record even-1 $TR $JOB --steps 500 --bucket-view
) &
wait
grep -H "straggler" $R/record-*.txt > "$R/stragglers.txt" 2>&1
(cd /tmp && tar czf "$OUT/call1.tgz" r1)
cp $R/stragglers.txt $R/multigpu.txt $R/window_probe.jsonl $R/memory.txt "$OUT/" 2>/dev/null
tail -5 $R/multigpu.txt; cat $R/window_probe.jsonl $R/memory.txt $R/stragglers.txt
