"""The one place a diagnosis window's evidence becomes a verdict (``judge``), and what it makes.

A window (the workload process's, or a job's session) sends its ``Findings`` up as the diagnosis
event's ``data``; the live source (``EngineSession``, ``JobSession``) judges them once, with NVML's
figures from before the window (``judge``), and the event carries the ``Judgement`` from then on:
the dashboard, ``record``, ``report``, ``diagnose`` and its ``--json`` read it, and a recording keeps
it whole (one JSON column, ``as_dict``/``from_dict``). Nothing judges again. Torch-free.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from gpudash.core.events import DIAGNOSIS, Event, EventKind
from gpudash.core.gpu_messages import GpuInfo, GpuSample
from gpudash.core.textfmt import plain
from gpudash.diagnosis.advice import for_the_job
from gpudash.diagnosis.checks import Check
from gpudash.diagnosis.evidence import Evidence
from gpudash.diagnosis.remedies import Remedy, answer, remedies
from gpudash.diagnosis.rules import diagnose
from gpudash.diagnosis.verdict import Diagnosis


@dataclass(frozen=True)
class WorldView:
    """Whose evidence a verdict of several ranks is, and the rank the world waits for: the one whose
    own work (its step less its waits in the collectives, ``gpudash.ranks``) holds the others back."""

    ranks: int  # the job's ranks
    rank: int  # whose steps and profiler window the evidence is
    straggler: int | None = None  # the rank the others wait for (None: none named)
    straggler_own_ms: float | None = None  # its own work, ms a step ...
    others_own_ms: float | None = None  # ... and the others' (their mean)

    @property
    def waits_for_it(self) -> bool:
        """The evidence is the rank the world waits for, with both own works known."""
        return (
            self.straggler is not None
            and self.straggler == self.rank
            and self.straggler_own_ms is not None
            and bool(self.others_own_ms)
        )

    @property
    def pace_up_to(self) -> float | None:
        """How much faster the world runs at the others' pace (the straggler's extra work gone)."""
        if not self.waits_for_it or self.straggler_own_ms is None or not self.others_own_ms:
            return None
        return max(1.0, self.straggler_own_ms / self.others_own_ms)

    def head(self) -> str:
        """ "waiting for rank 0: its own work 57 ms a step against 36 ms for the others" ("" where not
        the evidence's rank)."""
        if not self.waits_for_it or self.straggler_own_ms is None or self.others_own_ms is None:
            return ""
        own, others = plain(self.straggler_own_ms, 3), plain(self.others_own_ms, 3)
        return f"waiting for rank {self.rank}: its own work {own} ms a step against {others} ms for the others"

    def whose(self) -> str:
        """Whose evidence the verdict is, where the head does not say it ("rank 0's steps, of 2 ranks")."""
        return "" if self.waits_for_it else f"rank {self.rank}'s steps, of {self.ranks} ranks"

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> WorldView:
        return cls(**{f.name: d[f.name] for f in dataclasses.fields(cls) if f.name in d})


@dataclass(frozen=True)
class Findings:
    """What a diagnosis window found, for the judge: its evidence and what is said beside the verdict."""

    KIND: ClassVar[str] = "findings"

    evidence: Evidence
    script: bool = False  # a user's job: advice in a script's words, without what it already does
    window_start_s: float | None = None  # when the window began (the run's seconds): NVML's tick is from before
    compile: Diagnosis | None = None  # compile-bound (``compile_bound``): said first, the window's verdict then
    compile_figures: dict[str, str] = field(default_factory=dict)  # what the compile rule weighed (``--json``)
    note: str = ""  # what the verdict rests on, where not on a whole diagnosis (``--json`` says it too)
    beside: tuple[str, ...] = ()  # said beside the verdict: the straggler, the recompile limit
    heavy: str = ""  # a phase of the job heavy enough to name after the verdict
    world: WorldView | None = None  # a job of several ranks: whose evidence, and the rank the world waits for
    over: str = ""  # a job's: over how many training steps it stands, and what of the job's was left out
    straggler: str = ""  # a job of several ranks: its ranks' straggler line ("no straggler …" too), ``--json``'s
    straggler_rank: int | None = None  # ... and the rank it names

    def as_dict(self) -> dict[str, Any]:
        return {
            "straggler": self.straggler,
            "straggler_rank": self.straggler_rank,
            "over": self.over,
            "world": self.world.as_dict() if self.world is not None else None,
            "evidence": self.evidence.as_dict(),
            "script": self.script,
            "window_start_s": self.window_start_s,
            "compile": self.compile.as_fields() if self.compile is not None else None,
            "compile_figures": dict(self.compile_figures),
            "note": self.note,
            "beside": list(self.beside),
            "heavy": self.heavy,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Findings:
        compile_ = d.get("compile")
        return cls(
            evidence=Evidence.from_dict(d["evidence"]),
            script=bool(d.get("script", False)),
            window_start_s=d.get("window_start_s"),
            compile=Diagnosis.from_fields(compile_) if compile_ is not None else None,
            compile_figures={str(k): str(v) for k, v in dict(d.get("compile_figures") or {}).items()},
            note=str(d.get("note", "")),
            beside=tuple(str(x) for x in d.get("beside", ())),
            heavy=str(d.get("heavy", "")),
            world=WorldView.from_dict(d["world"]) if d.get("world") else None,
            over=str(d.get("over", "")),
            straggler=str(d.get("straggler", "")),
            straggler_rank=_rank(d.get("straggler_rank")),
        )


def _rank(value: Any) -> int | None:
    """A rank read back (None: none named); TypeError where it is not a whole number (a hostile file)."""
    if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
        raise TypeError(f"a rank is a whole number: {value!r}")
    return value


@dataclass(frozen=True)
class Judgement:
    """A window's verdict (the rules', in a script's words for a job), its remedies, and its findings."""

    KIND: ClassVar[str] = "judgement"

    findings: Findings
    verdict: Diagnosis  # the window's steps' own verdict
    remedies: tuple[Remedy, ...] = ()  # each limit's fix worth naming, the most worth first

    @property
    def evidence(self) -> Evidence:
        return self.findings.evidence

    @property
    def head(self) -> Diagnosis:
        """The verdict said first: compile-bound where the job keeps recompiling, else the window's."""
        return self.findings.compile or self.verdict

    def line(self) -> str:
        """The verdict's one line: its head (the rank the world waits for first, where the evidence is
        that rank's), what it rests on and what is said beside it, a heavy phase."""
        f = self.findings
        whose = f.world.whose() if f.world is not None else ""
        note = "; ".join(filter(None, (f.note, *f.beside, whose, f.over)))
        head = self.head.line()
        if f.world is not None and f.compile is None and (waiting := f.world.head()):
            up_to = f.world.pace_up_to or 1.0
            head = f"{waiting}: up to {up_to:.2g}× at their pace; rank {f.world.rank}'s own step: {head}"
        message = head + (f" ({note})" if note else "")
        return f"{message}; {f.heavy}" if f.heavy else message

    def answer(self, checks: Sequence[Check] = ()) -> tuple[dict[str, object], list[str]]:
        """``diagnose``'s answer: the ``--json`` document (the verdict, its evidence, its remedies within
        the ``checks`` run, which it lists; a compile-bound head with the window's verdict as
        ``steady`` and what the compile rule weighed) and the lines printed under the verdict's line."""
        f = self.findings
        ceiling = f.world.pace_up_to if f.world is not None else None
        document, lines = answer(self.evidence, self.verdict, f.script, checks, ceiling)
        if f.compile is not None:
            document |= {"bound": str(f.compile.bound), "why": f.compile.why, "advice": f.compile.advice}
            document["steady"] = self.verdict.line()
        if f.compile_figures:
            document["compile"] = dict(f.compile_figures)
        if f.over:
            document["over"] = f.over
        if f.world is not None:  # whose evidence, and the rank the world waits for where it is that one
            document["ranks"], document["evidence_rank"] = f.world.ranks, f.world.rank
            if f.world.waits_for_it:
                document["waiting_for"] = {
                    "rank": f.world.rank,
                    "own_ms": f.world.straggler_own_ms,
                    "others_own_ms": f.world.others_own_ms,
                    "up_to": f.world.pace_up_to,
                }
        return document, lines

    def checked_line(self, document: dict[str, object]) -> str:
        """The verdict's line with its advice as the checks left it (``answer``'s document): an input
        verdict whose DataLoader settings were raced and all lost no longer advises them."""
        advice = document.get("advice")
        line = self.line()
        if self.findings.compile is not None or not isinstance(advice, str) or advice == self.verdict.advice:
            return line
        return line.replace(f" — {self.verdict.advice}", f" — {advice}", 1)

    def as_dict(self) -> dict[str, Any]:
        return {
            "findings": self.findings.as_dict(),
            "verdict": self.verdict.as_fields(),
            "remedies": [r.as_dict(exact=True) for r in self.remedies],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Judgement:
        return cls(
            findings=Findings.from_dict(d["findings"]),
            verdict=Diagnosis.from_fields(d["verdict"]),
            remedies=tuple(Remedy.from_dict(r) for r in d.get("remedies", ())),
        )


def judge(findings: Findings, gpu: GpuSample | None = None, link: GpuInfo | None = None) -> Judgement:
    """The verdict on ``findings``, with NVML's and GPM's figures of the GPU the window ran on (``gpu``:
    the tick from before it; ``link``: the machine's link between its GPUs, for the collectives'
    bandwidth), and its remedies. The one call of the rules (``gpudash.diagnosis.rules.diagnose``)."""
    evidence = with_gpu(findings.evidence, gpu, link)
    verdict = diagnose(evidence)
    if findings.script:
        verdict = for_the_job(verdict, evidence)
    # the rank the world waits for: a fix of its step runs the world no faster than the others' pace
    pace = findings.world.pace_up_to if findings.world is not None else None
    found = remedies(evidence, verdict.bound, script=findings.script, ceiling=pace)
    return Judgement(dataclasses.replace(findings, evidence=evidence), verdict, tuple(found))


def with_gpu(evidence: Evidence, gpu: GpuSample | None, link: GpuInfo | None = None) -> Evidence:
    """``evidence`` with what the parent's NVML read of the GPU (the workload process has no NVML):
    memory-bandwidth share, throttling, GPM's SM, tensor and DRAM activity, and the link between the
    GPUs where the window measured its collectives' bandwidth; as it came where ``gpu`` is None."""
    if gpu is None:
        return evidence
    linked = link is not None and link.link is not None and evidence.comm_busbw_gbps is not None
    return dataclasses.replace(
        evidence,
        mem_bw_pct=gpu.mem_bw_util_pct,
        throttled=gpu.throttle or None,
        sm_active_pct=gpu.sm_active_pct,
        tensor_active_pct=gpu.tensor_active_pct,
        dram_active_pct=gpu.dram_active_pct,
        comm_link=link.link if linked and link is not None else None,
        comm_link_gbps=link.link_gbps if linked and link is not None else None,
    )


def judgement_of(event: Event) -> Judgement | None:
    """A diagnosis event's judgement (None: not a judged diagnosis)."""
    data = event.data
    return data if event.what == DIAGNOSIS and isinstance(data, Judgement) else None


def findings_of(event: Event) -> Findings | None:
    """A diagnosis event's findings not yet judged (None: none, or judged already)."""
    ok = event.kind == EventKind.MEASURED and event.what == DIAGNOSIS
    return event.data if ok and isinstance(event.data, Findings) else None


def judged(event: Event, gpu: GpuSample | None, link: GpuInfo | None = None) -> Event:
    """A diagnosis event of findings judged (its line and its judgement); any other event as it came."""
    findings = findings_of(event)
    if findings is None:
        return event
    judgement = judge(findings, gpu, link)
    return dataclasses.replace(event, message=judgement.line(), data=judgement)
