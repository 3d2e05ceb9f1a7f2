"""A job that trains without ``torch.optim`` — its parameters updated by hand after each backward
pass (``p.data.add_(p.grad, alpha=-lr)``, or ``p.sub_(lr * p.grad)`` under ``torch.no_grad()``) —
has its steps seen through its backward passes, for gpudash's hooks (``hooks.py``, which
tell this part where each pass of the job's starts and ends, outside an optimizer's ``step``).
Standard library and the job's own torch only.

A backward pass that fills the gradients of leaves (the job's parameters) followed by those leaves
changing in place is a training iteration. The change is seen at the next pass's start, and that
start ends the step. So a job of N iterations has N - 1 steps counted (the last has no pass after
it), each from the start of one iteration's backward pass to the next's, which is one iteration's
work.

Until the job is known to update by hand (its *probation*), each pass is looked at: the leaves it
fills (the autograd graph walked from its outputs to the ``AccumulateGrad`` nodes) and, at its end,
a *probe* of a few of them: each one's version counter (an in-place write under ``no_grad`` counts
in it; one through ``.data`` does not), its gradient (the tensor and its version) and its first
values. At the next pass's start a leaf changed — its version or its values — says the parameters
were updated: the job trains by hand, and that start ends its first step. Values are compared only
in probation on a GPU (the comparison waits for the device; before the first step nothing is
counted), and for at most ``PROBATION_PASSES`` passes.

From then on a pass's start ends a step where, since the last pass ended, the probe's leaves were
written in place or their gradients reset (set to None, replaced, zeroed): not where the
gradients were only accumulated into (gradient accumulation: several passes a step). A job whose
update showed neither (``.data`` writes and ``.grad.data.zero_()``) has the probe's values compared
at each pass on the CPU; on a GPU, where that would wait for the device, each pass is a step.

One private name of torch: a tensor's ``_version`` (the count of its in-place writes): no public
API tells that a tensor was written in place (``tests/test_private_apis.py``).
"""

from __future__ import annotations

import collections
import weakref
from collections.abc import Callable
from typing import Any

PROBE = 4  # leaves watched for the update (the smallest of those a pass fills: their gradients are kept)
PROBE_VALUES = 8  # values of each compared
PROBATION_PASSES = 64  # passes looked at, at most, before the job is taken not to update by hand
GRAPH_NODES = 100_000  # nodes of a pass's autograd graph walked, at most


class Leaves:
    """The leaves a job's backward passes fill, where an optimizer's would be (its parameter groups,
    an empty state): what the hooks read of "the optimizer" for the device and the memory by kind."""

    by_hand = True  # (no optimizer: the gradients are reset before each step ends)

    def __init__(self, tensors: list[Any], device: str = "cpu") -> None:
        self._refs = [weakref.ref(t) for t in tensors]
        self.device = device  # where there are no leaves (gpudash.track() before any backward pass)
        self.state: dict[Any, Any] = {}

    @property
    def param_groups(self) -> list[dict[str, list[Any]]]:
        return [{"params": [t for t in (ref() for ref in self._refs) if t is not None]}]


class _Probe:
    """One leaf at a pass's end: its version, its gradient, its first values (None: not kept)."""

    def __init__(self, leaf: Any, values: bool) -> None:
        self.leaf = weakref.ref(leaf)
        self.version = leaf._version
        self.grad = leaf.grad  # kept: the same tensor, unless the job replaced or dropped it
        self.grad_version = self.grad._version if self.grad is not None else -1
        self.values = _first_values(leaf) if values else None

    def written(self) -> bool:
        leaf = self.leaf()
        return leaf is not None and leaf._version != self.version

    def reset(self) -> bool:
        leaf = self.leaf()
        if leaf is None:
            return False
        grad = leaf.grad
        return grad is None or grad is not self.grad or grad._version != self.grad_version

    def changed(self) -> bool:
        leaf = self.leaf()
        if leaf is None or self.values is None:
            return False
        now = _first_values(leaf)
        return now is not None and not bool(now.equal(self.values))


