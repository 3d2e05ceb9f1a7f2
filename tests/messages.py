"""Typed views of what a source hands over: the ``Sample | Event | GpuSample`` stream narrowed by kind."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

from gpudash.core.protocol import Event, EventKind, GpuSample, Message, Sample

T = TypeVar("T")


def present(value: T | None, what: str = "a value") -> T:
    """``value``, which the test expects to be there (a clear failure, not an AttributeError, when not)."""
    assert value is not None, f"expected {what}, got None"
    return value


def events_of(messages: Iterable[object], kind: EventKind | str | None = None) -> list[Event]:
    """The events among ``messages`` (of ``kind`` when given), in order."""
    wanted = None if kind is None else EventKind(kind)
    return [m for m in messages if isinstance(m, Event) and (wanted is None or m.kind == wanted)]


def samples_of(messages: Iterable[object]) -> list[Sample]:
    """The throughput samples among ``messages``, in order."""
    return [m for m in messages if isinstance(m, Sample)]


def gpu_samples_of(messages: Iterable[object]) -> list[GpuSample]:
    """The NVML samples among ``messages``, in order."""
    return [m for m in messages if isinstance(m, GpuSample)]


def event(time_s: float, kind: EventKind | str, what: str = "", before: str = "", after: str = "") -> Event:
    """An event built the way a CSV row builds one (its kind given as text or as the enum)."""
    return Event(time_s, EventKind(kind), what, before, after)


def job_sample(
    t: float,
    steps_per_s: float,
    train_s: float | None,
    *,
    batch: int = 0,
    steps: int | None = None,
    interval_s: float = 0.25,
    workload: str = "job:train.py",
) -> Sample:
    """A user's job's sample at ``t`` as ``gpudash.job.steps`` makes one: its rate over ``interval_s``,
    the seconds of training steps that rate is over (``train_s``), no step times or syncs; its
    steps (unless given) and samples as that rate makes them by ``t``, its samples/s unknown where
    the batch is (0)."""
    return Sample(
        time_s=t,
        workload=workload,
        variant="",
        batch_size=batch,
        steps=int(t * steps_per_s) if steps is None else steps,
        samples=int(t * steps_per_s * batch),
        interval_s=interval_s,
        steps_per_s=steps_per_s,
        samples_per_s=steps_per_s * batch if batch else None,
        step_ms_p50=None,
        step_ms_p95=None,
        syncs_per_step=None,
        train_s=train_s,
    )


__all__ = ["Message", "event", "events_of", "gpu_samples_of", "job_sample", "present", "samples_of"]
