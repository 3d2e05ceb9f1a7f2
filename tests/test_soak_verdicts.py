"""The soak's verdicts (benchmarks/soak.py): growth of the base configuration is reported, and
the allocator's history-dependent cache is judged like for like, not taken for growth."""

from __future__ import annotations

from benchmarks.soak import Row, like_for_like_verdict, verdict

BASE = "encdec serial b8"


def _rows(sequence: list[tuple[str, float]]) -> list[Row]:
    """One measurement a minute: (what ran, GPU memory in MiB)."""
    return [Row(float(minute), {"gpu_mem": mib}, 1, running, 100 * minute)
            for minute, (running, mib) in enumerate(sequence)]


def test_memory_that_grows_after_the_same_change_is_not_flat_either_way() -> None:
    rows = _rows([(BASE, 1000), ("encdec pipelined b8", 1500), (BASE, 1000), ("encdec pipelined b8", 1500),
                  (BASE, 1100), ("encdec pipelined b8", 1600), (BASE, 1200)])
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


def test_several_measurements_of_one_visit_count_after_the_configuration_before_the_visit() -> None:
    """With --measure-every shorter than --change-every the base is measured twice per visit; both
    follow the other configuration, not each other."""
    rows = _rows([("encdec serial b16", 0), (BASE, 1000), (BASE, 1000), ("encdec serial b16", 0),
                  (BASE, 1200), (BASE, 1200)])
    like = like_for_like_verdict(rows, "gpu_mem", 0, BASE)
    assert "NOT flat beyond 5%" in like and "1 configuration before it, 4 measurements" in like


def test_a_soak_without_a_gpu_says_its_gpu_columns_were_not_measured() -> None:
    from benchmarks.soak import COLUMNS, Soak, table

    rows = [Row(float(m), {key: (80.0 if key == "parent_rss" else None) for key, _, _ in COLUMNS}, 1, BASE, m)
            for m in range(3)]
    text = table(Soak(rows=rows), 0, BASE)
    verdict_lines = text.split("| column | verdict")[1].splitlines()[2:]
    verdicts = dict(line.strip("| ").split(" | ") for line in verdict_lines)
    assert verdicts["parent RSS MiB"].startswith("flat within 5%")
    assert verdicts["GPU mem MiB"] == "not measured here (no GPU, or no sample of it)"