class HandUpdates:
    """Backward passes, and the parameters they fill changing after them: ``stepped(leaves)`` at
    each pass start that ends a step. ``on``: still watching (off once an optimizer steps)."""

    def __init__(self, torch: Any, stepped: Callable[[Leaves], None]) -> None:
        self.torch = torch
        self.stepped = stepped
        self.on = True
        self.confirmed = False  # the job updates its parameters by hand
        self.by_values = False  # ... in a way only their values show (``.data`` writes, ``.grad.data.zero_()``)
        self.passes = 0  # passes looked at in probation
        self.leaves: Leaves | None = None  # the latest pass's leaves
        self._probe_of: list[Any] = []  # the leaves to probe at this pass's end
        self._after: list[_Probe] | None = None  # the probe at the last pass's end
        self._cuda = False

    def backward_starts(self, tensors: Any) -> None:
        """A pass starts (``tensors``: ``torch.autograd.backward``'s first argument): the step that
        ends here, if the parameters changed since the last pass."""
        before, self._after = self._after, None
        if not self.confirmed:
            self._probation(tensors, before)
        elif before is not None and self._ends_step(before):
            self.stepped(self.leaves or Leaves([]))

    def backward_ends(self) -> None:
        """The pass has filled the gradients: the probe now."""
        values = not self.confirmed or (self.by_values and not self._cuda)
        try:
            self._after = [_Probe(leaf, values) for leaf in self._probe_of]
        except Exception:  # noqa: BLE001 - a leaf that cannot be probed (a subclass): none this pass
            self._after = None

    def off(self) -> None:
        self.on, self._after, self._probe_of = False, None, []

    def _probation(self, tensors: Any, before: list[_Probe] | None) -> None:
        if before is not None:
            written = any(p.written() for p in before)
            if written or any(p.changed() for p in before):
                self.confirmed = True
                self.by_values = not written and not any(p.reset() for p in before)
                self.stepped(self.leaves or Leaves([]))
                return
        self.passes += 1
        if self.passes > PROBATION_PASSES:
            self.off()  # backward passes that update nothing: not a training loop's
            return
        found = leaves_of(tensors)
        if found:
            self._cuda = any(t.is_cuda for t in found)
            self.leaves = Leaves(found, str(found[0].device))
            self._probe_of = sorted(found, key=lambda t: t.numel())[:PROBE]

    def _ends_step(self, before: list[_Probe]) -> bool:
        if any(p.written() or p.reset() for p in before):
            return True
        if not self.by_values:
            return False  # the gradients accumulated: the same step
        return self._cuda or any(p.changed() for p in before)


def leaves_of(tensors: Any) -> list[Any]:
    """The leaves whose gradients a backward pass from ``tensors`` fills: the autograd graph walked
    from their ``grad_fn`` to its ``AccumulateGrad`` nodes, nearest the outputs first."""
    roots = [tensors] if hasattr(tensors, "grad_fn") else list(tensors or ())
    queue = collections.deque(node for t in roots if (node := getattr(t, "grad_fn", None)) is not None)
    seen: dict[int, Any] = {}  # the nodes themselves kept: their ids stay theirs while walked
    found: dict[int, Any] = {}
    while queue and len(seen) < GRAPH_NODES:
        node = queue.popleft()
        if id(node) in seen:
            continue
        seen[id(node)] = node
        leaf = getattr(node, "variable", None)  # an AccumulateGrad node's
        if leaf is not None:
            found.setdefault(id(leaf), leaf)
            continue
        queue.extend(after for after, _ in getattr(node, "next_functions", ()) if after is not None)
    return [leaf for leaf in found.values() if leaf.numel() > 0]


def _first_values(leaf: Any) -> Any:
    """A copy of the leaf's first ``PROBE_VALUES`` values (None: it has none to read); of a DTensor
    (FSDP2's parameter), this rank's shard's: reshaping the whole would be a collective."""
    try:
        local = leaf.to_local() if hasattr(leaf, "to_local") else leaf
        return local.detach().reshape(-1)[:PROBE_VALUES].clone()
    except Exception:  # noqa: BLE001 - a sparse or odd tensor: its values not compared
        return None
