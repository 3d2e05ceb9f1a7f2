#!/usr/bin/env bash
# Issue 75 on a GPU, call 4 (after call 3's fix: NVML's second look kept the window's verdict over
# compile-bound): the diagnose test and the compile-bound rule's tests on the device's torch, diagnose on
# a job that keeps recompiling under inductor on CUDA, and job_overhead's compiled_resnet in 4 pairs
# (an interval needs 4).
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c "import torch, sys; print('torch', torch.__version__, 'python', sys.version.split()[0])"; date -u +%Y-%m-%dT%H:%MZ; } > "$OUT/env4.txt"
python3 -m pytest -q -o addopts="" -p no:cacheprovider tests/test_compile_bound.py "tests/test_compiled_job.py::test_diagnose_calls_a_job_that_keeps_recompiling_compile_bound_with_the_fix_for_its_cause" > "$OUT/tests_diagnose.txt" 2>&1
python3 -m gpudash diagnose --json -- python3 tests/data/jobs/compiled_recompiles.py --backend inductor --device cuda --lengths 64:464 --every 4 --steps 1600 --limit 1000 --no-break > "$OUT/diagnose.json" 2> "$OUT/diagnose.err"
python3 -m benchmarks run job_overhead -p jobs=compiled_resnet -p pairs=4 --out "$OUT" > "$OUT/overhead.txt" 2>&1
