#!/usr/bin/env bash
# Issue 75 on a GPU, call 1: the compile readings' tests on the device's torch (in-process, a compiled
# job under record and diagnose with backend="eager"), the compile knob of a family (inductor), and a
# real model's compiled job under record (inductor): ResNet-50 reading a float off its logits
# (a graph break, and a new constant at every step) with a batch that changes every 20 steps.
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c "import torch, sys; print('torch', torch.__version__, 'python', sys.version.split()[0])"; date -u +%Y-%m-%dT%H:%MZ; } > "$OUT/env.txt"
python3 -m pytest -q -o addopts="" -p no:cacheprovider tests/test_compile_reasons.py tests/test_compiled_job.py > "$OUT/tests_reading.txt" 2>&1
python3 -m pytest -q -o addopts="" -p no:cacheprovider -m gpu -s tests/test_compiled_family_gpu.py > "$OUT/family.txt" 2>&1
gpudash record "$OUT/resnet.csv" --force -- python3 benchmarks/jobs/resnet_job.py --compile --item-break --vary-every 20 --steps 160 --batch 128 > "$OUT/resnet.out" 2> "$OUT/resnet.err"
echo "rc=$?" >> "$OUT/resnet.err"
