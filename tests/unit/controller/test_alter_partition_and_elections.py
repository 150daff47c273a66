from __future__ import annotations

import uuid

import pytest
from conftest import Harness
from kio.schema.errors import ErrorCode
from test_brokers import empty_harness, hb, topic, up

from broker.controller import (
    AlterPartitionItem,
    AlterPartitionRequest,
    ElectionType,
)
from broker.metadata import apply_records
from broker.metadata.records import kind, pb, wrap

E = ErrorCode


def setup(min_isr: str = "1") -> tuple[Harness, uuid.UUID]:
    h = empty_harness()
    up(h, 0, 1, 2)
    t = topic(h, "t", 1, 3, {"min.insync.replicas": min_isr})
    return h, t.topic_id


def alter(h: Harness, tid: uuid.UUID, new_isr, *, sender=None, leader_epoch=None,
          partition_epoch=None, broker_epoch=None, index=0):
    p = h.image.topic_by_id(tid).partitions.get(index) if h.image.topic_by_id(tid) else None
    sender = p.leader if sender is None else sender
    item = AlterPartitionItem(
        index, p.leader_epoch if leader_epoch is None and p else (leader_epoch or 0),
        p.partition_epoch if partition_epoch is None and p else (partition_epoch or 0),
        [(b, h.image.brokers[b].epoch if b in h.image.brokers else 1) for b in new_isr])
    epoch = h.image.brokers[sender].epoch if broker_epoch is None else broker_epoch
    return h.commit(h.controller.alter_partition(
        h.image, AlterPartitionRequest(sender, epoch, [(tid, [item])])))


def test_shrink_then_expand_isr():
    h, tid = setup()
    p = h.image.topic_by_id(tid).partitions[0]
    leader, f1, f2 = p.replicas
    reply = alter(h, tid, [leader, f1])
    [(rt, [res])] = reply.topics
    assert reply.error is E.none and rt == tid and res.error is E.none
    p2 = h.image.topic_by_id(tid).partitions[0]
    assert p2.isr == (leader, f1) and p2.partition_epoch == p.partition_epoch + 1
    assert p2.leader_epoch == p.leader_epoch  # an ISR change keeps the leader epoch
    assert (res.isr, res.partition_epoch, res.leader_id) == (p2.isr, p2.partition_epoch, leader)
    reply = alter(h, tid, [leader, f1, f2])
    assert h.image.topic_by_id(tid).partitions[0].isr == (leader, f1, f2)


def test_shrink_below_min_isr_moves_leavers_to_elr_and_expansion_clears_it():
    h, tid = setup(min_isr="2")
    leader, f1, f2 = h.image.topic_by_id(tid).partitions[0].replicas
    alter(h, tid, [leader, f1])
    assert h.image.topic_by_id(tid).partitions[0].elr == ()
    alter(h, tid, [leader])
    p = h.image.topic_by_id(tid).partitions[0]
    assert p.isr == (leader,) and p.elr == (f1,)
    alter(h, tid, [leader, f2])
    p = h.image.topic_by_id(tid).partitions[0]
    assert p.isr == (leader, f2) and p.elr == ()


@pytest.mark.parametrize("kwargs,code", [
    ({"leader_epoch": 5}, E.unknown_leader_epoch),
    ({"partition_epoch": 7}, E.invalid_update_version),
    ({"index": 3}, E.unknown_topic_or_partition),
])
def test_item_errors(kwargs, code):
    h, tid = setup()
    p = h.image.topic_by_id(tid).partitions[0]
    if "index" in kwargs:
        kwargs.update(leader_epoch=0, partition_epoch=0)
    reply = alter(h, tid, list(p.replicas), sender=p.leader, **kwargs)
    assert reply.topics[0][1][0].error is code


def test_fenced_leader_epoch_and_not_leader_and_stale_sender():
    h, tid = setup()
    p = h.image.topic_by_id(tid).partitions[0]
    leader, f1, _ = p.replicas
    h.image = apply_records(h.image, [wrap(pb.PartitionChange(
        topic_id=tid.bytes, partition_id=0, leader=leader))])  # bump the leader epoch
    r = alter(h, tid, [leader, f1], leader_epoch=p.leader_epoch)
    assert r.topics[0][1][0].error is E.fenced_leader_epoch
    r = alter(h, tid, [f1], sender=f1)
    assert r.topics[0][1][0].error is E.not_leader_or_follower
    r = alter(h, tid, [leader], broker_epoch=12345)
    assert r.error is E.stale_broker_epoch and r.topics == ()
    r = h.controller.alter_partition(h.image, AlterPartitionRequest(
        leader, h.image.brokers[leader].epoch,
        [(uuid.UUID(int=5), [AlterPartitionItem(0, 0, 0, [(leader, -1)])])]))
    assert r.response.topics[0][1][0].error is E.unknown_topic_id and r.records == []


