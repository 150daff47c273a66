"""broker/node/shards.py: which worker of a broker owns a partition."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.node.shards import ShardLayout, owner_of

TOPIC = st.text(alphabet="abcdefghijklmnopqrstuvwxyz._-0123456789", min_size=1, max_size=40)


@given(TOPIC, st.integers(0, 10_000), st.integers(1, 16))
def test_every_partition_has_exactly_one_owner(topic: str, partition: int, count: int) -> None:
    owners = [ShardLayout(count, i).owns(topic, partition) for i in range(count)]
    assert owners.count(True) == 1
    assert owners.index(True) == owner_of(topic, partition, count)


@given(TOPIC, st.integers(1, 8), st.integers(1, 64))
def test_a_topics_partitions_take_the_workers_in_turn(topic: str, count: int,
                                                      partitions: int) -> None:
    """Evenly: no worker holds more than one partition over another."""
    if topic.startswith("__"):
        return
    held = [0] * count
    for p in range(partitions):
        held[owner_of(topic, p, count)] += 1
    assert max(held) - min(held) <= 1


@given(st.text(min_size=0, max_size=20), st.integers(0, 100), st.integers(1, 8))
def test_internal_topics_stay_with_the_node_process(rest: str, partition: int,
                                                    count: int) -> None:
    assert owner_of("__" + rest, partition, count) == 0


def test_one_worker_owns_everything_and_keeps_kafkas_file_names() -> None:
    layout = ShardLayout()
    assert not layout.sharded and layout.owns("t", 7) and layout.file_suffix == ""
    assert ShardLayout(3, 2).file_suffix == ".worker-2"


@pytest.mark.parametrize(("count", "index"), [(0, 0), (2, 2), (2, -1)])
def test_a_place_outside_the_workers_is_refused(count: int, index: int) -> None:
    with pytest.raises(ValueError):
        ShardLayout(count, index)
