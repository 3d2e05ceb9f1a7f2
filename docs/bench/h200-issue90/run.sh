#!/usr/bin/env bash
# Issue 90 on one GPU: a compiled decoder LM whose length changes every 10 steps (dynamic=False,
# automatic dynamic shapes, reduce-overhead, and model.compile() in place) recorded beside its own
# clock; its diagnosis at the recompile limit; a ResNet-50 classifier's MFU eager and compiled.
# (--blocks: each block compiled in place, the rest eager; --no-compile: the same model eager).
# Usage: run.sh [tests] [NAME...]   (tests: also the compiled GPU tests; NAMEs: only those runs)
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch, sys; print("torch", torch.__version__, "python", sys.version.split()[0])'; date -u +%F; git log -1 --format=%h; } > "$OUT/env.txt" 2>&1
LM="tests/data/jobs/compiled_lm.py --backend inductor --device cuda --lengths 64,96,128,160 --every 10 --batch 16 --width 256"
with_tests=""; [ "$1" = tests ] && { with_tests=1; shift; }
only=" $* "
run() {  # name, then the gpudash command
  local name=$1; shift
  [ "$only" = "  " ] || [[ "$only" == *" $name "* ]] || return 0
  { echo "\$ $*"; timeout 170 python3 -m gpudash "$@"; } > "$OUT/$name.txt" 2>&1
}
run lm-false record /tmp/lm-false.csv -- python3 $LM --steps 3000
run lm-auto record /tmp/lm-auto.csv -- python3 $LM --steps 3000 --dynamic auto
run lm-graphs record /tmp/lm-graphs.csv -- python3 $LM --steps 3000 --mode reduce-overhead
run lm-inplace record /tmp/lm-inplace.csv -- python3 $LM --steps 1500 --in-place
run lm-blocks record /tmp/lm-blocks.csv -- python3 $LM --steps 1500 --blocks
run lm-eager record /tmp/lm-eager.csv -- python3 $LM --steps 1500 --no-compile
run lm-limit diagnose --no-check -- python3 tests/data/jobs/compiled_lm.py --backend inductor --device cuda --lengths 64,80,96,112,128,144 --every 3 --limit 3 --steps 100000
CL="tests/data/jobs/classifier.py --model resnet50 --device cuda --batch 64 --image-size 224"
RS=${RESNET_STEPS:-400}  # (RESNET_STEPS=1200: intervals narrow enough to compare the two MFU)
run resnet-eager record /tmp/resnet-eager.csv -- python3 $CL --steps $RS
run resnet-compiled record /tmp/resnet-compiled.csv -- python3 $CL --steps $RS --compile
cp /tmp/*.csv "$OUT/" 2>/dev/null
if [ -n "$with_tests" ]; then
  python3 -m pytest -q -p no:cacheprovider -m "gpu and not multigpu" --durations=10 tests/test_gpt_script_gpu.py tests/test_compiled_family_gpu.py > "$OUT/gpu-tests.txt" 2>&1
  tail -2 "$OUT/gpu-tests.txt"
fi
cd "$OUT" && tar czf records.tgz *.csv && rm -f *.csv
grep -h "^JOB\|new shape\|steps/s .*\(CI\|interval\)\|MFU\|recompile limit\|^\\\$" "$OUT"/*.txt | cut -c1-400
