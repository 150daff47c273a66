"""bench/vs_kafka.py's steady figure: the ratio of the medians and its bootstrap interval."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from bench.vs_kafka import Row, Table, ratio_interval, require_disk


def ratio_of_medians(values: dict[str, list[float]]) -> float | None:
    return Row("steady", "case", "MB/s", "higher", values).ratio()


def test_the_interval_holds_the_ratio_and_widens_with_the_noise() -> None:
    steady = {"skiff": [99.0, 100.0, 101.0, 100.0, 99.5], "kafka": [100.0] * 5}
    noisy = {"skiff": [80.0, 100.0, 120.0, 90.0, 110.0], "kafka": [85.0, 100.0, 115.0, 95.0, 105.0]}
    assert ratio_of_medians(steady) == 1.0
    low, high = ratio_interval(steady["skiff"], steady["kafka"])
    assert 0.98 <= low <= 1.0 <= high <= 1.02
    low_n, high_n = ratio_interval(noisy["skiff"], noisy["kafka"])
    noisy_ratio = ratio_of_medians(noisy)
    assert noisy_ratio is not None and low_n <= noisy_ratio <= high_n
    assert high_n - low_n > 0.2 > high - low


def test_the_interval_is_seeded_and_needs_two_rounds_a_side() -> None:
    skiff, kafka = [90.0, 95.0, 97.0], [100.0, 104.0, 99.0]
    assert ratio_interval(skiff, kafka) == ratio_interval(skiff, kafka)
    assert all(math.isnan(v) for v in ratio_interval([90.0], kafka))


def test_a_figure_that_would_fill_the_disk_is_refused(tmp_path: Path) -> None:
    require_disk(tmp_path, 1.0, "steady")  # a byte: there is room
    with pytest.raises(SystemExit, match=r"steady writes ~.* GB under .* GB free"):
        require_disk(tmp_path, 1e18, "steady")


def test_the_table_gives_an_interval_from_three_runs_a_side() -> None:
    table = Table()
    for side, values in (("skiff", [90.0, 95.0, 100.0]), ("kafka", [100.0, 101.0, 99.0])):
        for v in values:
            table.add("steady", "produce", "MB/s", "higher", side, v)
    table.add("steady", "two runs", "MB/s", "higher", "skiff", 1.0)
    table.add("steady", "two runs", "MB/s", "higher", "kafka", 1.0)
    produce, two = table.rows[("steady", "produce")], table.rows[("steady", "two runs")]
    interval = produce.interval()
    assert interval is not None and interval[0] <= 0.95 / 1.0 <= interval[1]
    assert two.interval() is None
    assert table.as_json()[0]["interval"] == interval
