"""The soak's verdicts (the soak benchmark, judged by tests/soaks.py): growth of the base
configuration is reported, and the allocator's history-dependent cache is judged like for like,
not taken for growth."""

from __future__ import annotations

from tests.soaks import Row, like_for_like_verdict, verdict

BASE = "encdec serial b8"


def _rows(sequence: list[tuple[str, int]]) -> list[Row]:
    """One measurement a minute, a change before each but the first: (what ran, GPU memory in MiB)."""
    return [
        Row(float(minute), {"gpu_mem": mib}, 1, running, 100 * minute, sequence[minute - 1][0] if minute else "")
        for minute, (running, mib) in enumerate(sequence)
    ]


def test_memory_that_grows_after_the_same_change_is_not_flat_either_way() -> None:
    pipelined = "encdec pipelined b8"
    rows = _rows([(BASE, 1000), (pipelined, 1500)] * 2 + [(BASE, 1100), (pipelined, 1600), (BASE, 1200)])
    assert verdict(rows, "gpu_mem", 1, BASE).startswith("NOT flat: spread 20.0%")
    like = like_for_like_verdict(rows, "gpu_mem", 1, BASE)
    assert "NOT flat beyond 5%" in like and "after encdec pipelined b8: 1000, 1100, 1200" in like


def test_a_cache_that_depends_on_the_previous_configuration_but_repeats_is_flat_like_for_like() -> None:
    cycle = [("encdec serial b16", 0), (BASE, 1700), ("encdec pipelined b8", 0), (BASE, 1900)]
    rows = _rows([(BASE, 1700)] + cycle * 3)
    assert verdict(rows, "gpu_mem", 1, BASE).startswith("NOT flat: spread 11.8%")
    like = like_for_like_verdict(rows, "gpu_mem", 1, BASE)
    assert like.startswith("like for like (after the same configuration) flat within 5%")
    assert "2 configurations before it, 6 measurements" in like


def test_like_for_like_needs_a_configuration_seen_twice_after_the_warm_up() -> None:
    rows = _rows([(BASE, 1000), ("a", 0), (BASE, 1200), ("b", 0), (BASE, 1300)])
    assert "n/a" in like_for_like_verdict(rows, "gpu_mem", 1, BASE)
    assert "n/a" in like_for_like_verdict(rows[:1], "gpu_mem", 1, BASE)


def test_the_base_counts_after_what_ran_before_the_change_not_after_the_last_measurement() -> None:
    """Two measurements of one visit (--measure-every shorter than --change-every) both follow the
    configuration before the visit; a configuration changed away from before it was measured (the
    opening tour's 20 s changes) is not taken for the one before."""
    b16 = "encdec serial b16"
    rows = [
        Row(0, {"gpu_mem": 0}, 1, b16, 0, BASE),
        Row(1, {"gpu_mem": 1000}, 1, BASE, 1, b16),
        Row(2, {"gpu_mem": 1000}, 1, BASE, 2, b16),
        Row(3, {"gpu_mem": 0}, 1, b16, 3, BASE),
        Row(4, {"gpu_mem": 1200}, 1, BASE, 4, "augment cpu b32"),  # the tour's unmeasured visit
        Row(5, {"gpu_mem": 1010}, 1, BASE, 5, b16),
    ]
    like = like_for_like_verdict(rows, "gpu_mem", 0, BASE)
    assert like.startswith("like for like (after the same configuration) flat within 5%")
    assert f"1 configuration before it, 3 measurements; the largest spread 1.0%, after {b16}" in like


def test_like_for_like_reports_the_group_that_grew_whichever_comes_first() -> None:
    rows = _rows([(BASE, 1000), ("encdec serial b16", 0), (BASE, 900), ("knobs", 0)] * 2 + [(BASE, 1100)])
    like = like_for_like_verdict(rows, "gpu_mem", 1, BASE)
    assert "NOT flat beyond 5%" in like and "the largest spread 10.0%, after knobs: 1000, 1100" in like


def test_a_soak_without_a_gpu_says_its_gpu_columns_were_not_measured() -> None:
    from tests.soaks import COLUMNS, Soak, table

    rows = [
        Row(float(m), {key: (80.0 if key == "parent_rss" else None) for key, _, _ in COLUMNS}, 1, BASE, m)
        for m in range(3)
    ]
    text = table(Soak(rows=rows), 0, BASE)
    verdict_lines = text.split("| column | verdict")[1].splitlines()[2:]
    verdicts = dict(line.strip("| ").split(" | ") for line in verdict_lines)
    assert verdicts["parent RSS MiB"].startswith("flat within 5%")
    assert verdicts["GPU mem MiB"] == "not measured here (no GPU, or no sample of it)"
    assert "not measured" not in table(Soak(), 0, BASE)  # nothing measured at all: no verdicts to give


def test_the_table_splits_nvml_memory_into_the_allocator_and_the_rest() -> None:
    """Memory outside the allocator (NVML − reserved) is its own column, and flat when only the
    allocator's cache moves; the allocator's columns carry the like-for-like verdict."""
    from tests.soaks import COLUMNS, Soak, table

    def row(minute: int, running: str, nvml: float, reserved: float, before: str) -> Row:
        values: dict[str, float | None] = {key: None for key, _, _ in COLUMNS}
        values.update(gpu_mem=nvml, cuda_reserved=reserved, gpu_outside=nvml - reserved)
        return Row(float(minute), values, 1, running, minute, before)

    rows = [
        row(0, BASE, 2000, 800, ""),
        row(1, "knobs", 2300, 1100, BASE),
        row(2, BASE, 2100, 900, "knobs"),
        row(3, "knobs", 2300, 1100, BASE),
        row(4, BASE, 2100, 900, "knobs"),
    ]
    text = table(Soak(rows=rows), 0, BASE)
    verdict_lines = text.split("| column | verdict")[1].splitlines()[2:]
    verdicts = dict(line.strip("| ").split(" | ") for line in verdict_lines)
    assert verdicts["outside the allocator MiB"].startswith("flat within 5%")
    assert verdicts["GPU mem MiB"].startswith("flat within 5%")  # 2000, 2100, 2100: 5.0%
    assert verdicts["torch reserved MiB"].startswith("NOT flat: spread 12.5%")
    assert (
        "; like for like (after the same configuration) flat within 5% (1 configuration before it"
        in verdicts["torch reserved MiB"]
    )
