from __future__ import annotations

import random
import uuid
from collections import Counter

import pytest
from conftest import Harness, cluster
from kio.schema.errors import ErrorCode

from broker.controller import CreatableTopic, random_topic_id
from broker.controller.validation import topic_name_error
from broker.metadata.records import RESOURCE_TOPIC, kind

E = ErrorCode


def create(h: Harness, *topics: CreatableTopic, validate_only: bool = False):
    return h.commit(h.controller.create_topics(h.image, list(topics), validate_only))


@pytest.mark.parametrize("name,ok", [
    ("a", True), ("A-b_c.9", True), ("x" * 249, True), ("x" * 250, False), ("", False),
    (".", False), ("..", False), ("...", True), ("a b", False), ("a/b", False),
    ("ü", False), ("a*", False), ("__cluster_metadata", False), ("__consumer_offsets", True),
])
def test_topic_name_rules(name, ok):
    assert (topic_name_error(name) is None) is ok


def test_create_topic_writes_topic_partitions_and_configs():
    h = Harness(cluster(3))
    r = h.controller.create_topics(h.image, [CreatableTopic(
        "orders", 4, 3, configs={"retention.ms": "1000", "cleanup.policy": "compact"})])
    kinds = [kind(x) for x in r.records]
    assert kinds == ["topic"] + ["partition"] * 4 + ["config"] * 2
    [res] = h.commit(r)
    assert res.error is E.none and res.num_partitions == 4 and res.replication_factor == 3
    t = h.image.topic("orders")
    assert t is not None and t.topic_id == res.topic_id
    assert h.image.topic_by_id(res.topic_id) is t
    for i in range(4):
        p = t.partitions[i]
        assert len(set(p.replicas)) == 3 and p.isr == p.replicas
        assert p.leader == p.replicas[0] and p.leader_epoch == 0 and p.partition_epoch == 0
    assert h.image.topic_config("orders") == {"retention.ms": "1000",
                                             "cleanup.policy": "compact"}
    assert any(c.resource_type == RESOURCE_TOPIC for c in
               (x.config for x in r.records if kind(x) == "config"))


def test_defaults_when_minus_one():
    h = Harness(cluster(3), num_partitions=5, default_replication_factor=2)
    [res] = create(h, CreatableTopic("t"))
    assert (res.error, res.num_partitions, res.replication_factor) == (E.none, 5, 2)
    assert all(len(p.replicas) == 2 for p in h.image.topic("t").partitions.values())


def test_validate_only_writes_nothing_but_reports():
    h = Harness(cluster(1))
    r = h.controller.create_topics(h.image, [CreatableTopic("t", 2, 1)], validate_only=True)
    assert r.records == [] and r.response[0].error is E.none
    assert r.response[0].num_partitions == 2


@pytest.mark.parametrize("topic,code", [
    (CreatableTopic("bad name", 1, 1), E.invalid_topic_exception),
    (CreatableTopic("t", 0, 1), E.invalid_partitions),
    (CreatableTopic("t", -2, 1), E.invalid_partitions),
    (CreatableTopic("t", 1, 0), E.invalid_replication_factor),
    (CreatableTopic("t", 1, 4), E.invalid_replication_factor),
    (CreatableTopic("t", 1, 1, configs={"no.such.config": "1"}), E.invalid_config),
    (CreatableTopic("t", 1, 1, configs={"retention.ms": "soon"}), E.invalid_config),
    (CreatableTopic("t", 1, 1, configs={"cleanup.policy": "keep"}), E.invalid_config),
    (CreatableTopic("t", 1, 1, configs={"min.insync.replicas": "0"}), E.invalid_config),
    (CreatableTopic("t", 1, 1, configs={"retention.ms": None}), E.invalid_config),
    (CreatableTopic("t", 2, -1, assignments={0: [0]}), E.invalid_request),
    (CreatableTopic("t", assignments={0: [0], 2: [1]}), E.invalid_replica_assignment),
    (CreatableTopic("t", assignments={0: [0, 0]}), E.invalid_replica_assignment),
    (CreatableTopic("t", assignments={0: [0, 1], 1: [1]}), E.invalid_replica_assignment),
    (CreatableTopic("t", assignments={0: [7]}), E.invalid_replica_assignment),
    (CreatableTopic("t", assignments={0: []}), E.invalid_replica_assignment),
])
def test_create_errors(topic, code):
    h = Harness(cluster(3))
    r = h.controller.create_topics(h.image, [topic])
    assert r.response[0].error is code, r.response[0]
    assert r.response[0].message
    assert r.records == []


def test_replication_factor_counts_only_unfenced_brokers():
    h = Harness(cluster(3, fenced=[2]))
    [res] = create(h, CreatableTopic("t", 1, 3))
    assert res.error is E.invalid_replication_factor
    assert "only 2 broker(s)" in res.message
    [res] = create(h, CreatableTopic("t", 6, 2))
    assert res.error is E.none
    assert all(2 not in p.replicas for p in h.image.topic("t").partitions.values())


