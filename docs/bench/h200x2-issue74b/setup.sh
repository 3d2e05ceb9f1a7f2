# Sourced by this folder's run*.sh (ENV_FILE: the name of the environment's file in $OUT): the
# shell's settings, $OUT, the folder ($D), torchrun for 2 ranks ($TR), the DDP job ($JOB), and
# the GPUs, torch and the date written to $OUT/$ENV_FILE.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
D=docs/bench/h200x2-issue74b
TR="python3 -m torch.distributed.run --standalone --nproc-per-node 2"
JOB=benchmarks/jobs/ddp_resnet_job.py
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c "import torch, sys; print('torch', torch.__version__, 'python', sys.version.split()[0])"; date -u +%Y-%m-%dT%H:%MZ; } > "$OUT/${ENV_FILE:-env.txt}" 2>&1
