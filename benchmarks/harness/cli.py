"""``python -m benchmarks``: the harness's one entry point.

    python -m benchmarks list [--tag TAG] [--json] [CASE]     # the cases (CASE: its parameters too)
    python -m benchmarks run CASE… [-p NAME=VALUE…] [--tiny] [--out DIR] [--name NAME]
    python -m benchmarks run --tag tiny [--out DIR]            # every case of a tag (tiny: its tiny values)
    python -m benchmarks compare A.result.json B.result.json   # B against A, arm by arm
    python -m benchmarks show RESULT.result.json               # a result as Markdown
    python -m benchmarks page [--check]                        # docs/BENCHMARKS.md from docs/bench/'s results

``run`` prints each result as Markdown; with ``--out`` it also keeps it there as ``NAME.result.json``
(schema-versioned; ``show`` writes it out as Markdown again). Exit status: 0 done, 1 a case's own check failed
(its result is kept), 2 a usage error or a case that cannot run here (say, without CUDA)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from benchmarks.harness.case import TAGS, BadParameter, Case, Unavailable
from benchmarks.harness.params import described, parse_pairs
from benchmarks.harness.registry import cases, named, tagged


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = p.add_subparsers(dest="command", required=True)
    ls = sub.add_parser("list", help="the cases")
    ls.add_argument("case", nargs="?", help="one case: its claim, arms and parameters")
    ls.add_argument("--tag", choices=sorted(TAGS), help="only the cases with this tag")
    ls.add_argument("--json", action="store_true", help="as JSON (name, title, claim, anchor, tags, arms, …)")
    run = sub.add_parser("run", help="run cases")
    run.add_argument("cases", nargs="*", metavar="CASE")
    run.add_argument("--tag", choices=sorted(TAGS), help="every case with this tag (tiny: with its tiny values)")
    run.add_argument("-p", "--param", action="append", default=[], metavar="NAME=VALUE", help="a parameter (one case)")
    run.add_argument("--tiny", action="store_true", help="the case's tiny values (a seconds-long CPU run)")
    run.add_argument("--out", type=Path, help="keep the result here, NAME.result.json")
    run.add_argument("--name", help="the files' NAME (one case; default: the case's name)")
    run.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    cmp = sub.add_parser("compare", help="B's result against A's, arm by arm")
    cmp.add_argument("a", type=Path)
    cmp.add_argument("b", type=Path)
    show = sub.add_parser("show", help="a result as Markdown")
    show.add_argument("result", type=Path)
    page = sub.add_parser("page", help="write docs/BENCHMARKS.md from the results in docs/bench/")
    page.add_argument("--check", action="store_true", help="write nothing; exit 1 when the page is not current")
    return p


DESCRIBED = ("name", "title", "claim", "anchor", "measures")  # the fields ``list --json`` shows as they are


def described_case(c: Case) -> dict[str, object]:
    return {
        **{name: getattr(c, name) for name in DESCRIBED},
        "tags": sorted(c.tags),
        "arms": [str(a) for a in c.arms],
        "schedule": str(c.schedule),
        "tiny": dict(c.tiny),
    }


def list_cases(args: argparse.Namespace) -> int:
    if args.case:
        c = named(args.case)
        print(f"{c.name}: {c.title}\n\nclaim: {c.claim}\nbacks: {c.anchor}\nmeasures: {c.measures}")
        arms = ", ".join(map(str, c.arms)) or "–"
        print(f"tags: {', '.join(sorted(c.tags)) or '–'}; schedule: {c.schedule}; arms: {arms}")
        print("\nparameters (-p NAME=VALUE):")
        for name, default, help in described(c.params):
            print(f"  {name} (default {default}): {help}")
        if c.tiny:
            print("tiny: " + ", ".join(f"{k}={v}" for k, v in c.tiny.items()))
        return 0
    chosen = tagged(args.tag) if args.tag else list(cases().values())
    if args.json:
        print(json.dumps([described_case(c) for c in chosen], indent=1, ensure_ascii=False))
        return 0
    width = max((len(c.name) for c in chosen), default=0)
    for c in chosen:
        print(f"{c.name:<{width}}  [{','.join(sorted(c.tags)) or '-'}]  {c.title}")
    return 0


def run_cases(args: argparse.Namespace) -> int:
    from benchmarks.harness.render import markdown
    from benchmarks.harness.runner import keep, run_case

    chosen = [named(n) for n in args.cases] + (tagged(args.tag) if args.tag else [])
    if not chosen:
        raise BadParameter("name a case, or --tag")
    if (args.param or args.name) and len(chosen) != 1:
        raise BadParameter("-p and --name go with one case")
    given = parse_pairs(args.param)
    status = 0
    for c in chosen:
        try:
            result, passed = run_case(c, given, tiny=args.tiny or args.tag == "tiny", quiet=args.quiet)
        except Unavailable as why:
            print(f"{c.name}: cannot run here: {why}", file=sys.stderr)
            status = max(status, 2)
            continue
        if args.out is not None:
            print(f"kept {keep(result, args.out, args.name or c.name)}", file=sys.stderr)
        print(markdown(result), flush=True)
        if not passed:
            status = max(status, 1)
    return status


def compare_results(args: argparse.Namespace) -> int:
    from benchmarks.harness.compare import comparison
    from benchmarks.harness.result import load

    print(comparison(load(args.a), load(args.b)), end="")
    return 0


def show_result(args: argparse.Namespace) -> int:
    from benchmarks.harness.render import markdown
    from benchmarks.harness.result import load

    print(markdown(load(args.result)), end="")
    return 0


def write_page(args: argparse.Namespace) -> int:
    from benchmarks.page.build import PAGE, page

    text = page()
    if args.check:
        if PAGE.read_text(encoding="utf-8") != text:
            print(f"{PAGE} is not what the results in docs/bench/ make: python -m benchmarks page", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text, encoding="utf-8")
    print(PAGE)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    commands = {"list": list_cases, "run": run_cases, "compare": compare_results, "show": show_result}
    # a result file that is none or not a result is a usage error; a case's own error shows its traceback
    usage: tuple[type[Exception], ...] = (BadParameter,) if args.command == "run" else (ValueError, OSError)
    try:
        return {**commands, "page": write_page}[args.command](args)
    except usage as error:
        said = error.args[0] if isinstance(error, ValueError) and error.args else error
        print(f"python -m benchmarks {args.command}: {said}", file=sys.stderr)
        return 2
