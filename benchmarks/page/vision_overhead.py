"""The "Engine overhead" part of the real networks' section: a step gpudash runs against the same
step in a hand-written loop (the ``engine_overhead``, ``host_call_cost`` and ``step_timing_cost``
cases' results in ``docs/bench/h100-vision-overhead/``)."""

from __future__ import annotations

from benchmarks.page.results import (
    OVERHEAD,
    call_cost,
    overhead,
    paired_goal,
    paired_line,
    result,
    rounds_range,
    run_header,
    summary_lines,
)


def engine_overhead_section() -> str:
    """The engine against a hand-written loop: the runs, how the cost was found and removed."""
    return "".join([overhead_runs(), overhead_history(), overhead_steady_state()])


def overhead_runs() -> str:
    """ResNet-50's and ``examples/mine.py``'s steps against the hand loop."""
    return f"""### Engine overhead

A step gpudash runs against the same step in a hand-written loop (`-p hand=true`: copy, `zero_grad`,
loss, `backward`, `step`), interleaved, the order alternating from round to round.

{overhead("resnet50.txt")}

{overhead("mine.txt")}

On ResNet-50's step: {overhead_verdict("resnet50.txt")}. On `examples/mine.py`'s, a host-bound
step of about a millisecond (the GPU waits for Python's launches): {overhead_verdict("mine.txt")}.
Such a step's speed swings by several percent from round to round on these machines, hence the
width of its interval; the goal is met only if the whole interval clears it. `mine.txt` is a run of
60 rounds; it replaced a run of the same command with 30 rounds (in git history), whose interval
spanned the goal, on the same engine code path.

"""


def overhead_history() -> str:
    """What the engine did on a fast step's critical path, and what it costs."""
    return f"""What the engine does on that step's critical path, and how it got there (each run on an H100 the
same day, its output in `docs/bench/h100-vision-overhead/`):

- `mine-event-per-step.txt`, a timing CUDA event after every step and a new step loop built every
  round: {overhead_verdict("mine-event-per-step.txt")};
- `mine-polled-every-step.txt`, fast steps timed in groups of about 10 ms (one event per group,
  `docs/measuring.md`), the loop reused as the workload process reuses it, but the timer asked for
  completed steps after every step: {overhead_verdict("mine-polled-every-step.txt")}; in the same run
  {extra_line("mine-polled-every-step.txt", "engine (grouped)/engine with an event per step")};
- `mine.txt`, as now: the timer asked at most every 2 ms. In the same run
  {extra_line("mine.txt", "engine (grouped)/engine with an event per step")}.

`mine-paired-before.txt` ({run_header("mine-paired-before.txt")}) is the same command with many short
rounds, `-p rounds=200 -p seconds=0.1 -p per_step_events=true`, read by pairs (`compare_paired`: each round's
engine/bare, a t interval over their logs, so a swing of the host that moves both halves of a round
cancels), on the engine as it was then (the loop's bookkeeping after every step, groups of ~10 ms):
{paired_line("mine-paired-before.txt", "engine/bare")};
{paired_line("mine-paired-before.txt", "engine with an event per step/bare")}.

`python -m benchmarks run host_call_cost` found where the cost lies, by alternating steps one by one with and
without one call between them (a block's ratio its bare steps' time over its other steps', the
blocks read by pairs; `host-call-cost.txt`):

{overhead("host-call-cost.txt")}

A Python call of the tracker's size shows no change; a timing event recorded after every step is
measurable: {call_cost("a timing event every step, record(stream)")}. The engine now records one event
per group of ~25 ms (it was ~10 ms), issues the group's steps back to back and does its
bookkeeping once per group (`docs/measuring.md`), and a serial step runs without the calls that
only the general path needs. `mine-bursts.txt` ({run_header("mine-bursts.txt")}), that engine, the
same command with `-p rounds=600 -p seconds=0.1`:

{summary_lines("mine-bursts.txt")}

{paired_goal("mine-bursts.txt", "engine/bare", 0.98)}

"""


def overhead_steady_state() -> str:
    """The engine's step timer between runs and in its steady state."""
    return f"""Each of those rounds is a `run()` of its own, and a run's end drained the device and set the step
timer back to one event per step until it had timed the step again: once per run in the product,
once per 0.1 s round here. A run's end now keeps the pace it measured (a change of configuration
still starts from one step). `mine-rounds.txt` ({run_header("mine-rounds.txt")}), that engine,
`-p rounds=300 -p seconds=0.1 -p no_sync_count=true`, on a host that swung between
{rounds_range("mine-rounds.txt")} bare steps/s from round to round that hour:
{paired_line("mine-rounds.txt", "engine/bare")}.

Rounds restart the loop and pair 0.1 s apart. `-p interleave=S` measures the engine as a run spends
nearly all its time, in its steady state: one engine run, and before each of its bursts the same
number of bare steps, timed on the host clock; a burst's time runs to the start of the next one, so
the loop's bookkeeping is in it, and adjacent bursts, ~25 ms apart, see the same host.
`mine-interleaved.txt` ({run_header("mine-interleaved.txt")}), `-p hand=true -p rounds=0 -p interleave=90`:

{summary_lines("mine-interleaved.txt")}

{paired_goal("mine-interleaved.txt", "engine/bare", 0.98, how="interleaved burst by burst")}

`python -m benchmarks run step_timing_cost` times the events alone around the hand loop (`step-timing-cost.txt`):

{overhead("step-timing-cost.txt")}
"""


def overhead_result(file: str) -> tuple[str, float]:
    """An engine_overhead run's ratio of means with its interval and verdict, and its median ratio."""
    r = result(OVERHEAD, file)
    means = r.figure("engine/bare, ratio of means")
    median = r.figure("median engine/bare").value
    assert median is not None, f"{file}: no median ratio"
    return means.text.removeprefix("engine/bare, ratio of means: "), median


def extra_line(file: str, label: str) -> str:
    """One of an engine_overhead run's further ratios of means (``label, ratio of means: ...``), as printed."""
    return result(OVERHEAD, file).figure(f"{label}, ratio of means").text


def overhead_verdict(file: str, goal: float = 0.98) -> str:
    """The goal "at least 0.98x" against a run: met when the whole interval clears it."""
    ratio, median = overhead_result(file)
    low = result(OVERHEAD, file).figure("engine/bare, ratio of means").low
    assert low is not None, f"{file}: no interval"
    verdict = (
        "met"
        if low >= goal
        else "not met"
        if median < goal
        else "not decided: the median meets it, the interval spans it"
    )
    return f"ratio of means {ratio}, median round {median:.3f}: the goal of at least {goal}× is {verdict}"
