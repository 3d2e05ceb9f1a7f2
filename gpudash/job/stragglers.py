"""A data-parallel job's straggler: the rank the others wait for.

Ranks of a data-parallel job step in lockstep — each waits for the others in the gradients'
all-reduce — so their step times agree and do not say which rank holds the others back. Where each
waits does: a rank whose step waits for its next batch far longer than the other ranks' do is the
one they wait for. ``StragglerWatch`` reads each rank's share of its training seconds spent waiting
for input, window by window (``gpudash.job.steps.JobSamples.input_shares``), and names such a rank
once it has been one for ``WINDOWS`` windows in a row, and again when it no longer is. Torch-free.
"""

from __future__ import annotations

INPUT_SHARE = 0.20  # a rank waiting for input this share of its step or more ...
AHEAD = 0.15  # ... and this much more than every other rank: the straggler
WINDOWS = 3  # windows in a row before it is named


class StragglerWatch:
    """``window(shares)`` after each closed window: a line to tell, or ""."""

    def __init__(self) -> None:
        self.named: int | None = None  # the rank named now
        self._candidate: int | None = None
        self._seen = 0

    def window(self, shares: dict[int, float]) -> str:
        """Each rank's input-wait share of the window just closed."""
        rank = _straggler(shares)
        if rank != self._candidate:
            self._candidate, self._seen = rank, 0
        self._seen += 1
        if rank is not None and rank != self.named and self._seen >= WINDOWS:
            self.named = rank
            others = max(share for r, share in shares.items() if r != rank)
            return (
                f"rank {rank} is the straggler: it waits for its input {100 * shares[rank]:.0f}% of each step, "
                f"the other ranks at most {100 * others:.0f}% — they wait for it in the gradients' all-reduce; "
                f"give rank {rank}'s DataLoader more workers (num_workers) or lighter per-sample work"
            )
        if rank is None and self.named is not None and self._seen >= WINDOWS:
            was, self.named = self.named, None
            return f"rank {was} keeps up again: no rank waits for its input much longer than the others"
        return ""


def _straggler(shares: dict[int, float]) -> int | None:
    if len(shares) < 2:
        return None
    rank = max(shares, key=lambda r: shares[r])
    others = max(share for r, share in shares.items() if r != rank)
    return rank if shares[rank] >= INPUT_SHARE and shares[rank] - others >= AHEAD else None
