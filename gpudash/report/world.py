"""One world view from the recordings of a data-parallel run: every rank side by side.

A torchrun job that spans machines is recorded by one gpudash a node; each recording's "world"
event names the run's rendezvous id, its node and where its clock's zero is in Unix time
(``gpudash.ranks.world``). ``join`` groups the recordings of one run id (a recording of several
ranks without one, ``--nproc`` or a one-node torchrun job, is a world of its own), places each
node's ``rank`` rows on one clock (the earliest node's), and takes each rank's figures over the
span every node recorded: the world's samples/s (the ranks' sum), each rank's own work and its
collectives' time, and each rank's GPU (its NVML index, from the world event) with that GPU's
utilisation over the span. The straggler is named by the ranks' own work
(``gpudash.ranks.own_work``: its windows' own work against the other ranks'): their step times agree
(each rank waits for the others in the collectives), so the slowest by step time is chance, and a
recording without own work (an older gpudash's) says so rather than name one. Torch-free.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from gpudash.core.protocol import RankSample
from gpudash.core.textfmt import fmt_num, strip_controls
from gpudash.core.world_event import facts_of
from gpudash.ranks.own_work import RankWork, StragglerVerdict, judge, rank_work
from gpudash.report.load import Run


@dataclass(frozen=True)
class RankFigures:
    """One rank over the world's common span."""

    rank: int
    node: int | None
    host: str
    file: str
    windows: int
    steps_per_s: float
    samples_per_s: float | None
    step_ms_p50: float | None  # the median of its windows' medians
    input_wait_pct: float | None
    allreduce_exposed_ms: float | None  # its latest profiler window's
    gpu: int | None = None  # the NVML index of its GPU on its node (the world event's), where known
    gpu_util_pct: float | None = None  # that GPU's kernel-active % over the span, from its node's per-GPU columns
    own_ms: float | None = None  # its own work, ms a step: the mean of its windows' (their median where too few)
    comm_ms: float | None = None  # the time a collective of its was outstanding, ms a step (the same way)
    work: RankWork | None = None  # its windows' own work for the verdict (None: too few windows have it)

    def place(self) -> str:
        """ "node 1, host b" ("" where neither is known)."""
        return ", ".join(p for p in (_node(self.node), f"host {self.host}" if self.host else "") if p)

    def where(self) -> str:
        """ "rank 3 (node 1, host b)"."""
        place = self.place()
        return f"rank {self.rank}" + (f" ({place})" if place else "")


@dataclass(frozen=True)
class NodeFile:
    """One node's recording in a world, and where its clock's zero falls on the world's."""

    node: int | None
    host: str
    file: str
    offset_s: float
    gpus: tuple[tuple[int, int], ...] = ()  # (rank, NVML index) of its ranks, where its world event names them


@dataclass(frozen=True)
class World:
    """A data-parallel run's ranks, joined from one recording or several (one a node)."""

    run_id: str
    nodes: tuple[NodeFile, ...]
    ranks: tuple[RankFigures, ...]
    span_s: tuple[float, float]  # the common span, on the world's clock
    verdict: StragglerVerdict | None = None  # the straggler by own work (None: too few ranks have it)

    @property
    def samples_per_s(self) -> float | None:
        """The world's samples a second: the sum of its ranks' (None where a rank's is unknown)."""
        each = [r.samples_per_s for r in self.ranks]
        return sum(v for v in each if v is not None) if each and None not in each else None

    @property
    def slowest(self) -> RankFigures | None:
        """The rank with the longest median step: not a straggler (the ranks wait for each other, so
        their step times agree); ``verdict`` names that."""
        timed = [r for r in self.ranks if r.step_ms_p50 is not None]
        return max(timed, key=lambda r: r.step_ms_p50 or 0.0) if timed else None

    @property
    def fastest(self) -> RankFigures | None:
        timed = [r for r in self.ranks if r.step_ms_p50 is not None]
        return min(timed, key=lambda r: r.step_ms_p50 or 0.0) if timed else None

    @property
    def straggler(self) -> RankFigures | None:
        """The rank the others wait for, by its own work (None: none, or not known)."""
        rank = self.verdict.rank if self.verdict is not None else None
        return next((r for r in self.ranks if r.rank == rank), None) if rank is not None else None

    def sentence(self) -> str:
        """ "world of run R: 2 node(s), 4 ranks, 2,345 samples/s; straggler: rank 3 — its own work …; rank 3
        runs on node 1, host b"; without own work, the slowest by step time, said not to be a straggler."""
        name = f"run {self.run_id}" if self.run_id else self.nodes[0].file
        rate = f", {fmt_num(self.samples_per_s)} samples/s" if self.samples_per_s is not None else ""
        text = f"world of {name}: {len(self.nodes)} node(s), {len(self.ranks)} ranks{rate}"
        if self.verdict is not None:
            text += f"; {self.verdict.words}"
            late = self.straggler
            if late is not None and late.place():
                text += f"; rank {late.rank} runs on {late.place()}"
            return text
        slow, fast = self.slowest, self.fastest
        if slow is not None and fast is not None and slow.step_ms_p50 and fast.step_ms_p50:
            ratio = slow.step_ms_p50 / fast.step_ms_p50
            text += (
                f"; slowest by step time {slow.where()}: {slow.step_ms_p50:.3g} ms a step, {ratio:.2f}× "
                f"rank {fast.rank}'s (ranks wait for each other: this does not name a straggler)"
            )
        return text


