#!/usr/bin/env bash
# Issue 89's page of real scripts, the compiled GPT row on one GPU: gpudash's rate against the
# script's own steady rate (its steps from the 20th over their own seconds, evaluations and saves
# left out). Usage: bash docs/bench/h200-issue89c/gpt.sh   (outputs in $OUT)
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch, sys; print("torch", torch.__version__, "python", sys.version.split()[0])'; date -u +%F; } > "$OUT/env.txt" 2>&1
GPT="tests/data/jobs/gpt_train.py --compile --layers 4 --embd 256 --heads 4 --block 256 --batch 8 --eval-interval 25 --eval-iters 40 --log-interval 10"
{ echo "\$ gpudash record /tmp/gpt.csv -- python3 $GPT --steps 1000"; timeout 240 python3 -m gpudash record /tmp/gpt.csv -- python3 $GPT --steps 1000; } > "$OUT/gpt-record.txt" 2>&1
cp /tmp/gpt.csv /tmp/gpt.json "$OUT/" 2>/dev/null
grep -h "^JOB\|CI over\|goodput\|model FLOPs" "$OUT/gpt-record.txt" | cut -c1-400
