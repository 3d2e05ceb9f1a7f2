"""How much of a measurement was taken while the machine was noisy, and why.

Each sample carries the reasons the parent saw (``Sample.noise``: ``"host load: …; starved: …"``,
from ``gpudash.host.noise``). A ``NoiseTally`` counts a stretch's samples and the noisy ones by
the kind of reason (the text before the colon), so every place that shows a verdict (the
dashboard, the CSV's summary rows, ``sweep.md``, ``report.md``) says the same thing the same way.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

NOISY_SHARE = 0.10  # a stretch with at least this share of noisy samples is "noisy"


def kinds(noise: str) -> list[str]:
    """The kinds of reason in one sample's noise text ("host load", "starved", …)."""
    return [part.split(":", 1)[0].strip() for part in noise.split(";") if part.strip()]


@dataclass
class NoiseTally:
    """A stretch's samples: how many, how many noisy, and the kinds of reason seen."""

    samples: int = 0
    noisy: int = 0
    reasons: Counter[str] = field(default_factory=Counter)

    def add(self, noise: str) -> None:
        self.samples += 1
        if noise:
            self.noisy += 1
            self.reasons.update(kinds(noise))

    def __add__(self, other: NoiseTally) -> NoiseTally:
        """Both stretches' samples together (a configuration's repeats)."""
        samples, noisy = self.samples + other.samples, self.noisy + other.noisy
        return NoiseTally(samples, noisy, self.reasons + other.reasons)

    @property
    def share(self) -> float:
        return self.noisy / self.samples if self.samples else 0.0

    @property
    def is_noisy(self) -> bool:
        return self.samples > 0 and self.share >= NOISY_SHARE

    def note(self) -> str:
        """ "noisy: 40% of samples (host load, starved)" for a noisy stretch; "" otherwise."""
        if not self.is_noisy:
            return ""
        return f"noisy: {self.share:.0%} of samples ({', '.join(k for k, _ in self.reasons.most_common())})"


CHECKED = (
    "Each second gpudash looked at the load of other processes on its CPUs, the workload waiting for a CPU, "
    "other processes on the workload's GPU and GPU throttling (a configuration is noisy when at least "
    f"{NOISY_SHARE:.0%} of its samples were)."
)
MARK = "⚠ noisy"  # after a verdict measured while the machine was noisy


def markdown_section(noisy: list[tuple[str, str]], total: int) -> list[str]:
    """``## Noise`` for sweep.md and report.md: which of ``total`` configurations were measured
    while the machine was noisy (``(name, note)``), or that none was."""
    if not noisy:
        return ["## Noise", "", CHECKED + " Nothing was noisy while these were measured.", ""]
    return [
        "## Noise",
        "",
        f"⚠ **The machine was noisy** while {len(noisy)} of {total} configurations were measured: "
        "their figures and the verdicts that use them may not hold; measure again on a quiet machine. " + CHECKED,
        "",
        *(f"- {name}: {note}" for name, note in noisy),
        "",
    ]
