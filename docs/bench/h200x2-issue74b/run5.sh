#!/usr/bin/env bash
# Issue 74, session 18, call 5 (2 GPUs): call 4's diagnose again, after its fix (the link's words
# were read back as a number): the bus bandwidth against the link's peak in the verdict's evidence.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
TR="python3 -m torch.distributed.run --standalone --nproc-per-node 2"
timeout 100 python3 -m gpudash diagnose --json --no-check --warmup 3 -- $TR benchmarks/jobs/ddp_resnet_job.py --steps 3000 --bucket-view > "$OUT/diagnose-even.json" 2> "$OUT/diagnose-even.err"
echo "exit $?" >> "$OUT/diagnose-even.err"
