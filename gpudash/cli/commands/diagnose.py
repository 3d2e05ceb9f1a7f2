"""``gpudash diagnose``: a headless run of a workload family that ends with one diagnosis window
(or, ``--memory``, the allocator's history); its verdict on stdout. Nothing is written."""

from __future__ import annotations

import sys
from typing import Any

from gpudash.arguments.argtypes import UsageError
from gpudash.cli.messages import fail
from gpudash.cli.run_options import config_from_args
from gpudash.cli.settings import user_config, with_defaults
from gpudash.core.protocol import Event, EventKind, ExitCode, RunConfig

DIAGNOSE_CAP_S = 300.0  # seconds after the warm-up by which a diagnosis must have answered


def say_diagnosing(config: RunConfig, warmup_s: float) -> None:
    """``gpudash diagnose``'s progress line (unless -q): what runs, and how long it takes at most."""
    batch = f" bs{config.batch_size}" if config.batch_size else ""
    what = f"{config.workload} {config.variant or '(default variant)'}{batch} on {config.device}"
    window = f"a diagnosis window (at most {DIAGNOSE_CAP_S:g} s)"
    print(
        f"gpudash: diagnosing {what}: {warmup_s:g} s of warm-up, then {window}; the verdict on stdout",
        file=sys.stderr,
        flush=True,
    )


def diagnose(given: dict[str, Any]) -> int:
    """``gpudash diagnose``: a headless run that ends with one diagnosis window; its verdict on stdout."""
    import os
    import tempfile

    from gpudash.recording.headless import HeadlessRecording, run_record

    args = with_defaults(given, user_config())
    try:
        config = config_from_args(args)
    except UsageError as exc:
        return fail(str(exc))
    if not args.quiet:
        say_diagnosing(config, args.warmup)
    held: list[HeadlessRecording] = []
    with tempfile.TemporaryDirectory(prefix="gpudash-diagnose-") as scratch:
        code = run_record(
            config,
            os.path.join(scratch, "run.csv"),
            duration_s=args.warmup + DIAGNOSE_CAP_S,  # a window that never answers does not hang it
            quiet=True,
            diagnose_after_s=args.warmup,
            memory_peak=args.memory,
            stop_after_diagnosis=True,
            recording_out=held,
        )
    events = (held[0].memory_peaks if args.memory else held[0].diagnoses) if held else []
    if code != ExitCode.OK:
        return code  # the run's failure was said (refused, crashed, interrupted)
    if not events:
        return fail(f"no diagnosis: the run ended before its window answered (in {args.warmup + DIAGNOSE_CAP_S:g} s)")
    event = events[0]
    if event.kind == EventKind.ERROR:
        print(f"gpudash: error: {event.message}", file=sys.stderr)
        return int(ExitCode.FAILED)
    print_verdict(event, memory=args.memory, as_json=args.json)
    return 0


def print_verdict(event: Event, *, memory: bool, as_json: bool) -> None:
    """The answer on stdout: the memory's lines or the diagnosis' verdict and advice (or JSON)."""
    import json

    from gpudash.diagnosis.judge import judgement_of

    if memory:
        from gpudash.diagnosis.memory_peak import PeakAnswer

        answer = event.data
        assert isinstance(answer, PeakAnswer), "a memory window's answer carries its peak"  # (``memory_window``)
        print(json.dumps(answer.peak.as_dict(), indent=2) if as_json else "\n".join(answer.lines))
        return
    judged = judgement_of(event)
    if judged is None:  # a source judges every window it measured: a programming error, not the user's
        raise RuntimeError(f"a diagnosis event without its judgement: {event.message}")
    document, lines = judged.answer()
    if as_json:
        ran = event.running
        assert ran is not None, "a workload's diagnosis names its configuration"  # (``LoopState.event``)
        running = {k: v for k, v in ran.as_dict().items() if k != "world_size"}
        print(json.dumps({**running, **document}, indent=2))
    else:
        print("\n".join([event.message, *lines]))
