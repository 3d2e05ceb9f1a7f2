"""``gpudash sweep``'s measuring loop against a scripted session (no child, no torch): a configuration
the session refuses is recorded once and left out of later rounds, and the summary compares the rest
(the rest of the sweep short of a real one: tests/test_sweep.py)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from gpudash.core.protocol import Sample
from gpudash.sweep.plan import Configuration, FamilyPlan, SweepPlan, SweepSettings, labels
from tests.test_sweep import rows


# -- the measuring loop against a scripted session (no child, no torch) ---------------------------------
class FakeSession:
    """Answers like an ``EngineSession``: "started", a sample every 0.05 s of the running
    configuration, "changed" for a switch, "error" for the variant "bad" (a real engine refuses a
    configuration the plan allowed only when it runs out of memory: not something to provoke on a
    CI machine)."""

    def __init__(self, config: object) -> None:
        from gpudash.core.protocol import GpuInfo

        self.t0 = time.monotonic()
        self.variant, self.batch = config.variant, config.batch_size  # type: ignore[attr-defined]
        self.log_path, self.gpu_info = "fake.log", GpuInfo(False, "fake")
        self.out: list[object] = []
        self.steps, self.last, self.stopped = 0, 0.0, False
        self.started: object = None  # the "started" event, as an EngineSession keeps it

    @property
    def info(self) -> object:
        from gpudash.core.protocol import SourceInfo

        return SourceInfo(log_path=self.log_path, started=self.started)  # type: ignore[arg-type]

    def _event(self, kind: str, **kw: object) -> None:
        from gpudash.core.protocol import Event
        from gpudash.core.running import Running

        running = Running("sync_loss", self.variant, self.batch, device="cpu")
        event = Event(time_s=time.monotonic() - self.t0, kind=kind, running=running, **kw)  # type: ignore[arg-type]
        self.started = event if kind == "started" else self.started
        self.out.append(event)

    def start(self) -> None:
        self._event("started")
        self.last = time.monotonic() - self.t0

    def send(self, control: object) -> None:
        from gpudash.core.protocol import SetVariant

        what = "variant" if isinstance(control, SetVariant) else "batch_size"
        after = getattr(control, what)
        if after == "bad":
            self._event("error", what=what, before=self.variant, after=after, message="bad is refused")
            return
        before = getattr(self, "variant" if what == "variant" else "batch")
        setattr(self, "variant" if what == "variant" else "batch", after)
        self._event("changed", what=what, before=str(before), after=str(after))

    def poll(self) -> list[object]:
        now = time.monotonic() - self.t0
        while now - self.last >= 0.05:
            self.last += 0.05
            self.steps += 5
            self.out.append(
                Sample(
                    self.last,
                    "sync_loss",
                    self.variant,
                    self.batch,
                    self.steps,
                    self.steps * self.batch,
                    0.05,
                    100.0 if self.variant == "fixed" else 50.0,
                    0.0,
                    None,
                    None,
                    None,
                )
            )
        out, self.out = self.out, []
        return out

    def stop(self, timeout: float = 10.0) -> None:
        self.stopped = True


def _fake_sweep(
    tmp_path: Path, variants: list[str], monkeypatch: pytest.MonkeyPatch
) -> tuple[int, Path, list[FakeSession]]:
    import gpudash.sweep.run as sweep

    sessions: list[FakeSession] = []

    def session_for(plan: object, family: str):  # noqa: ANN202
        def make(config: object) -> FakeSession:
            sessions.append(FakeSession(config))
            return sessions[-1]

        return make

    monkeypatch.setattr(sweep, "_session_for", session_for)
    configs = tuple(
        Configuration("sync_loss", v, label, 4, i)
        for i, (v, label) in enumerate(zip(variants, labels(variants), strict=False))
    )
    plan = SweepPlan(
        (FamilyPlan("sync_loss", "Host-device syncs", configs, seconds=0.5, warmup=0.1),),
        SweepSettings(repeats=2),
        tmp_path,
        "gpudash sweep (fake)",
    )
    return sweep.run_sweep(plan, quiet=True), tmp_path, sessions


@pytest.mark.slow
def test_a_refused_configuration_is_recorded_and_left_out_of_later_rounds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, sessions = _fake_sweep(tmp_path, ["sync-heavy", "bad", "fixed", "fixed"], monkeypatch)
    assert code == 0 and len(sessions) == 1 and sessions[0].stopped
    repeats = rows(out, "repeat")
    bad = [r for r in repeats if r["variant"] == "bad"]
    assert len(bad) == 1 and bad[0]["error"] == "bad is refused"  # tried once (unless it started there)
    assert len([r for r in repeats if r["variant"] in ("fixed", "fixed#2")]) == 4  # the A/A pair, no-op switches
    summary = {r["variant"]: r for r in rows(out, "summary")}
    assert summary["fixed"]["ratio"] and float(summary["fixed"]["ratio"]) == pytest.approx(2.0, rel=0.05)
    assert summary["bad"]["error"] == "bad is refused"
    assert "failed: bad is refused" in (out / "sweep.md").read_text()
