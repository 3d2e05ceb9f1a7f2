"""One case run from start to result: its parameters built, the host's load read, the case measured,
the environment stamped and everything kept as a ``Result`` (with the command that runs it again)."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path

from benchmarks.harness.case import Case
from benchmarks.harness.context import Run
from benchmarks.harness.params import as_dict, build, changed
from benchmarks.harness.result import SUFFIX, Result
from benchmarks.harness.stamp import load_average, stamp


def command_line(case: Case, params: object) -> str:
    """The command that runs this case with these parameters again."""
    words = ["python", "-m", "benchmarks", "run", case.name]
    for pair in changed(params):
        words += ["-p", pair]
    return shlex.join(words)


def run_case(case: Case, given: Mapping[str, str], tiny: bool = False, quiet: bool = False) -> tuple[Result, bool]:
    """Run ``case`` with the parameters ``given`` (on top of its tiny ones with ``tiny``): its
    result, and whether its own checks passed (``Run.failed`` unset)."""
    params = build(case.params, given, case.tiny if tiny else {})
    load = load_average()
    run = Run(params, quiet)
    case.run(run, params)
    result = Result(
        case=case.name,
        command=command_line(case, params),
        stamp=run.stamp or stamp(run.device or case.stamp_device(params), load),
        params=as_dict(params),
        claim=case.claim,
        anchor=case.anchor,
        series=run.series,
        figures=run.figures,
        blocks=run.blocks,
        data=run.data,
    )
    return result, run.failed is None


def keep(result: Result, out: Path, name: str) -> Path:
    """The result as ``NAME.result.json`` in ``out`` (its Markdown: ``python -m benchmarks show``)."""
    return result.write(out / f"{name}{SUFFIX}")
