#!/usr/bin/env bash
# Issue 89's page of real scripts on one GPU: a Lightning script (record and diagnose) and the Hugging
# Face Trainer script (diagnose). Usage: bash docs/bench/h200-issue89l/call.sh   (outputs in $OUT)
set -u; OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c "import torch, lightning, transformers, sys; print('torch', torch.__version__, 'lightning', lightning.__version__, 'transformers', transformers.__version__, 'python', sys.version.split()[0])"; date -u +%Y-%m-%dT%H:%MZ; } > "$OUT/env.txt" 2>&1
LIGHT="python3 benchmarks/jobs/lightning_resnet.py --val-every 300 --val-batches 20 --save-every 600"
run() {  # NAME SECONDS COMMAND...: the command's output in $OUT/NAME.txt, itself on its first line
  local name=$1 limit=$2; shift 2
  { echo "\$ $*"; timeout "$limit" "$@"; echo "exit $?"; } > "$OUT/$name.txt" 2>&1
}
run lightning-record 150 python3 -m gpudash record /tmp/light.csv -- $LIGHT --steps 1500
cp /tmp/light.csv /tmp/light.json "$OUT/" 2>/dev/null
run lightning-diagnose 150 python3 -m gpudash diagnose --no-check -- $LIGHT --steps 100000
run hf-diagnose 200 python3 -m gpudash diagnose --no-check -- python3 benchmarks/jobs/hf_phases.py --steps 100000 --eval-steps 100 --save-steps 200
for f in lightning-record lightning-diagnose hf-diagnose; do echo "== $f"; grep -v "Warning\|warn(" "$OUT/$f.txt" | tail -6 | cut -c1-600; done