def _node(node: int | None) -> str:
    return f"node {node}" if node is not None else ""


def _run_id(run: Run) -> str:
    return run.world.after if run.world is not None else ""


def join(runs: Sequence[Run]) -> list[World]:
    """The worlds among ``runs``: recordings of one torchrun run id joined, each other recording
    of several ranks on its own; recordings of one process are in none."""
    groups: dict[str, list[Run]] = {}
    for run in runs:
        if len({r.rank for r in run.ranks}) > 1 or (run.ranks and _run_id(run)):
            groups.setdefault(_run_id(run) or f"file:{run.path}", []).append(run)
    return [_world(key, members) for key, members in groups.items()]


def _world(key: str, runs: list[Run]) -> World:
    facts = [facts_of(r.world) if r.world is not None else None for r in runs]
    zeros = [f.clock_unix if f is not None else None for f in facts]
    known = [z for z in zeros if z is not None]
    first = min(known, default=0.0)
    nodes = tuple(
        NodeFile(
            _node_of(r),
            f.host if f is not None else "",
            r.name,
            (z - first) if z is not None else 0.0,
            f.rank_gpus if f is not None else (),
        )
        for r, f, z in zip(runs, facts, zeros, strict=True)
    )
    placed: dict[int, tuple[NodeFile, list[RankSample]]] = {}
    util: dict[int, list[tuple[float, float]]] = {}  # each rank's GPU's readings, on the world's clock
    for run, node in zip(runs, nodes, strict=True):
        for sample in run.ranks:
            placed.setdefault(sample.rank, (node, []))[1].append(sample)
        series = run.timeline.per_gpu_util if run.timeline is not None else {}
        for rank, index in node.gpus:
            util[rank] = [(node.offset_s + t, v) for t, v in series.get(index, [])]
    starts = [node.offset_s + min(s.time_s for s in rows) for node, rows in placed.values()]
    ends = [node.offset_s + max(s.time_s for s in rows) for node, rows in placed.values()]
    span = (max(starts), min(ends)) if max(starts) < min(ends) else (min(starts), max(ends))
    ranks = tuple(_rank(rank, node, rows, span, util.get(rank, [])) for rank, (node, rows) in sorted(placed.items()))
    return World("" if key.startswith("file:") else key, nodes, ranks, span, _verdict(ranks))


def _verdict(ranks: Sequence[RankFigures]) -> StragglerVerdict | None:
    """The straggler by the ranks' own work, each over its windows in the span (``judge``; its input
    wait: the mean of its windows')."""
    works = [r.work for r in ranks if r.work is not None]
    return judge(works, {r.rank: r.input_wait_pct for r in ranks if r.input_wait_pct is not None})


def _rank(
    rank: int, node: NodeFile, rows: list[RankSample], span: tuple[float, float], util: list[tuple[float, float]]
) -> RankFigures:
    inside = [s for s in rows if span[0] <= node.offset_s + s.time_s <= span[1]] or rows
    busy = [v for t, v in util if span[0] <= t <= span[1]] or [v for _, v in util]
    where = next((s.node for s in reversed(rows) if s.node is not None), node.node)
    exposed = next((s.allreduce_exposed_ms for s in reversed(rows) if s.allreduce_exposed_ms is not None), None)
    own = [s.own_ms for s in inside if s.own_ms is not None]
    comm = [s.comm_ms for s in inside if s.comm_ms is not None]
    work = rank_work(rank, own, comm)
    return RankFigures(
        rank,
        where,
        node.host,
        node.file,
        len(inside),
        *stepping_rates(inside),
        _median([s.step_ms_p50 for s in inside]),
        _mean([s.input_wait_pct for s in inside]),
        exposed,
        dict(node.gpus).get(rank),
        statistics.fmean(busy) if busy else None,
        work.own_ms if work is not None else _median(own),
        work.comm_ms if work is not None else _median(comm),
        work,
    )


