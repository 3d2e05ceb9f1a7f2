"""Which host events a compiled job's profiler window holds inside its step marks, and what fills the
stretches gpudash reads as outside torch (a one-off look, issue 90)."""
import collections, glob, gzip, json, sys
from gpudash.engine.host_gaps import HOST_CATEGORIES, GAP_US
from gpudash.engine.intervals import clip, event_interval, length, minus, union
for path in sorted(glob.glob(sys.argv[1] + "/**/*.json*", recursive=True))[:3]:
    op = gzip.open if path.endswith(".gz") else open
    doc = json.load(op(path, "rt"))
    ev = [e for e in doc.get("traceEvents", []) if e.get("ph") == "X"]
    marks = [event_interval(e) for e in ev if e.get("name") == "gpudash.step" and e.get("cat") != "gpu_user_annotation"]
    print(path, "events", len(ev), "marks", len(marks))
    cats = collections.Counter(e.get("cat") for e in ev)
    print(" cats", dict(cats))
    busy = union(event_interval(e) for e in ev if e.get("cat") in HOST_CATEGORIES)
    frees = [[(a, b) for a, b in minus(m, clip(busy, m)) if b - a >= GAP_US] for m in marks]
    print(" free>=1ms per mark, us:", [round(length(f)) for f in frees])
    print(" mark lengths, us:", [round(m[1] - m[0]) for m in marks])
    for free in [f for f in frees if f][:2]:
        for a, b in free[:3]:
            inside = collections.Counter((e.get("cat"), e.get("name")[:60]) for e in ev if a <= float(e["ts"]) <= b)
            print("  gap", round(b - a), inside.most_common(8))
