#!/usr/bin/env bash
# Issue 90 on one GPU: a compiled job whose batch length changes every 10 steps, with and without
# CUDA graphs, recorded (the steady rate, the steps at a new shape); the GPU tests of the session
# (not with "records").
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
J="tests/data/jobs/compiled_recompiles.py --backend inductor --device cuda --lengths 64,96,128,160 --every 10 --steps 400 --no-break"
for mode in default reduce-overhead; do
  m=""; [ "$mode" = default ] || m="--mode $mode"
  { echo "\$ gpudash record shapes-$mode.csv -- python3 $J $m"; timeout 240 python3 -m gpudash record /tmp/shapes-$mode.csv -- python3 $J $m; } > "$OUT/shapes-$mode.txt" 2>&1
done
[ "$1" = records ] || python3 -m pytest -q -p no:cacheprovider -m "gpu and not multigpu" --durations=10 tests/test_gpt_script_gpu.py tests/test_compiled_family_gpu.py tests/test_job_gpu.py tests/test_sync_sites_gpu.py 2>&1 | tee "$OUT/gpu-tests-final.txt" | tail -3
grep -h "new shape\|steps/s .*95% CI\|recompile " "$OUT"/shapes-*.txt | cut -c1-300
