from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode
from test_alter_partition_and_elections import alter
from test_brokers import empty_harness, hb, up

from broker.controller import AlterPartitionItem, AlterPartitionRequest, CreatableTopic
from broker.metadata import MetadataDelta

E = ErrorCode


def setup(replicas=(0, 1)):
    h = empty_harness()
    up(h, 0, 1, 2, 3)
    [r] = h.commit(h.controller.create_topics(
        h.image, [CreatableTopic("t", assignments={0: list(replicas)})]))
    assert r.error is E.none
    return h, h.image.topic("t").topic_id


def part(h):
    return h.image.topic("t").partitions[0]


def reassign(h, target):
    return h.commit(h.controller.alter_partition_reassignments(h.image, [("t", 0, target)]))


def test_move_to_new_brokers_completes_when_they_join_the_isr():
    h, tid = setup((0, 1))
    before = part(h)
    [r] = reassign(h, [2, 3])
    assert r.error is E.none
    p = part(h)
    assert p.replicas == (2, 3, 0, 1) and p.adding_replicas == (2, 3)
    assert p.removing_replicas == (0, 1) and p.isr == (0, 1) and p.leader == 0
    assert p.leader_epoch == before.leader_epoch  # nobody dropped yet
    [ongoing] = h.controller.list_partition_reassignments(h.image)
    assert (ongoing.topic, ongoing.adding_replicas) == ("t", (2, 3))
    alter(h, tid, [0, 1, 2])
    assert part(h).adding_replicas == (2, 3) and part(h).isr == (0, 1, 2)
    alter(h, tid, [0, 1, 2, 3])
    p = part(h)
    assert p.replicas == (2, 3) and p.adding_replicas == () and p.removing_replicas == ()
    assert p.isr == (2, 3) and p.leader == 2 and p.leader_epoch > before.leader_epoch
    assert h.controller.list_partition_reassignments(h.image) == []


def test_completion_removes_old_replicas_locally():
    h, tid = setup((0, 1))
    reassign(h, [2, 1])
    p = part(h)
    assert p.replicas == (2, 1, 0) and p.adding_replicas == (2,) and p.removing_replicas == (0,)
    img = h.image
    p = part(h)
    item = AlterPartitionItem(0, p.leader_epoch, p.partition_epoch,
                              [(b, img.brokers[b].epoch) for b in (0, 1, 2)])
    res = h.controller.alter_partition(img, AlterPartitionRequest(
        0, img.brokers[0].epoch, [(tid, [item])]))
    d = MetadataDelta(img)
    for r in res.records:
        d.replay(r)
    new = d.apply()
    assert new.topic("t").partitions[0].replicas == (2, 1)
    assert [x.partition for x in d.local_changes(0).deletes] == [0]
    assert [x.partition for x in d.local_changes(2).leaders + d.local_changes(2).followers] == [0]


def test_cancel_restores_the_original_replicas():
    h, tid = setup((0, 1))
    reassign(h, [2, 3])
    alter(h, tid, [0, 1, 2])
    epoch = part(h).leader_epoch
    [r] = reassign(h, None)
    assert r.error is E.none
    p = part(h)
    assert p.replicas == (0, 1) and p.isr == (0, 1) and p.adding_replicas == ()
    assert p.leader == 0 and p.leader_epoch == epoch + 1  # 2 and 3 dropped: epoch bumped
    [r] = reassign(h, None)
    assert r.error is E.no_reassignment_in_progress


def test_reorder_and_pure_removal_complete_at_once():
    h, _ = setup((0, 1, 2))
    e0 = part(h).leader_epoch
    reassign(h, [1, 0, 2])
    p = part(h)
    assert p.replicas == (1, 0, 2) and p.leader == 0 and p.leader_epoch == e0
    assert not p.adding_replicas
    reassign(h, [1, 2])
    p = part(h)
    assert p.replicas == (1, 2) and p.isr == (1, 2) and p.leader == 1
    assert p.leader_epoch == e0 + 1


def test_retarget_during_a_reassignment():
    h, _ = setup((0, 1))
    reassign(h, [2, 3])
    reassign(h, [0, 3])
    p = part(h)
    assert p.replicas == (0, 3, 1) and p.adding_replicas == (3,) and p.removing_replicas == (1,)


@pytest.mark.parametrize("target,code", [
    ([], E.invalid_replica_assignment),
    ([2, 2], E.invalid_replica_assignment),
    ([2, 9], E.invalid_replica_assignment),
])
def test_errors(target, code):
    h, _ = setup()
    [r] = reassign(h, target)
    assert r.error is code
    r = h.controller.alter_partition_reassignments(h.image, [("t", 5, [1]), ("x", 0, [1])])
    assert [x.error for x in r.response] == [E.unknown_topic_or_partition] * 2


def test_reassignment_needs_only_registered_brokers_but_isr_needs_live_ones():
    h, tid = setup((0, 1))
    hb(h, 3, 0, want_fence=True)
    [r] = reassign(h, [0, 3])
    assert r.error is E.none
    res = alter(h, tid, [0, 1, 3])
    assert res.topics[0][1][0].error is E.ineligible_replica
    assert part(h).adding_replicas == (3,)


def test_topic_in_list_filter():
    h, _ = setup()
    reassign(h, [2, 3])
    [only] = h.controller.list_partition_reassignments(h.image, [("t", 0), ("t", 7)])
    assert only.partition == 0
    assert h.controller.list_partition_reassignments(h.image, [("t", 7)]) == []
