"""Where the host waits: each host-device sync of a step attributed to the line that made it.

A sync's *site* is the first frame of its Python stack, innermost first, outside torch, gpudash
and the standard library. Where that frame lies in another installed library (a sync inside
``transformers``' model code), the site is the library's line, named with its package, and the
user's own line that called into it comes beside it (``called_from``). A sync raised while
autograd runs ``backward()`` is marked ``backward``; one under a ``torch.compile``d region (its
stack passes through torch._dynamo, torch._inductor or their generated code) is marked
``compiled``.

Torch-free and standard library only: the job's hooks count a job's syncs with it (``syncs.py``),
and gpudash's engine, its records and its screens read its tables. Frames come in as ``(filename,
line, function)``, from a live stack (``live_stack``) or recorded ones (the tests). Each distinct
site reads its source line once, when first seen (``linecache``): a file changed or deleted
afterwards does not change what the table says, and a file that cannot be read (a notebook cell, a
frozen module, ``<string>``) shows its file and line without the text. The calling line is searched
for within ``MAX_CALLER_HOPS`` frames and not past gpudash's own. A live stack's site is remembered
by the frames that decided it (``LiveSites``): a sync on a line seen before costs a walk over a few
frames' code and line, about 2 µs, not a classification of each file.
"""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from .sync_table import Site, SiteCount, SyncTable

if TYPE_CHECKING:  # pragma: no cover
    from types import FrameType

Frame = tuple[str, int, str]  # (filename, line, function), innermost first
TOP_SITES = 8  # the table's rows; the rest add up in an "other" row
MAX_TRACKED = 256  # distinct sites counted one by one; beyond, they count as "other" at once

MAX_CALLER_HOPS = 16  # frames beyond a site searched for the user's line that called it

_USER, _SKIP, _LIBRARY, _COMPILED, _GPUDASH = "user", "skip", "library", "compiled", "gpudash"
_BACKWARD_FILES = ("torch/autograd/graph.py", "torch/autograd/__init__.py", "torch/_tensor.py")
_BACKWARD_FUNCTIONS = frozenset({"_engine_run_backward", "backward"})


class _Classifier:
    """Which kind of code a file holds (cached per filename): the user's, skipped (torch,
    gpudash, the standard library), a library's, or torch.compile's machinery."""

    def __init__(self) -> None:
        self._cache: dict[str, tuple[str, str | None]] = {}
        package = os.path.dirname(os.path.abspath(__file__))  # gpudash/boot/gpudash_boot
        here = os.path.dirname(os.path.dirname(package))  # the gpudash package
        self._skipped = [here + os.sep]
        # the reference families ship beside gpudash (in site-packages too): their lines are the
        # workload's own, as a user's file is
        self._own = [os.path.join(os.path.dirname(here), "workloads") + os.sep]
        import sysconfig  # here: a few ms that gpudash --help need not pay

        for key in ("stdlib", "platstdlib"):
            path = sysconfig.get_paths().get(key)
            if path:
                self._skipped.append(os.path.abspath(path) + os.sep)
        self._torch: list[str] = []

    def _torch_dirs(self) -> list[str]:
        if not self._torch:
            where = getattr(sys.modules.get("torch"), "__file__", None)
            if isinstance(where, str):
                self._torch = [os.path.dirname(os.path.abspath(where)) + os.sep]
        return self._torch

    def may_call(self, filename: str) -> bool:
        """Whether a line of ``filename`` names the caller of a site: not the reference families'
        machinery (``workloads``, shipped with gpudash), nor a process's ``python -c`` code."""
        return filename != "<string>" and not any(filename.startswith(d) for d in self._own)

    def kind(self, filename: str) -> tuple[str, str | None]:
        """(kind, package): the package names a library's top-level module."""
        known = self._cache.get(filename)
        if known is None:
            known = self._classify(filename)
            self._cache[filename] = known
        return known

    def _classify(self, filename: str) -> tuple[str, str | None]:
        if filename.startswith("<frozen"):
            return _SKIP, None
        if filename.startswith("<eval_with_key") or "torchinductor" in filename:
            return _COMPILED, None  # FX graph modules and Inductor's generated code
        path = os.path.abspath(filename) if not filename.startswith("<") else filename
        for torch_dir in self._torch_dirs():
            if path.startswith(torch_dir):
                rest = path[len(torch_dir) :]
                compiled = rest.startswith(("_dynamo" + os.sep, "_inductor" + os.sep))
                return (_COMPILED if compiled else _SKIP), None
        if path.startswith(self._skipped[0]):  # gpudash itself
            return _GPUDASH, None
        if any(path.startswith(d) for d in self._own):
            return _USER, None
        for marker in (f"{os.sep}site-packages{os.sep}", f"{os.sep}dist-packages{os.sep}"):
            i = path.find(marker)
            if i >= 0:
                top, _, rest = path[i + len(marker) :].partition(os.sep)
                if top == "torch":  # another process's torch (a job's, seen from gpudash's process)
                    return (_COMPILED if rest.startswith(("_dynamo" + os.sep, "_inductor" + os.sep)) else _SKIP), None
                return _LIBRARY, top.removesuffix(".py")
        if any(path.startswith(d) for d in self._skipped[1:]):  # the standard library (a venv's lib too)
            return _SKIP, None
        return _USER, None


