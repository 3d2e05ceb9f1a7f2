"""Whether writing a profiler window's trace on a thread of its own would spare the job's training
thread the writing: torch.profiler over a step of a chain of small layers
(``tests/data/jobs/many_ops.py``'s model) on the CPU, in one process, rounds alternating two arms.

- ``on the thread``: the trace written at the window's end, on the training thread (as gpudash does);
- ``beside``: written by a thread of its own while the job steps on.

Per round and arm: a window of 5 traced steps; then the end (the profiler's stop, and in the first
arm the writing) and the ``--after`` steps that follow it. The figure: the end and those steps,
beside over on the thread, paired by round (a t interval over the rounds' log ratios); and of the
writing's time, what the steps beside it lost (the paired difference of the medians, plus the
writing). Torch's writer (``_ProfilerResult.save``) holds Python's lock for much of its time: a job
whose loop is Python waits for it either way.

    python docs/bench/cpu-issue74g/window_block.py --rounds 12 [--threads 1]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile

ROOT = Path(__file__).parents[3]
sys.path.insert(0, str(ROOT))

from benchmarks.harness.stats import ratio, ratio_text  # noqa: E402
from tests.data.jobs.many_ops import Chain  # noqa: E402

ARMS = ("on the thread", "beside")


def one(train: Any, path: str, arm: str, after: int) -> tuple[float, float]:
    """A window of 5 steps, its end and the ``after`` steps that follow: their seconds, and the writing's."""
    prof = profile(activities=[ProfilerActivity.CPU])
    prof.start()
    for _ in range(5):
        train()
    wrote: list[float] = []

    def write() -> None:
        began = time.perf_counter()
        prof.export_chrome_trace(path)
        wrote.append(time.perf_counter() - began)

    began = time.perf_counter()
    prof.stop()
    writer = threading.Thread(target=write)
    if arm == ARMS[0]:
        write()
    else:
        writer.start()
    for _ in range(after):
        train()
    held = time.perf_counter() - began
    if arm == ARMS[1]:
        writer.join()
    return held, wrote[0]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=12)
    p.add_argument("--depth", type=int, default=400, help="the chain's layers (~6 operators each a step)")
    p.add_argument("--after", type=int, default=10, help="the steps after the window's end that are timed")
    p.add_argument("--threads", type=int, default=0, help="torch's intra-op threads (0: torch's own count)")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = Chain(args.depth)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(32, 64)

    def train() -> None:
        loss = model(x).square().mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    held: dict[str, list[float]] = {arm: [] for arm in ARMS}
    writes: list[float] = []
    with tempfile.TemporaryDirectory() as folder:
        one(train, f"{folder}/warm.json", ARMS[0], args.after)
        for r in range(args.rounds):
            for arm in ARMS if r % 2 == 0 else tuple(reversed(ARMS)):
                seconds, wrote = one(train, f"{folder}/{r}-{arm}.json", arm, args.after)
                held[arm].append(seconds)
                writes.append(wrote)
    head = f"torch {torch.__version__}, {torch.get_num_threads()} intra-op threads, {args.rounds} rounds"
    print(f"{head}, a chain of {args.depth} layers, 5 traced steps a window")
    writing = 1e3 * statistics.median(writes)
    print(f"a trace's writing: median {writing:.1f} ms ({1e3 * min(writes):.1f}–{1e3 * max(writes):.1f})")
    for arm, values in held.items():
        print(f"{arm}: the end and {args.after} steps after it: median {1e3 * statistics.median(values):.1f} ms")
    figure = ratio("beside over on the thread", held[ARMS[0]], held[ARMS[1]], higher_is_better=False)
    print(f"beside over on the thread: {ratio_text(figure)}, {figure.verdict}")
    saved = 1e3 * statistics.median(a - b for a, b in zip(held[ARMS[0]], held[ARMS[1]], strict=True))
    lost = f"the job's steps beside it lost {writing - saved:.1f} ms (median of the rounds)"
    print(f"of the writing's {writing:.1f} ms, {lost}")


if __name__ == "__main__":
    main()
