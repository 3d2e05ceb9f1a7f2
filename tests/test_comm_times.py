"""A rank's wait in its collectives, as the job's hooks time it (``gpudash_job_comm.CommTimes``):
the longest collective of the step, not their sum — DDP's buckets each wait for a slower rank while
the rank's own backward goes on beside them, and only the longest wait says how far behind the
other rank fell."""

from __future__ import annotations

import contextlib

import torch

from tests.helpers import boot_module


def test_a_step_waits_as_long_as_its_longest_collective_not_their_sum() -> None:
    comms = boot_module("gpudash_job_comm").CommTimes(torch, contextlib.nullcontext)
    assert comms.at_step() is None  # no collective yet: not a distributed job
    for entered, completed in ((0.000, 0.005), (0.002, 0.007), (0.010, 0.019)):  # three buckets
        comms._interval(entered, completed)
    assert abs(comms.at_step() - 9.0) < 1e-9  # the 9 ms bucket, not 19 ms (sum) nor 16 ms (union)
    assert comms.at_step() == 0.0  # a step with none: it waited for no one


def test_a_cpu_collective_still_running_at_the_step_counts_in_the_step_it_completes() -> None:
    comms = boot_module("gpudash_job_comm").CommTimes(torch, contextlib.nullcontext)
    entry: list[object] = [1.000, object(), False, None]  # entered; its future not completed yet
    comms.open.append(entry)
    comms.seen = True
    assert comms.at_step() == 0.0 and comms.open == [entry]
    entry[3] = 1.012  # completed on the backend's thread
    assert abs((comms.at_step() or 0.0) - 12.0) < 1e-9 and comms.open == []
