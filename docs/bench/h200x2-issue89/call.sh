#!/usr/bin/env bash
# Issue 89 on 2 GPUs (one call): every multigpu test, then `diagnose` of the DDP ResNet-50 whose
# rank 0, or rank 1, sleeps 25 ms before each batch, and of the even job; verdicts.py sums each up
# (the rank its head names, whose evidence, its bound and remedies). Usage: [NO_TESTS=1] bash call.sh ROUNDS
set -u
rounds=${1:-1}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; R=/tmp/r; mkdir -p $R
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
  python3 -c "import torch, sys; print('torch', torch.__version__, 'python', sys.version.split()[0])"; nproc; date -u +%Y-%m-%dT%H:%MZ; } > "$OUT/env.txt" 2>&1
if [ -z "${NO_TESTS:-}" ]; then  # NO_TESTS=1: the diagnoses alone (a second call)
  timeout 200 python3 -m pytest -q -o addopts="" -p no:cacheprovider -m multigpu tests/ > "$OUT/multigpu.txt" 2>&1
  echo "exit $? after ${SECONDS}s" >> "$OUT/multigpu.txt"; tail -3 "$OUT/multigpu.txt"
fi
TR="python3 -m torch.distributed.run --standalone --nproc-per-node 2"
JOB=benchmarks/jobs/ddp_resnet_job.py
diagnose() {  # NAME ARGS...: the verdict's JSON, its text's head and stderr
  local name=$1; shift
  timeout 100 python3 -m gpudash diagnose --json --no-check -- "$@" > "$R/diagnose-$name.json" 2> "$R/diagnose-$name.err"
  echo "exit $? after ${SECONDS}s" >> "$R/diagnose-$name.err"
}
for round in $(seq 1 "$rounds"); do
  diagnose wait0-$round $TR $JOB --steps 100000 --bucket-view --wait-rank 0 --wait-ms 25
  diagnose wait1-$round $TR $JOB --steps 100000 --bucket-view --wait-rank 1 --wait-ms 25
  diagnose even-$round $TR $JOB --steps 100000 --bucket-view
done
(cd /tmp && tar czf "$OUT/diagnose.tgz" r)
python3 docs/bench/h200x2-issue89/verdicts.py $R/diagnose-*.json | tee "$OUT/verdicts.txt"
echo "after ${SECONDS}s"
