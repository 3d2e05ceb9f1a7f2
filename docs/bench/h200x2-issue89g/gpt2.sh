#!/usr/bin/env bash
# Issue 89's page of real scripts, the compiled GPT row over 2 ranks: `gpudash record` of the script
# under torchrun (DDP, NCCL), gpudash's rate against each rank's own steady rate, and `diagnose`.
# Usage: bash docs/bench/h200x2-issue89g/gpt2.sh   (outputs in $OUT)
set -u; OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader; python3 -c "import torch, sys; print('torch', torch.__version__, 'python', sys.version.split()[0])"; date -u +%Y-%m-%dT%H:%MZ; } > "$OUT/env.txt" 2>&1
TORCHRUN="python3 -m torch.distributed.run --standalone --nproc-per-node 2"
GPT="tests/data/jobs/gpt_train.py --compile --layers 4 --embd 256 --heads 4 --block 256 --batch 8 --eval-interval 25 --eval-iters 40 --log-interval 10"
{ echo "\$ gpudash record /tmp/gpt2.csv -- $TORCHRUN $GPT --steps 1000"; timeout 240 python3 -m gpudash record /tmp/gpt2.csv -- $TORCHRUN $GPT --steps 1000; echo "exit $?"; } > "$OUT/gpt2-record.txt" 2>&1
cp /tmp/gpt2.csv /tmp/gpt2.json "$OUT/" 2>/dev/null
{ echo "\$ gpudash diagnose --no-check --warmup 5 -- $TORCHRUN $GPT --steps 100000"; timeout 180 python3 -m gpudash diagnose --no-check --warmup 5 -- $TORCHRUN $GPT --steps 100000; echo "exit $?"; } > "$OUT/gpt2-diagnose.txt" 2>&1
grep -h "^JOB\|CI over\|goodput\|^[a-z/-]*-bound\|^waiting\|exit " "$OUT/gpt2-record.txt" "$OUT/gpt2-diagnose.txt" | cut -c1-500
