"""Which reference case is host/launch-bound with a margin on an H200 (issue 87): each candidate's
diagnosis twice, through the GPU test's own helper. Run: python docs/bench/h200-issue87/host_bound_probe.py"""

from tests.test_diagnosis_gpu import _diagnosed

for name, variant, batch in [("sync_loss", "fixed", 8), ("encdec", "pipelined", 1), ("encdec", "serial", 4), ("augment", "gpu-vectorized", 8)]:
    for _ in range(2):
        try:
            _diagnosed(name, variant, batch)
        except Exception as exc:  # noqa: BLE001
            print(name, variant, batch, "failed:", exc)
