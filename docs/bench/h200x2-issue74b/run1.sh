#!/usr/bin/env bash
# Issue 74, session 18, call 1 (2 GPUs): what NVML says of the links; what a profiler window costs a
# DDP ResNet-50 step by how it is taken, and the steps after it (CUPTI torn down or kept); bare,
# plain gpudash record and --trace-every 5 runs of the DDP job with their recordings; FSDP2's diagnosis.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
D=docs/bench/h200x2-issue74b
TR="python3 -m torch.distributed.run --standalone --nproc-per-node 2"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c "import torch, sys; print('torch', torch.__version__, 'python', sys.version.split()[0])"; date -u +%Y-%m-%dT%H:%MZ; nvidia-smi topo -m; } > "$OUT/env.txt" 2>&1
python3 $D/nvml_links.py > "$OUT/links.json" 2>&1
TEARDOWN_CUPTI=1 timeout 120 $TR $D/window_probe.py --out /tmp/probe > "$OUT/probe-teardown.txt" 2>&1
timeout 120 $TR $D/window_probe.py --out /tmp/probe2 > "$OUT/probe-kept.txt" 2>&1
timeout 300 python3 -m benchmarks run torchrun_windows -p job=benchmarks/jobs/ddp_resnet_job.py,--bucket-view,--steps,600 -p runs=2 -p bare=2 -p plain=2 -p out=/tmp/tw --out /tmp/twres > "$OUT/windows.txt" 2>&1
echo "exit $?" >> "$OUT/windows.txt"
timeout 120 python3 -m gpudash diagnose --json --warmup 3 -- $TR tests/data/jobs/ddp_ranks.py --fsdp --dim 4096 --batch 64 --item-ms 0 > "$OUT/fsdp2-diagnose.json" 2> "$OUT/fsdp2-diagnose.err"
echo "exit $?" >> "$OUT/fsdp2-diagnose.err"
(cd /tmp && find tw -name '*.csv' -o -name '*.log' -o -name '*.json' | grep -v traces | tar czf "$OUT/tw.tgz" -T - twres 2>/dev/null)
ls -la "$OUT"
