"""KIP-1331's pure parts (broker/group/streams_topology_description.py): the solicitation
back-off (Kafka's StreamsGroupTopologyDescriptionBackoff), the in-memory plugin, and the
conversion of a pushed node as Kafka's converter keeps it."""

from __future__ import annotations

import random

import pytest

from broker.group.streams_topology_description import (
    NODE_PROCESSOR,
    NODE_SINK,
    NODE_SOURCE,
    DescriptionSubtopology,
    InMemoryTopologyDescriptionPlugin,
    InvalidDescription,
    SolicitationBackoff,
    TopologyDescription,
    global_store_of,
    node_of,
    should_solicit,
)


def test_back_off_window_doubles_per_ask_at_the_same_epoch_up_to_an_hour() -> None:
    b = SolicitationBackoff(random.Random(1), jitter=0.0)
    assert b.arm_if_not_active("g", 1, now_ms=0)
    assert not b.arm_if_not_active("g", 1, now_ms=29_999)
    assert b.arm_if_not_active("g", 1, now_ms=30_000)  # window over: asked again, 60 s
    assert not b.arm_if_not_active("g", 1, now_ms=89_999)
    assert b.arm_if_not_active("g", 1, now_ms=90_000)
    assert b.arm_if_not_active("g", 2, now_ms=90_001)  # another epoch: a fresh window
    assert not b.arm_if_not_active("g", 2, now_ms=120_000)
    assert b.arm_if_not_active("other", 2, now_ms=90_001)  # per group
    now = 200_000
    for _ in range(12):
        b.arm_or_extend("h", 1, now)
    assert b._windows["h"].next_attempt_ms == now + 3_600_000  # capped at 1 h


def test_back_off_jitter_and_clear() -> None:
    b = SolicitationBackoff(random.Random(7))
    delays = set()
    for _ in range(50):
        b.clear_group("g")
        b.arm_if_not_active("g", 1, now_ms=0)
        delays.add(b._windows["g"].next_attempt_ms)
    assert min(delays) >= 24_000 and max(delays) <= 36_000 and len(delays) > 1
    b.clear("g", 2)  # another epoch's clear leaves the window
    assert not b.arm_if_not_active("g", 1, now_ms=1)
    b.clear("g", 1)
    assert b.arm_if_not_active("g", 1, now_ms=1)
    b.arm_or_extend("g", 0, now_ms=2)  # an older epoch never replaces a newer window
    assert b._windows["g"].topology_epoch == 1


def test_should_solicit() -> None:
    ok = dict(topology_epoch=2, stored_epoch=1, failed_epoch=-1, stale_topology=False)
    assert should_solicit(**ok)  # type: ignore[arg-type]
    for change in ({"topology_epoch": None}, {"stored_epoch": 2}, {"failed_epoch": 2},
                   {"stale_topology": True}):
        assert not should_solicit(**{**ok, **change})  # type: ignore[arg-type]


def test_nodes_keep_their_types_fields_and_first_names() -> None:
    src = node_of("s", NODE_SOURCE, ("a", "b", "a"), "x", ("st",), ("p", "p"))
    assert (src.source_topics, src.sink_topic, src.stores, src.successors) == (
        ("a", "b"), None, (), ("p",))
    proc = node_of("p", NODE_PROCESSOR, ("a",), "x", ("st", "st2", "st"), ())
    assert (proc.source_topics, proc.sink_topic, proc.stores) == ((), None, ("st", "st2"))
    sink = node_of("k", NODE_SINK, ("a",), None, ("st",), ())
    assert (sink.source_topics, sink.sink_topic, sink.stores) == ((), None, ())
    with pytest.raises(InvalidDescription, match="Unknown topology node type: 0"):
        node_of("n", 0, (), None, (), ())
    with pytest.raises(InvalidDescription, match="source and a processor"):
        global_store_of(proc, src)
    assert global_store_of(src, proc).processor is proc


def test_in_memory_plugin_holds_the_latest_per_group_at_its_epoch() -> None:
    p = InMemoryTopologyDescriptionPlugin()
    d1 = TopologyDescription((DescriptionSubtopology("0", ()),), ())
    d2 = TopologyDescription((), ())
    p.set_topology("g", 1, d1)
    assert p.get_topology("g", 1) is d1 and p.get_topology("g", 2) is None
    p.set_topology("g", 2, d2)
    assert p.get_topology("g", 1) is None and p.get_topology("g", 2) is d2
    p.delete_topology("g")
    assert p.get_topology("g", 2) is None
