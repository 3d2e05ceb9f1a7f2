import sys, time, json, os
t0 = time.monotonic()
import torch
from torch._dynamo.utils import counters
from workloads.factory import build
from workloads.base import WorkloadOptions
from workloads.knobs import parse_knobs
from workloads.tuning import COMPILE_OPTIONS
mode = sys.argv[1]
K = "amp=bf16,channels_last,cudnn_benchmark,tf32"
dev = torch.device("cuda")
t1 = time.monotonic()
w = build("resnet50", dev, WorkloadOptions(variant="pipelined", batch_size=256, knobs=parse_knobs(K + (",compile=default" if mode == "whole" else ""))))
torch.cuda.synchronize()
build_s = time.monotonic() - t1
first_s = 0.0
if mode.startswith("regional"):
    from torchvision.models.resnet import Bottleneck
    m = w.model_modules()["model"]
    blocks = [b for b in m.modules() if isinstance(b, Bottleneck)]
    for b in blocks:
        b.compile(options=dict(COMPILE_OPTIONS), dynamic=False)
    if mode == "regional-stem":
        for b in (m.conv1, m.bn1, m.relu, m.maxpool, m.avgpool, m.fc):
            b.compile(options=dict(COMPILE_OPTIONS), dynamic=False)
    t = time.monotonic()
    for _ in range(3):
        w.step()
    w.drain(); torch.cuda.synchronize()
    first_s = time.monotonic() - t
for _ in range(10): w.step()
w.drain(); torch.cuda.synchronize()
rates = []
for _ in range(4):
    t = time.perf_counter()
    for _ in range(40): w.step()
    w.drain(); torch.cuda.synchronize()
    rates.append(round(40 * 256 / (time.perf_counter() - t), 1))
ind = {k: v for k, v in counters["inductor"].items() if "fxgraph" in k}
aot = {k: v for k, v in counters["aot_autograd"].items() if "cache" in k}
print(json.dumps(dict(mode=mode, build_s=round(build_s, 1), first_steps_s=round(first_s, 1), samples_per_s=rates, loss=float(w.last_loss), ind=ind, aot=aot)), flush=True)