def stepping_rates(rows: Sequence[RankSample]) -> tuple[float, float | None]:
    """A rank's steps/s and samples/s while it stepped: its windows with steps, each weighted by its
    length (its new steps over its rate) — not a mean of windows, which counts the empty ones of its
    start-up and teardown, and a burst of short ones closed together as the run began, alike."""
    lengths, samples, before = [], [], None
    for row in rows:
        new = row.steps - before if before is not None and row.steps >= before else row.steps
        before = row.steps
        if new > 0 and row.steps_per_s > 0:
            lengths.append((new, new / row.steps_per_s))
            samples.append(row.samples_per_s)
    if not lengths:
        return statistics.fmean(r.steps_per_s for r in rows), _mean([r.samples_per_s for r in rows])
    seconds = sum(t for _, t in lengths)
    known = [(n, t) for (n, t), per in zip(lengths, samples, strict=True) if per is not None]
    rate = sum(per * t for (_, t), per in zip(lengths, samples, strict=True) if per is not None)
    return sum(n for n, _ in lengths) / seconds, rate / sum(t for _, t in known) if known else None


def _mean(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.fmean(known) if known else None


def _median(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def _node_of(run: Run) -> int | None:
    try:
        return int(run.world.before) if run.world is not None else None
    except ValueError:
        return None


def _cell(value: float | None, digits: str = ".3g") -> str:
    return "–" if value is None else format(value, digits)


def markdown(world: World) -> list[str]:
    """The world's section of report.md: its nodes, every rank, the world's rate and its straggler."""
    title = f"torchrun run {world.run_id}" if world.run_id else world.nodes[0].file
    lines = [f"## World: {strip_controls(title)} ({len(world.nodes)} node(s), {len(world.ranks)} ranks)", ""]
    if len(world.nodes) > 1:
        placed = "; ".join(f"{n.file}: {_node(n.node) or 'node ?'} at +{n.offset_s:.2f} s" for n in world.nodes)
        lines += [f"Joined by the run's rendezvous id, on one clock (each node's time 0 placed: {placed}).", ""]
    lines += [
        f"Each rank over the {world.span_s[1] - world.span_s[0]:.1f} s every node recorded "
        "(steps/s and samples/s: over its windows with steps, each by its length; step time: their median; "
        "own work: its step less the time a collective of its was outstanding, and that time (collectives), "
        "means of its windows, ms a step; exposed all-reduce: its latest profiler window's; GPU: its NVML "
        "index on its node, and that GPU's kernel-active % from the node's per-GPU columns).",
        "",
        "| rank | node | host | steps/s | samples/s | step ms p50 | own work ms | collectives ms | input wait % "
        "| exposed all-reduce ms | GPU | GPU util % | file |",
        "|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|",
    ]
    for r in world.ranks:
        cells = [str(r.rank), "–" if r.node is None else str(r.node), strip_controls(r.host) or "–"]
        cells += [_cell(r.steps_per_s), fmt_num(r.samples_per_s) if r.samples_per_s is not None else "–"]
        cells += [_cell(r.step_ms_p50), _cell(r.own_ms), _cell(r.comm_ms)]
        cells += [_cell(r.input_wait_pct, ".0f"), _cell(r.allreduce_exposed_ms)]
        cells += ["–" if r.gpu is None else str(r.gpu), _cell(r.gpu_util_pct, ".0f"), r.file]
        lines.append("| " + " | ".join(cells) + " |")
    return [*lines, "", strip_controls(world.sentence()) + ".", ""]


def as_dict(world: World) -> dict[str, object]:
    """``--json``'s ``worlds`` entry: ``straggler_rank`` (null: none, or no own work recorded) and
    ``straggler`` (the verdict's words; null without own work); ``slowest_rank``/``slowest_node`` (by
    step time, not a straggler) are kept for the readers of earlier versions."""
    slow = world.slowest
    return {
        "run_id": world.run_id,
        "nodes": [vars(n) for n in world.nodes],
        "ranks": [{k: v for k, v in vars(r).items() if k != "work"} for r in world.ranks],
        "samples_per_s": world.samples_per_s,
        "straggler_rank": world.verdict.rank if world.verdict is not None else None,
        "straggler": world.verdict.words if world.verdict is not None else None,
        "slowest_rank": slow.rank if slow else None,
        "slowest_node": slow.node if slow else None,
        "span_s": list(world.span_s),
    }