_CLASSIFIER: list[_Classifier] = []  # made at the first sync (its paths cost a few ms)


def shared_classifier() -> _Classifier:
    """The one classifier of files (the job's own, a library's, the standard library's), made at first use."""
    if not _CLASSIFIER:
        _CLASSIFIER.append(_Classifier())
    return _CLASSIFIER[0]


def live_stack(frame: FrameType | None) -> Iterator[Frame]:
    """The frames from ``frame`` outwards, as ``(filename, line, function)``."""
    while frame is not None:
        code = frame.f_code
        yield code.co_filename, frame.f_lineno, code.co_name
        frame = frame.f_back


_NOT_SEEN = object()
_INDEX_FRAMES = 3  # the innermost frames whose (code, line) index the memo's depths


def _frames_key(frame: FrameType | None, depth: int) -> tuple[int, ...]:
    """The (code, line) pairs of ``frame`` and the ``depth - 1`` frames outwards, flattened."""
    key: list[int] = []
    while frame is not None and depth:
        key += (id(frame.f_code), frame.f_lineno)
        frame = frame.f_back
        depth -= 1
    return tuple(key)


class _Walked:
    """A live stack's frames, counting how many were taken."""

    def __init__(self, frame: FrameType | None) -> None:
        self.frames = live_stack(frame)
        self.taken = 0

    def __iter__(self) -> Iterator[Frame]:
        for frame in self.frames:
            self.taken += 1
            yield frame


class LiveSites:
    """The site of a live stack, remembered by the frames that decided it (their code and line):
    a stack seen before costs a walk over those frames, not a classification of each one."""

    def __init__(self, max_keys: int = 4096) -> None:
        self.max_keys = max_keys
        self._depths: dict[tuple[int, ...], list[int]] = {}  # index -> the depths that decided its sites
        self._sites: dict[tuple[int, ...], Site | None] = {}
        self._codes: list[Any] = []  # the code objects whose ids are in keys, kept alive so no id is reused

    def site(self, frame: FrameType | None) -> Site | None:
        """The site of the stack from ``frame`` outwards (None: no frame to name)."""
        index = _frames_key(frame, _INDEX_FRAMES)
        depths = self._depths.get(index)
        for depth in depths or ():
            known = self._sites.get(index if depth == _INDEX_FRAMES else _frames_key(frame, depth), _NOT_SEEN)
            if known is not _NOT_SEEN:
                return known  # type: ignore[return-value]
        walked = _Walked(frame)
        site = site_of(walked)
        if len(self._sites) < self.max_keys:
            depth = max(walked.taken, _INDEX_FRAMES)
            self._sites[_frames_key(frame, depth)] = site
            self._depths.setdefault(index, []).append(depth)
            f = frame
            for _ in range(depth):
                if f is None:
                    break
                self._codes.append(f.f_code)
                f = f.f_back
        return site


def _is_backward(filename: str, function: str) -> bool:
    return function in _BACKWARD_FUNCTIONS and filename.replace(os.sep, "/").endswith(_BACKWARD_FILES)


def site_of(stack: Iterable[Frame], classifier: _Classifier | None = None) -> Site | None:
    """The site of a sync whose stack is ``stack`` (innermost first); None: no frame to name.

    A line of the user's is told apart by where it was called from (the next line of the user's
    outward, the reference families' own machinery and ``python -c`` code skipped): a helper
    called from two places is two sites."""
    classifier = classifier or shared_classifier()
    backward = compiled = False
    library: tuple[Frame, str | None] | None = None
    fallback: Frame | None = None
    found: Frame | None = None
    frames = iter(stack)
    for frame in frames:
        filename, _, function = frame
        kind, package = classifier.kind(filename)
        if kind == _USER:
            found = frame
            break
        if kind == _LIBRARY and library is None:
            library = (frame, package)
        elif kind == _COMPILED:
            compiled = True
        elif kind in (_SKIP, _GPUDASH) and not backward:
            backward = _is_backward(filename, function)
        if fallback is None and not filename.startswith("<frozen"):
            fallback = frame
    if found is None:
        if library is not None:
            return _site(library[0], backward, compiled, library[1])
        return _site(fallback, backward, compiled) if fallback is not None else None
    if library is not None:  # a library's line, called from the user's
        return _site(library[0], backward, compiled, library[1], _site(found, False, False))
    caller = _caller(frames, classifier)
    return _site(found, backward, compiled, called_from=_site(caller, False, False) if caller else None)


