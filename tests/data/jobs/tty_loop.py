"""A user's small training loop that uses its terminal as scripts do: it may set the terminal's
modes (``termios.tcsetattr``, as a progress bar or a pager does), print each step, write its pid
to a file, and start a helper that outlives it. Prints ``JOB done steps=N`` at its end."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import torch


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--step-s", type=float, default=0.05)
    p.add_argument("--tcsetattr", action="store_true", help="set its terminal's modes (stdout's) at its start")
    p.add_argument("--pid-file", default="")
    p.add_argument("--helper-file", default="", help="start a helper (sleep) in its own group, its pid written here")
    args = p.parse_args()
    if args.pid_file:
        with open(args.pid_file, "w") as f:
            f.write(str(os.getpid()))
    if args.tcsetattr:
        import termios

        termios.tcsetattr(1, termios.TCSANOW, termios.tcgetattr(1))
    if args.helper_file:
        helper = subprocess.Popen(["sleep", "60"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(args.helper_file, "w") as f:
            f.write(str(helper.pid))
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(1, args.steps + 1):
        loss = model(torch.ones(2, 4)).sum()
        optimizer.zero_grad()
        loss.backward()
        time.sleep(args.step_s)
        optimizer.step()
        print(f"step {step}", flush=True)
    print(f"JOB done steps={args.steps}", flush=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
