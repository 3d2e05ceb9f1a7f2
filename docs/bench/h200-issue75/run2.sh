#!/usr/bin/env bash
# Issue 75 on a GPU, call 2 (after call 1's fixes: a family's batch-change recompile read, its cause
# past the grad-mode entry): the compile readings' tests on the device's torch, the compile knob of a
# family (inductor), and ResNet-50 under record (inductor): a float read off its logits (a graph break,
# a new constant at every step) and a batch 8 images shorter every 20 steps.
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c "import torch, sys; print('torch', torch.__version__, 'python', sys.version.split()[0])"; date -u +%Y-%m-%dT%H:%MZ; } > "$OUT/env.txt"
python3 -m pytest -q -o addopts="" -p no:cacheprovider tests/test_compile_reasons.py tests/test_compiled_job.py > "$OUT/tests_reading.txt" 2>&1
python3 -m pytest -q -o addopts="" -p no:cacheprovider -m gpu -s tests/test_compiled_family_gpu.py > "$OUT/family.txt" 2>&1
python3 -m gpudash record "$OUT/resnet.csv" --force -- python3 benchmarks/jobs/resnet_job.py --compile --item-break --vary-every 20 --steps 160 --batch 128 > "$OUT/resnet.out" 2> "$OUT/resnet.err"
echo "rc=$?" >> "$OUT/resnet.err"