def test_ineligible_and_invalid_isr():
    h, tid = setup()
    p = h.image.topic_by_id(tid).partitions[0]
    leader, f1, f2 = p.replicas
    hb(h, f2, 0, want_fence=True)
    p = h.image.topic_by_id(tid).partitions[0]
    r = alter(h, tid, [leader, f1, f2])
    assert r.topics[0][1][0].error is E.ineligible_replica
    r = alter(h, tid, [f1])  # leader not in its own ISR
    assert r.topics[0][1][0].error is E.invalid_request
    # a stale broker epoch for an ISR member
    item = AlterPartitionItem(0, p.leader_epoch, p.partition_epoch,
                              [(leader, -1), (f1, h.image.brokers[f1].epoch + 9)])
    r = h.controller.alter_partition(h.image, AlterPartitionRequest(
        leader, h.image.brokers[leader].epoch, [(tid, [item])]))
    assert r.response.topics[0][1][0].error is E.ineligible_replica


def test_preferred_election_and_rebalance():
    h = empty_harness()
    up(h, 0, 1, 2)
    t = topic(h, "t", 6, 2)
    # fence and unfence broker 0: its leaderships move away and do not come back by themselves
    hb(h, 0, 0, want_fence=True)
    moved = [i for i, p in t.partitions.items() if p.leader == 0]
    assert moved and all(h.image.topic("t").partitions[i].leader != 0 for i in moved)
    hb(h, 0, 1)
    # broker 0 is not in those ISRs any more: preferred election is not available yet
    r = h.controller.elect_leaders(h.image, ElectionType.PREFERRED, [("t", moved[0])])
    assert r.response[0].error is E.preferred_leader_not_available
    for i in moved:  # the leader lets it back into the ISR
        p = h.image.topic("t").partitions[i]
        alter(h, t.topic_id, [p.leader, 0], index=i)
    records = h.controller.rebalance_leaders(h.image, 10)
    assert {kind(x) for x in records} == {"partition_change"} and len(records) == len(moved)
    h.image = apply_records(h.image, records)
    assert all(p.leader == p.replicas[0] for p in h.image.topic("t").partitions.values())
    assert h.controller.rebalance_leaders(h.image, 10) == []
    r = h.controller.elect_leaders(h.image, ElectionType.PREFERRED, [("t", 0), ("zz", 0)])
    assert [x.error for x in r.response] == [E.election_not_needed,
                                              E.unknown_topic_or_partition]


def test_unclean_election_on_request():
    h = empty_harness()
    up(h, 0, 1)
    topic(h, "t", 1, 2)
    a, b = h.image.topic("t").partitions[0].replicas
    hb(h, b, 0, want_fence=True)
    hb(h, a, 0, want_fence=True)
    hb(h, b, 1)
    assert h.image.topic("t").partitions[0].leader == -1
    r = h.controller.elect_leaders(h.image, ElectionType.UNCLEAN)
    assert r.response[0].error is E.none
    h.image = apply_records(h.image, r.records)
    p = h.image.topic("t").partitions[0]
    assert p.leader == b and p.isr == (b,)
    # all partitions: those that need no election are left out of the answer, as Kafka's
    # controller answers; named, each is answered
    assert h.controller.elect_leaders(h.image, ElectionType.UNCLEAN).response == []
    r = h.controller.elect_leaders(h.image, ElectionType.UNCLEAN, [("t", 0)])
    assert r.response[0].error is E.election_not_needed


def test_unclean_leader_is_recovering_until_it_says_recovered():
    h = empty_harness()
    up(h, 0, 1)
    t = topic(h, "t", 1, 2)
    a, b = h.image.topic("t").partitions[0].replicas
    hb(h, b, 0, want_fence=True)
    hb(h, a, 0, want_fence=True)
    hb(h, b, 1)
    h.image = apply_records(h.image, h.controller.elect_leaders(h.image,
                                                                ElectionType.UNCLEAN).records)
    p = h.image.topic("t").partitions[0]
    assert p.leader == b and p.leader_recovery_state == 1
    hb(h, a, 2)

    def send(isr, state):
        p = h.image.topic("t").partitions[0]
        item = AlterPartitionItem(0, p.leader_epoch, p.partition_epoch,
                                  [(x, h.image.brokers[x].epoch) for x in isr], state)
        return h.commit(h.controller.alter_partition(h.image, AlterPartitionRequest(
            b, h.image.brokers[b].epoch, [(t.topic_id, [item])]))).topics[0][1][0]

    assert send([b, a], 1).error is E.invalid_request    # no followers while recovering
    res = send([b], 0)                                   # recovered
    assert res.error is E.none and res.leader_recovery_state == 0
    assert h.image.topic("t").partitions[0].leader_recovery_state == 0
    assert send([b], 1).error is E.invalid_request       # never back to recovering
    assert send([b, a], 0).error is E.none
    assert h.image.topic("t").partitions[0].isr == (b, a)
