#!/usr/bin/env bash
# Issue 75 on a GPU, call 3: the readings' tests again (the diagnose test's job now keeps recompiling
# however fast the machine), diagnose on a job that keeps recompiling under inductor on CUDA (a new
# batch length every 4 steps, dynamic=False), and what watching a compiled ResNet-50 costs its
# steady steps: job_overhead's compiled_resnet, bare and under gpudash record, in pairs.
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c "import torch, sys; print('torch', torch.__version__, 'python', sys.version.split()[0])"; date -u +%Y-%m-%dT%H:%MZ; } > "$OUT/env3.txt"
python3 -m pytest -q -o addopts="" -p no:cacheprovider tests/test_compiled_job.py -k diagnose > "$OUT/tests_diagnose.txt" 2>&1
python3 -m gpudash diagnose --json -- python3 tests/data/jobs/compiled_recompiles.py --backend inductor --device cuda --lengths 64:464 --every 4 --steps 1600 --limit 1000 --no-break > "$OUT/diagnose.json" 2> "$OUT/diagnose.err"
python3 -m benchmarks run job_overhead -p jobs=compiled_resnet -p pairs=3 --out "$OUT" > "$OUT/overhead.txt" 2>&1
