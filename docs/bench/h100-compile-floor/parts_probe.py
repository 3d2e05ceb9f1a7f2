import sys, time, os, json, cProfile, pstats, io, subprocess
T = {}
t0 = time.monotonic()
import torch
T["import_torch"] = time.monotonic() - t0
t = time.monotonic(); torch.cuda.init(); torch.empty(1, device="cuda"); torch.cuda.synchronize(); T["cuda_init"] = time.monotonic() - t
from workloads.factory import build
from workloads.base import WorkloadOptions
from workloads.knobs import parse_knobs
dev = torch.device("cuda")
pr = cProfile.Profile()
t = time.monotonic()
pr.enable()
w = build("resnet50", dev, WorkloadOptions(variant="pipelined", batch_size=256))
torch.cuda.synchronize()
pr.disable()
T["build"] = time.monotonic() - t
s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("cumulative").print_stats(35); print(s.getvalue()[:9000])
for _ in range(3): w.step()
w.drain()
from gpudash.engine import traces
from gpudash.engine.trace_figures import figures, read_events
def window(acts, steps=10):
    t = time.perf_counter()
    with torch.profiler.profile(activities=acts) as prof:
        for _ in range(steps): w.step()
        w.drain()
    wall = (time.perf_counter() - t) * 1000
    t1 = time.perf_counter(); prof.export_chrome_trace("/tmp/p.json"); t2 = time.perf_counter()
    ev = read_events("/tmp/p.json"); t3 = time.perf_counter()
    fig = figures(ev, steps, wall); t4 = time.perf_counter()
    return dict(n=len(ev), exit_and_steps=round(t1 - t, 2), export=round(t2 - t1, 2), read=round(t3 - t2, 2), fig=round(t4 - t3, 2), busy=fig.gpu_busy_pct, delay=fig.launch_delay_us, kps=fig.kernels_per_step, size=os.path.getsize("/tmp/p.json")), prof
A = torch.profiler.ProfilerActivity
for name, acts in [("cpu+cuda", [A.CPU, A.CUDA]), ("cuda", [A.CUDA]), ("cpu+cuda", [A.CPU, A.CUDA]), ("cuda", [A.CUDA])]:
    r, prof = window(acts)
    print(name, json.dumps(r), flush=True)
# in-memory kineto events
r, prof = window([A.CUDA])
t = time.perf_counter()
evs = prof.profiler.kineto_results.events()
kinds = {}
for e in evs:
    k = e.activity_type() if hasattr(e, "activity_type") else str(e.device_type())
    kinds[k] = kinds.get(k, 0) + 1
print("kineto events", len(evs), round(time.perf_counter() - t, 2), kinds, flush=True)
print(json.dumps({k: round(v, 2) for k, v in T.items()}), flush=True)
