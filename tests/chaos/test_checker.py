"""The chaos checker must see every kind of fault it claims to see."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from tests.chaos.checker import check, decode_value, encode_value


def _log(*ids: tuple[str, int]) -> list[bytes]:
    return [encode_value(p, s) for p, s in ids]


def test_clean_run_reports_nothing() -> None:
    acked = {0: [("a", 0), ("a", 1)], 1: [("b", 0)]}
    report = check(acked, {0: _log(("a", 0), ("a", 1)), 1: _log(("b", 0))})
    assert (report.lost, report.duplicated, report.reordered) == ([], [], [])
    assert report.acknowledged == 3 and report.read == 3


def test_lost_record_is_reported_with_its_partition() -> None:
    report = check({0: [("a", 0), ("a", 1), ("a", 2)]}, {0: _log(("a", 0), ("a", 2))})
    assert report.lost == [(0, ("a", 1))]


def test_record_on_the_wrong_partition_is_lost() -> None:
    report = check({0: [("a", 0)]}, {1: _log(("a", 0))})
    assert report.lost == [(0, ("a", 0))]
    assert report.unacknowledged_present == 1


def test_duplicates_are_counted_once_per_extra_copy() -> None:
    report = check({0: [("a", 0), ("a", 1)]}, {0: _log(("a", 0), ("a", 1), ("a", 1), ("a", 1))})
    assert report.duplicated == [(0, ("a", 1)), (0, ("a", 1))]
    assert report.reordered == []


def test_reordering_within_a_producer_is_reported() -> None:
    report = check({0: [("a", 0), ("a", 1), ("a", 2)]}, {0: _log(("a", 0), ("a", 2), ("a", 1))})
    assert report.reordered == [(0, ("a", 2), ("a", 1))]


def test_interleaved_producers_are_not_reordering() -> None:
    report = check({0: [("a", 0), ("b", 0), ("a", 1), ("b", 1)]},
                   {0: _log(("b", 0), ("a", 0), ("b", 1), ("a", 1))})
    assert report.reordered == []


def test_unacknowledged_records_in_the_log_are_fine() -> None:
    report = check({0: [("a", 0)]}, {0: _log(("a", 0), ("a", 1))})
    assert report.lost == [] and report.unacknowledged_present == 1


def test_value_round_trip_and_garbage() -> None:
    assert decode_value(encode_value("p:q", 7)) == ("p:q", 7)
    try:
        decode_value(b"nonsense")
    except ValueError:
        pass
    else:
        raise AssertionError("a value without a producer must be refused")


@given(st.integers(0, 2**32), st.integers(1, 60))
def test_any_single_drop_is_found(seed: int, n: int) -> None:
    rng = random.Random(seed)
    ids = [("p", i) for i in range(n)]
    dropped = rng.randrange(n)
    log = _log(*(ids[:dropped] + ids[dropped + 1:]))
    report = check({3: ids}, {3: log})
    assert report.lost == [(3, ids[dropped])]
    assert report.duplicated == [] and report.reordered == []
