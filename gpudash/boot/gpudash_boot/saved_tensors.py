"""The activations of one sampled step of the job, as gpudash's memory count takes them
(``memory_count.py``): the tensors autograd saves for backward, each storage once, the parameters
left out (not their gradients: ``zero_grad`` frees them, and their memory can hold an activation).
A ``saved_tensors_hooks`` pair from one step boundary to the next, whose pack hook notes the storage
and hands the tensor back detached; a saved tensor of ``LINE_MIN_BYTES`` or more is put to the job's
line that made it (as a sync's line is found: ``sync_sites.py``). A step of several
forward/backward passes (gradient accumulation) counts its largest pass.

Bounded: a count whose step runs past ``BUDGET`` times its untraced time (and ``FLOOR_S`` more)
gives up, and one that the job's own use of ``torch.func`` (which refuses saved-tensor hooks) meets
stops there, its hooks popped first. Not in a job that compiles (``torch.compile``: hooks there could
make it compile again), nor under the job's own saved-tensor hooks (``why_not``). Standard library
and the job's own torch only.
"""

from __future__ import annotations

import linecache
import sys
import time
from typing import Any

from .sync_sites import LiveSites, Site

LINE_MIN_BYTES = 64 << 10  # a saved tensor this large is put to the job's line that made it ...
TOP_LINES = 5  # ... and this many lines holding the most are sent
BUDGET = 2.0  # the sampled step may take this many times its untraced time; past it the count gives up ...
FLOOR_S = 0.5  # ... unless that is less than this much of the job's time more
COMPILING = "the job compiles its model (torch.compile): its saved tensors are not counted"


def why_not(torch: Any) -> str:
    """Why a step's saved tensors cannot be counted from now ("": they can): the job's own
    saved-tensor hooks are on, or this torch cannot tell."""
    try:
        if torch._C._autograd._top_saved_tensors_default_hooks(True) is not None:
            return "the job's own saved-tensor hooks are on at its step boundary: not counted"
    except Exception:  # noqa: BLE001 - an older torch: no way to tell, no sample
        return "this torch cannot tell whether the job's own saved-tensor hooks are on"
    return ""


