#!/usr/bin/env bash
# The GPU suite on a lent machine (issue 88: after the bootstrap became a package and the verdict is made once): the carried wheels, then pytest over the named test
# files (or every one: "all"), its whole output under $OUT. Usage: gpu_suite.sh PART MARKER FILES...
set -o pipefail
part=$1; marker=$2; shift 2
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch, sys; print("torch", torch.__version__, "python", sys.version.split()[0])'; date -u +%F; } > "$OUT/env-$part.txt" 2>&1
[ "$1" = all ] && set --
python3 -m pytest -q -p no:cacheprovider -m "$marker" --durations=15 "$@" 2>&1 | tee "$OUT/gpu-tests-$part.txt"
