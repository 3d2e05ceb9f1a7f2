"""A user's image classifier as torchvision's and timm's reference scripts train one, on one device:
a torchvision model (``--model resnet50``), SGD with momentum, channels-last and bf16 autocast on a
GPU, ``--compile`` for ``torch.compile(model)``; batches made on the device (no input pipeline to
wait for). Its own rate after a warm-up, from CUDA events on a GPU (the host's clock on the CPU), on
its last line: ``JOB steps=N steps_per_s=X``.

``python classifier.py --model resnet50 --device cuda --compile --steps 300``
"""

from __future__ import annotations

import argparse
import time

import torch
import torchvision

WARMUP = 20


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="resnet18")
    p.add_argument("--device", default="cpu")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--compile", action="store_true")
    p.add_argument("--backend", default="inductor")
    args = p.parse_args()
    device = torch.device(args.device)
    on_gpu = device.type == "cuda"
    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = True
    model = torchvision.models.get_model(args.model, num_classes=100).to(device, memory_format=torch.channels_last)
    step_model = torch.compile(model, backend=args.backend) if args.compile else model
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    x = torch.randn(args.batch, 3, args.image_size, args.image_size, device=device)
    x = x.to(memory_format=torch.channels_last)
    y = torch.randint(0, 100, (args.batch,), device=device)
    start = torch.cuda.Event(enable_timing=True) if on_gpu else None
    end = torch.cuda.Event(enable_timing=True) if on_gpu else None
    began = 0.0
    for step in range(args.steps):
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=on_gpu):
            loss = torch.nn.functional.cross_entropy(step_model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step + 1 == WARMUP:
            if start is not None:
                start.record()
            began = time.perf_counter()
        if step % 100 == 0:
            print(f"step {step} loss {loss.item():.3f}", flush=True)
    if start is not None and end is not None:
        end.record()
        end.synchronize()
        seconds = start.elapsed_time(end) / 1e3
    else:
        seconds = time.perf_counter() - began
    print(f"JOB steps={args.steps} steps_per_s={(args.steps - WARMUP) / seconds:.3f}", flush=True)


if __name__ == "__main__":
    main()
