"""A step's host-device syncs by line, as both sides read them: a ``Site`` (one line that makes the
host wait: its file, line and source, the library it is in and the user's line that called it, and
whether backward or a compiled region ran it), a ``SiteCount`` and a ``SyncTable`` (the top sites,
then "other"), each with its JSON. The job's hooks and gpudash's engine count them
(``sync_sites.py``); gpudash's records, reports, screens and diagnosis read them. Standard library
only."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Site:
    """One line that makes the host wait for the GPU."""

    file: str
    line: int
    function: str
    text: str | None = None  # the line's source as it ran; None: unreadable
    package: str | None = None  # the installed library the line is in (None: the user's own code)
    called_from: Site | None = None  # for a library's line: the user's line that called into it
    backward: bool = False  # raised while autograd ran backward()
    compiled: bool = False  # inside a torch.compile'd region

    @property
    def where(self) -> str:
        """``their_loss.py:24``: the file's name and the line."""
        return f"{os.path.basename(self.file)}:{self.line}"

    def notes(self, quote: str = "") -> list[str]:
        """What else is known of the site, as every table says it: ``in backward``, ``compiled
        region``, ``in transformers``, ``from train.py:80`` (the calling line, in ``quote`` marks)."""
        notes = [n for n, on in (("in backward", self.backward), ("compiled region", self.compiled)) if on]
        if self.package:
            notes.append(f"in {self.package}")
        if self.called_from is not None:
            notes.append(f"from {quote}{self.called_from.where}{quote}")
        return notes

    def label(self) -> str:
        """``their_loss.py:24 n = valid.nonzero().shape[0]``, with its notes in brackets."""
        text = f"{self.where} {self.text}" if self.text else self.where
        notes = self.notes()
        return f"{text} ({', '.join(notes)})" if notes else text

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"file": self.file, "line": self.line, "function": self.function, "text": self.text}
        if self.package:
            out["package"] = self.package
        if self.called_from is not None:
            out["called_from"] = self.called_from.as_dict()
        if self.backward:
            out["backward"] = True
        if self.compiled:
            out["compiled"] = True
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Site:
        caller = d.get("called_from")
        return cls(
            file=str(d["file"]),
            line=int(d["line"]),
            function=str(d.get("function", "")),
            text=d.get("text"),
            package=d.get("package"),
            called_from=cls.from_dict(caller) if isinstance(caller, dict) else None,
            backward=bool(d.get("backward", False)),
            compiled=bool(d.get("compiled", False)),
        )


@dataclass(frozen=True)
class SiteCount:
    """A site and how many syncs it made (``site`` None: the "other" row)."""

    site: Site | None
    count: int

    def per_step(self, steps: int) -> float:
        return self.count / steps if steps > 0 else 0.0


@dataclass(frozen=True)
class SyncTable:
    """The sites of one configuration's measured steps: the top ones, then "other"."""

    steps: int  # the steps the counts cover
    total: int  # syncs counted in them
    rows: tuple[SiteCount, ...] = ()  # the most frequent first; an "other" row last, if any

    def share(self, row: SiteCount) -> float:
        return row.count / self.total if self.total else 0.0

    @property
    def per_step(self) -> float:
        return self.total / self.steps if self.steps else 0.0

    def summary(self, top: int = 3) -> str:
        """``their_loss.py:24 n = … (1.0/step), train.py:88 loss.backward() (1.0/step, in backward)``."""
        parts = []
        for row in [r for r in self.rows if r.site is not None][:top]:
            site = row.site
            assert site is not None
            notes = [f"{row.per_step(self.steps):.2g}/step", *site.notes()]
            head = f"{site.where} {site.text}" if site.text else site.where
            parts.append(f"{head} ({', '.join(notes)})")
        return ", ".join(parts)

    def as_dict(self) -> dict[str, Any]:
        return {
            "steps": self.steps,
            "total": self.total,
            "sites": [
                {"count": r.count, "per_step": round(r.per_step(self.steps), 6), "share": round(self.share(r), 6)}
                | ({"site": r.site.as_dict()} if r.site is not None else {"other": True})
                for r in self.rows
            ],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SyncTable:
        rows = tuple(
            SiteCount(Site.from_dict(r["site"]) if "site" in r else None, int(r["count"])) for r in d.get("sites", ())
        )
        return cls(steps=int(d.get("steps", 0)), total=int(d.get("total", 0)), rows=rows)