def _caller(frames: Iterator[Frame], classifier: _Classifier) -> Frame | None:
    """The user's line that called a site, within ``MAX_CALLER_HOPS`` frames; None past gpudash's
    own frames (a ``-w`` file's step is called by gpudash's loop, not by a line of the user's)."""
    for frame in itertools.islice(frames, MAX_CALLER_HOPS):
        kind = classifier.kind(frame[0])[0]
        if kind == _GPUDASH:
            return None
        if kind == _USER and classifier.may_call(frame[0]):
            return frame
    return None


def _site(
    frame: Frame, backward: bool, compiled: bool, package: str | None = None, called_from: Site | None = None
) -> Site:
    filename, line, function = frame
    return Site(filename, line, function, None, package, called_from, backward, compiled)


def source_line(filename: str, line: int) -> str | None:
    """The stripped source of ``filename:line`` now; None when it cannot be read."""
    import linecache

    if not filename or filename.startswith("<frozen"):
        return None
    linecache.checkcache(filename)
    text = linecache.getline(filename, line).strip()
    return text or None


def with_text(site: Site) -> Site:
    """``site`` with its source line (and its caller's) read now."""
    caller = with_text(site.called_from) if site.called_from is not None else None
    return Site(
        site.file,
        site.line,
        site.function,
        source_line(site.file, site.line),
        site.package,
        caller,
        site.backward,
        site.compiled,
    )


class SiteCounter:
    """Syncs counted by site over one configuration's steps (``reset`` when it changes)."""

    def __init__(self, max_tracked: int = MAX_TRACKED) -> None:
        self.max_tracked = max_tracked
        self._counts: dict[Site, int] = {}
        self._texts: dict[Site, Site] = {}  # each site as first seen, with its source read then
        self.untracked = 0  # syncs of sites beyond max_tracked
        self.unnamed = 0  # syncs whose stack had no frame to name

    def reset(self) -> None:
        self._counts.clear()
        self.untracked = self.unnamed = 0

    def add(self, stack: Iterable[Frame]) -> None:
        """Count one sync whose stack is ``stack``."""
        self.add_site(site_of(stack))

    def add_site(self, site: Site | None) -> None:
        """Count one sync at ``site`` (None: its stack had no frame to name)."""
        if site is None:
            self.unnamed += 1
            return
        counts = self._counts
        if site in counts:
            counts[site] += 1
        elif len(counts) < self.max_tracked:
            counts[site] = 1
            if site not in self._texts:
                self._texts[site] = with_text(site)
        else:
            self.untracked += 1

    def add_all(self, other: SiteCounter) -> None:
        """``other``'s counts added to these (its sites past ``max_tracked`` here: untracked)."""
        counts = self._counts
        for site, n in other._counts.items():
            if site in counts:
                counts[site] += n
            elif len(counts) < self.max_tracked:
                counts[site] = n
                self._texts.setdefault(site, other._texts.get(site, site))
            else:
                self.untracked += n
        self.untracked += other.untracked
        self.unnamed += other.unnamed

    @property
    def total(self) -> int:
        return sum(self._counts.values()) + self.untracked + self.unnamed

    def table(self, steps: int, top: int = TOP_SITES) -> SyncTable:
        """The top ``top`` sites, most frequent first (ties: by file and line), then "other"."""
        ranked = sorted(self._counts.items(), key=lambda kv: (-kv[1], kv[0].file, kv[0].line))
        rows = [SiteCount(self._texts.get(site, site), n) for site, n in ranked[:top]]
        other = sum(n for _, n in ranked[top:]) + self.untracked + self.unnamed
        if other:
            rows.append(SiteCount(None, other))
        return SyncTable(steps=steps, total=self.total, rows=tuple(rows))


class StepSites:
    """Syncs by line over a job's training steps alone: a step's go in at its end where nothing of
    the job's came before it (``step_ended(own=True)``); an evaluation's, a checkpoint's, a
    compile's or a pause's before the step, and the first step's start-up, are left out."""

    def __init__(self) -> None:
        self.own = SiteCounter()  # the training steps'
        self.pending = SiteCounter()  # the current step's, until its end says whose they are
        self.steps = 0  # the steps ``own`` counts

    def add_site(self, site: Site | None) -> None:
        self.pending.add_site(site)

    def step_ended(self, own: bool) -> None:
        if own:
            self.own.add_all(self.pending)
            self.steps += 1
        self.pending.reset()

    @property
    def total(self) -> int:
        return self.own.total

    def table(self, top: int = TOP_SITES) -> SyncTable:
        return self.own.table(self.steps, top)
