#!/usr/bin/env bash
# Issue 74, session 20, calls 2 and 3 (2 GPUs, alone on the host): after NCCL timing without
# TORCH_NCCL_ENABLE_TIMING, the DDP job under gpudash record --trace-every 5 against bare, 5 runs
# each way interleaved (calls 2 and 3 joined: 10 against 10). With PROBE=1 first: what a 3.9 ms DDP
# step (memory_probe.py --model ddp, 21 buckets) pays for DDP's Python hook alone and under gpudash.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader; nvidia-smi topo -m
  python3 -c "import torch, sys; print('torch', torch.__version__, 'python', sys.version.split()[0])"; nproc; date -u +%Y-%m-%dT%H:%MZ; } > "$OUT/env.txt" 2>&1
TR="python3 -m torch.distributed.run --standalone --nproc-per-node 2"
P=docs/bench/h200x4-issue74d/memory_probe.py
if [ "${PROBE:-0}" = 1 ]; then
  for round in 1 2; do
    timeout 60 $TR $P --model ddp 2>/dev/null | grep '^JOB' >> "$OUT/ddp_hook.txt"
    timeout 60 $TR $P --model ddp --python-hook 2>/dev/null | grep '^JOB' >> "$OUT/ddp_hook.txt"
    timeout 60 python3 -m gpudash record /tmp/ddp-$round.csv --force -- $TR $P --model ddp 2>/dev/null | grep '^JOB' >> "$OUT/ddp_hook.txt"
  done
fi
JOB=job=benchmarks/jobs/ddp_resnet_job.py,--bucket-view,--steps,400
timeout $((580 - SECONDS)) python3 -m benchmarks run torchrun_windows -p $JOB -p runs=5 -p bare=5 -p out=/tmp/tw --out /tmp/twres > "$OUT/windows.txt" 2>&1
echo "exit $?" >> "$OUT/windows.txt"
cp /tmp/twres/torchrun_windows.result.json "$OUT/windows.result.json"
(cd /tmp && find tw -name '*.csv' -o -name '*.log' -o -name '*.json' | grep -v traces | tar czf "$OUT/tw.tgz" -T - twres 2>/dev/null)
cat "$OUT/ddp_hook.txt" 2>/dev/null; tail -8 "$OUT/windows.txt"
