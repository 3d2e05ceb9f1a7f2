"""Probe: time named functions in every gpudash process (GPUDASH_PROBE_LOG=path)."""
import os, time, functools, sys
LOG = os.environ.get("GPUDASH_PROBE_LOG")
T0 = time.monotonic()
if LOG:
    def _w(name, fn):
        @functools.wraps(fn)
        def inner(*a, **k):
            t = time.monotonic()
            try:
                return fn(*a, **k)
            finally:
                with open(LOG, "a") as f:
                    f.write(f"{os.getpid()} {t - T0:8.2f} {name} {time.monotonic() - t:.3f}\n")
        return inner
    def patch(mod, attr, name=None):
        setattr(mod, attr, _w(name or f"{mod.__name__}.{attr}", getattr(mod, attr)))
    try:
        from gpudash.engine import traces, measure_windows, reconfigure, loop as L
        from workloads import factory
        patch(traces, "profile_window")
        patch(traces, "read_events")
        patch(traces, "figures")
        patch(measure_windows, "_timed_steps")
        patch(measure_windows, "_evidence")
        patch(measure_windows, "_losses")
        patch(measure_windows, "_both_losses")
        patch(factory, "build")
        for n in dir(reconfigure):
            f = getattr(reconfigure, n)
            if callable(f) and getattr(f, "__module__", "") == reconfigure.__name__ and not isinstance(f, type) and not n.startswith("__"):
                patch(reconfigure, n)
        L.StepLoop.settle = _w("settle", L.StepLoop.settle)
        _orig_pw = traces.profile_window
        def pw(torch, *a, **k):
            P = torch.profiler.profile
            if not getattr(P, "_probed", False):
                P.__exit__ = _w("profiler.__exit__", P.__exit__)
                P.export_chrome_trace = _w("export_chrome_trace", P.export_chrome_trace)
                P._probed = True
            return _orig_pw(torch, *a, **k)
        traces.profile_window = pw
    except Exception as e:
        print("probe patch failed", e, file=sys.stderr)
