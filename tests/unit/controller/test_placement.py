from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.controller.placement import (
    PlacementError,
    place_replicas,
    rack_alternated,
    validate_assignment,
)


def test_rack_alternated_order():
    brokers = {0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: None}
    assert rack_alternated(brokers) == [5, 0, 2, 4, 1, 3]


def test_round_robin_without_racks():
    brokers = {b: None for b in range(4)}
    out = place_replicas(brokers, 8, 3, random.Random(2))
    assert all(len(set(r)) == 3 for r in out)
    assert Counter(r[0] for r in out) == {0: 2, 1: 2, 2: 2, 3: 2}
    # followers are spread too: every broker holds 8*3/4 replicas
    assert Counter(b for r in out for b in r) == {0: 6, 1: 6, 2: 6, 3: 6}


def test_same_rng_same_placement_different_seeds_differ():
    brokers = {b: None for b in range(6)}
    a = place_replicas(brokers, 12, 3, random.Random(1))
    assert a == place_replicas(brokers, 12, 3, random.Random(1))
    assert any(place_replicas(brokers, 12, 3, random.Random(s)) != a for s in range(2, 6))


def test_rack_aware_spreads_each_partition_over_racks():
    brokers = {0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: "c"}
    for seed in range(20):
        for replicas in place_replicas(brokers, 12, 3, random.Random(seed)):
            assert len({brokers[b] for b in replicas}) == 3, replicas


def test_rack_aware_with_more_replicas_than_racks():
    brokers = {0: "a", 1: "a", 2: "a", 3: "b"}
    for replicas in place_replicas(brokers, 8, 3, random.Random(4)):
        assert len(set(replicas)) == 3 and 3 in replicas  # the only "b" broker always joins


def test_errors():
    with pytest.raises(PlacementError, match="only 2 broker"):
        place_replicas({0: None, 1: None}, 1, 3, random.Random(0))
    with pytest.raises(PlacementError):
        place_replicas({0: None}, 1, 0, random.Random(0))
    assert place_replicas({0: None}, 0, 1, random.Random(0)) == []


def test_start_partition_continues_the_round_robin():
    brokers = {b: None for b in range(3)}
    first = place_replicas(brokers, 6, 1, random.Random(9))
    rng = random.Random(9)
    more = place_replicas(brokers, 3, 1, rng, start_partition=6)
    assert Counter(r[0] for r in first + more) == {0: 3, 1: 3, 2: 3}


@settings(max_examples=60, deadline=None)
@given(
    racks=st.lists(st.sampled_from(["a", "b", "c", None]), min_size=1, max_size=9),
    partitions=st.integers(0, 40),
    data=st.data(),
    seed=st.integers(0, 2**32),
)
def test_placement_properties(racks, partitions, data, seed):
    brokers = dict(enumerate(racks))
    rf = data.draw(st.integers(1, len(brokers)))
    out = place_replicas(brokers, partitions, rf, random.Random(seed))
    assert len(out) == partitions
    n_racks = len(set(racks))
    for r in out:
        assert len(r) == rf and len(set(r)) == rf and all(b in brokers for b in r)
        assert len({brokers[b] for b in r}) == min(rf, n_racks)
    leaders = Counter(r[0] for r in out)
    if partitions:
        assert max(leaders.values()) - min(leaders.get(b, 0) for b in brokers) <= 1


@pytest.mark.parametrize(("replicas", "rf", "problem"), [
    ([], None, "includes an empty replica list."),
    ([3, 9, 9], None, "includes broker 9, but no such broker is registered."),
    ([3, 2, 3], None, "includes broker 2, but all its log directories are cordoned."),
    ([3, 1, 3], None, "includes the broker 3 more than once."),
    ([1, 3], 3, "includes a partition with 2 replica(s), but this is not consistent with "
                "previous partitions, which have 3 replica(s)."),
    ([3, 1], 2, None),
])
def test_manual_assignment_checks_in_kafkas_order(replicas: list[int], rf: int | None,
                                                   problem: str | None) -> None:
    """Kafka's validateManualPartitionAssignment: brokers in ascending order, each registered,
    with a directory that is not cordoned (KIP-1066), and named once; then the size."""
    placeable = {1: True, 2: False, 3: True}
    got = validate_assignment(replicas, placeable, rf)
    assert got == (None if problem is None
                   else f"The manual partition assignment {problem}")
