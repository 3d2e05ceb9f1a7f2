"""The largest batch that really fits, bare: each batch run in its own process for 4 steps."""
import subprocess, sys

def fits(b):
    r = subprocess.run([sys.executable, ".devrun/gpt_train.py", "--batch", str(b), "--steps", "4"] + sys.argv[1:], capture_output=True, text=True)
    ok = r.returncode == 0
    print(f"batch {b}: {'fits' if ok else 'out of memory' if 'OutOfMemory' in r.stderr else 'failed ' + r.stderr[-300:]}", flush=True)
    return ok

lo, hi = 1, 8
while fits(hi):
    lo, hi = hi, hi * 2
while hi - lo > 1:
    mid = (lo + hi) // 2
    if fits(mid):
        lo = mid
    else:
        hi = mid
print(f"BISECT largest batch that fits: {lo}")
