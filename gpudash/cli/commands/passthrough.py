"""``gpudash sweep``, ``gpudash tune`` and ``gpudash report``: each parses its own arguments (every
word after its name), so the handler only hands them on."""

from __future__ import annotations


def run_passthrough(name: str, argv: list[str]) -> int:
    """Run command ``name`` (one of ``options.PASSTHROUGH``) on ``argv``; its exit status."""
    if name == "sweep":
        from gpudash.sweep.run import main as sweep_main

        return sweep_main(argv)
    if name == "tune":
        from gpudash.tune.run import main as tune_main

        return tune_main(argv)
    from gpudash.report.command import main as report_main

    return report_main(argv)