def test_manual_assignment_isr_is_unfenced_replicas():
    h = Harness(cluster(3, fenced=[1]))
    [res] = create(h, CreatableTopic("t", assignments={0: [1, 2], 1: [2, 0]}))
    assert res.error is E.none and res.replication_factor == 2
    p0, p1 = h.image.topic("t").partitions[0], h.image.topic("t").partitions[1]
    assert p0.replicas == (1, 2) and p0.isr == (2,) and p0.leader == 2
    assert p1.replicas == (2, 0) and p1.leader == 2
    [res] = create(h, CreatableTopic("u", assignments={0: [1]}))
    assert res.error is E.invalid_replica_assignment


def test_already_exists_and_collisions():
    h = Harness(cluster(1))
    assert create(h, CreatableTopic("a.b", 1, 1))[0].error is E.none
    [res] = create(h, CreatableTopic("a.b", 1, 1))
    assert res.error is E.topic_already_exists
    [res] = create(h, CreatableTopic("a_b", 1, 1))
    assert res.error is E.invalid_topic_exception and "collides" in res.message
    # collisions inside one request: the second one loses
    r = create(h, CreatableTopic("x_y", 1, 1), CreatableTopic("x.y", 1, 1))
    assert [x.error for x in r] == [E.none, E.invalid_topic_exception]


def test_duplicate_names_in_one_request_all_fail():
    h = Harness(cluster(1))
    r = create(h, CreatableTopic("d", 1, 1), CreatableTopic("d", 1, 1), CreatableTopic("e", 1, 1))
    assert [x.error for x in r] == [E.invalid_request, E.invalid_request, E.none]
    assert h.image.topic("d") is None and h.image.topic("e") is not None


def test_topic_ids_come_from_injected_rng_and_are_unique():
    ids1 = [random_topic_id(random.Random(5)) for _ in range(2)]
    assert ids1[0] == ids1[1]  # same seed, same id: no global randomness
    rng = random.Random(1)
    ids = [random_topic_id(rng) for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    assert all(i.int not in (0, 1) for i in ids)
    import base64
    assert all(not base64.urlsafe_b64encode(i.bytes).startswith(b"-") for i in ids)
    h1, h2 = Harness(cluster(3), seed=3), Harness(cluster(3), seed=3)
    a = create(h1, CreatableTopic("t", 6, 2))[0]
    b = create(h2, CreatableTopic("t", 6, 2))[0]
    assert a.topic_id == b.topic_id
    assert h1.image.topic("t").partitions == h2.image.topic("t").partitions


def test_leaders_are_balanced_within_a_topic():
    h = Harness(cluster(5))
    create(h, CreatableTopic("t", 20, 3))
    leaders = Counter(p.leader for p in h.image.topic("t").partitions.values())
    assert sorted(leaders.values()) == [4, 4, 4, 4, 4]


def test_delete_by_name_and_id():
    h = Harness(cluster(1))
    a = create(h, CreatableTopic("a", 2, 1), CreatableTopic("b", 1, 1),
               CreatableTopic("c", 1, 1, configs={"retention.ms": "5"}))
    ida = a[0].topic_id
    r = h.controller.delete_topics(h.image, names=["b", "c", "nope"], topic_ids=[ida, uuid.uuid4()])
    assert [kind(x) for x in r.records] == ["remove_topic"] * 3
    resp = h.commit(r)
    assert [(x.name, x.error) for x in resp] == [
        ("b", E.none), ("c", E.none), ("nope", E.unknown_topic_or_partition),
        ("a", E.none), (None, E.unknown_topic_id)]
    assert resp[3].topic_id == ida
    assert h.image.topics_by_name == {} and h.image.topics_by_id == {}
    assert h.image.topic_config("c") == {}  # configs go with the topic
    # recreating gives a new id
    [again] = create(h, CreatableTopic("a", 1, 1))
    assert again.error is E.none and again.topic_id != ida


def test_delete_same_topic_by_name_and_id_removes_once():
    h = Harness(cluster(1))
    [res] = create(h, CreatableTopic("a", 1, 1))
    r = h.controller.delete_topics(h.image, names=["a"], topic_ids=[res.topic_id])
    assert len(r.records) == 1
    r = h.controller.delete_topics(h.image, names=["a", "a"])
    assert [x.error for x in r.response] == [E.invalid_request] * 2 and r.records == []


def test_delete_disabled():
    h = Harness(cluster(1), delete_topic_enable=False)
    create(h, CreatableTopic("a", 1, 1))
    r = h.controller.delete_topics(h.image, names=["a"])
    assert r.response[0].error is E.topic_deletion_disabled and r.records == []


def test_too_many_partitions_in_one_request_fail_as_a_whole():
    h = Harness(cluster(1), num_partitions=5000)
    r = h.controller.create_topics(h.image, [CreatableTopic("a", 5000, 1),
                                             CreatableTopic("b", 1, 1), CreatableTopic("c")])
    assert r.records == []
    assert {x.error for x in r.response} == {E.policy_violation}
    assert r.response[0].message == "Excessively large number of partitions per request."
    # exactly the limit is fine
    [ok] = create(h, CreatableTopic("a", 10_000, 1))
    assert ok.error is E.none and h.image.topic("a").num_partitions == 10_000
    from broker.controller import CreatePartitionsTopic
    r = h.controller.create_partitions(h.image, [CreatePartitionsTopic("a", 20_001)])
    assert r.response[0].error is E.policy_violation and r.records == []
    # a huge count is refused before any placement work is done
    r = h.controller.create_topics(h.image, [CreatableTopic("z", 2**31 - 1, 1)])
    assert r.response[0].error is E.policy_violation