class SavedTensors:
    """A ``saved_tensors_hooks`` pair, entered now and closed at the next step boundary: each
    storage saved once, the job's parameters left out; the largest forward/backward pass."""

    def __init__(self, torch: Any, params: set[int], untraced_s: float | None = None) -> None:
        self.params = params
        self.parameter = torch.nn.Parameter  # FSDP2's unsharded parameters too, gathered for the pass
        self.seen: set[int] = set()
        self.current = 0
        self.largest = 0
        self.half = 0  # of the bytes counted, those of 16-bit floats (a mixed-precision step's)
        self.counted = 0
        self.unpacked = False  # a backward ran since the last pack: the next pack begins a new pass
        self.passes = 1  # forward/backward passes in the step (gradient accumulation: several)
        self.stopped = ""  # why the count stopped early (the job turned saved-tensor hooks off: torch.func)
        self.deadline: float | None = None  # (monotonic) past it the count gives up: ``overran``
        if untraced_s:
            self.deadline = time.monotonic() + max(BUDGET * untraced_s, untraced_s + FLOOR_S)
        self.overran = False
        self.closed = False
        self.sites = LiveSites()  # the job's line of a stack, as sync sites are found
        self.pass_lines: dict[str, int] = {}  # this pass's bytes by the job's line
        self.largest_lines: dict[str, int] = {}  # ... and the largest pass's
        self.autograd = torch._C._autograd
        self.autograd._push_saved_tensors_default_hooks(self._pack, self._unpack)
        self.graph = torch.autograd.graph
        self.disable = self.graph.disable_saved_tensors_hooks
        self.graph.disable_saved_tensors_hooks = self._job_disables  # torch.func looks it up at each call

    def _pack(self, tensor: Any) -> Any:
        if self.overran or (self.deadline is not None and time.monotonic() > self.deadline):
            if not self.overran:
                self.overran, self.stopped = True, f"the count gave up: its step ran past {BUDGET:g}× its untraced time"
            return detached(tensor)
        if self.unpacked:
            self._pass_ended()
            self.seen, self.current, self.unpacked, self.pass_lines = set(), 0, False, {}
            self.passes += 1
        try:
            storage = tensor.untyped_storage()
            key = storage.data_ptr()
            if isinstance(tensor, self.parameter) or isinstance(getattr(tensor, "_base", None), self.parameter):
                key = 0  # a parameter (FSDP2's gathered weights are not the optimizer's): not an activation
            if key not in self.params and key not in self.seen and key:
                self.seen.add(key)
                self.current += (size := int(storage.nbytes()))
                self.counted += size
                self.half += size if tensor.element_size() == 2 and tensor.is_floating_point() else 0
                if size >= LINE_MIN_BYTES:
                    where = job_line_of(self.sites.site(sys._getframe(1)))
                    self.pass_lines[where] = self.pass_lines.get(where, 0) + size
        except Exception:  # noqa: BLE001 - a tensor without a plain storage (a subclass): not counted
            pass
        return detached(tensor)

    def _unpack(self, tensor: Any) -> Any:
        self.unpacked = True
        return tensor

    def _job_disables(self, *args: Any, **kwargs: Any) -> Any:
        """The job turns saved-tensor hooks off (``torch.func.grad``/``vjp``, which refuse them): the count
        stops there, ours popped first, so that the job's call goes as it would without gpudash."""
        self.stopped = "the job turned saved-tensor hooks off (torch.func): not counted"
        self.close()
        return self.disable(*args, **kwargs)

    def _pass_ended(self) -> None:
        if self.current >= self.largest:
            self.largest, self.largest_lines = self.current, self.pass_lines

    def top_lines(self) -> list[list[Any]]:
        """The job's lines that made the largest pass's saved tensors, the most bytes first."""
        self._pass_ended()
        ranked = sorted(self.largest_lines.items(), key=lambda kv: kv[1], reverse=True)
        return [[where, size] for where, size in ranked[:TOP_LINES]]

    def close(self) -> None:
        """Popped where still on top (a job's own hooks' exit may have popped it already)."""
        self.closed = True
        self._pass_ended()
        if getattr(self.graph, "disable_saved_tensors_hooks", None) == self._job_disables:
            self.graph.disable_saved_tensors_hooks = self.disable
        try:
            top = self.autograd._top_saved_tensors_default_hooks(True)
            if top is not None and top[0] == self._pack:
                self.autograd._pop_saved_tensors_default_hooks()
        except Exception:  # noqa: BLE001 - nothing to undo
            pass


def detached(tensor: Any) -> Any:
    """What a pack hook hands back: the tensor itself would close a loop through an op that saves
    its own output (relu, exp, softmax), and a graph never backpropagated would never be freed."""
    try:
        return tensor.detach()
    except Exception:  # noqa: BLE001 - as it came
        return tensor


def job_line_of(site: Site | None) -> str:
    """``train.py:88 attn = q @ k.transpose(-2, -1)``: the job's own line (a library's line: the job's
    that called it); "" where none is known."""
    if site is None:
        return ""
    own = site.called_from if site.package and site.called_from is not None else site
    text = own.text or linecache.getline(own.file, own.line).strip()
    return f"{own.where} {text[:120]}" if text else own.where


def compiling_job(torch: Any) -> bool:
    """The job has compiled something (dynamo has made a graph)."""
    if "torch._dynamo" not in sys.modules:
        return False
    try:
        counters = sys.modules["torch._dynamo"].utils.counters
        return bool(counters["stats"].get("unique_graphs", 0))
    except Exception:  # noqa: BLE001 - cannot tell: assume it does, count nothing
        return True
