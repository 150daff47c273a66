from __future__ import annotations

import uuid

import pytest

from broker.metadata import InvalidRecordError, MetadataDelta, MetadataImage, apply_records
from broker.metadata import records as rec
from broker.metadata.records import RESOURCE_BROKER, RESOURCE_TOPIC, pb, wrap

T1 = uuid.UUID(int=0xA1)
T2 = uuid.UUID(int=0xB2)


def reg(bid: int, epoch: int, fenced: bool = True, rack: str | None = None):
    m = pb.RegisterBroker(broker_id=bid, broker_epoch=epoch, incarnation_id=bytes(15) + b"\x01",
                          fenced=fenced,
                          endpoints=[pb.Endpoint(name="PLAINTEXT", host="h", port=9000 + bid,
                                                 security_protocol="PLAINTEXT"),
                                     pb.Endpoint(name="INTERNAL", host="i", port=19000 + bid)])
    if rack:
        m.rack = rack
    return wrap(m)


def base() -> MetadataImage:
    return apply_records(MetadataImage.empty("c"), [
        reg(0, 5, fenced=False, rack="r1"), reg(1, 6, fenced=False), reg(2, 7),
        rec.topic_record("a", T1),
        rec.partition_record(T1, 0, [0, 1], [0, 1], 0),
        rec.partition_record(T1, 1, [1, 0], [1, 0], 1),
        rec.topic_record("b", T2),
        rec.partition_record(T2, 0, [0], [0], 0),
    ], offset=7, epoch=1)


def test_lookups():
    img = base()
    assert img.cluster_id == "c" and (img.offset, img.epoch) == (7, 1)
    assert img.topic("a").topic_id == T1 and img.topic_by_id(T2).name == "b"
    assert img.partition("a", 1).leader == 1 and img.leader_of("a", 1) == 1
    assert img.leader_of("a", 9) == -1 and img.leader_of("zzz", 0) == -1
    assert img.partition_count == 3
    assert img.unfenced_broker_ids == (0, 1)
    assert {b: e.port for b, e in img.broker_endpoints("PLAINTEXT").items()} == {0: 9000, 1: 9001}
    assert set(img.broker_endpoints("PLAINTEXT", include_fenced=True)) == {0, 1, 2}
    assert img.broker_endpoints("INTERNAL")[1].host == "i"
    assert img.broker_endpoints("NOPE") == {}
    assert img.brokers[0].rack == "r1" and img.brokers[1].rack is None
    assert img.brokers[0].endpoint("INTERNAL").port == 19000
    assert sorted(img.leaderships[1]) == [(T1, 1)]
    assert img.is_alive(0) and not img.is_alive(2) and not img.is_alive(9)


def test_images_are_not_changed_by_later_deltas_and_share_unchanged_parts():
    img = base()
    nxt = apply_records(img, [rec.partition_record(T1, 2, [0], [0], 0)], offset=8, epoch=1)
    assert img.topic("a").num_partitions == 2 and nxt.topic("a").num_partitions == 3
    assert nxt.topic("b") is img.topic("b")  # untouched topic shared
    assert nxt.brokers is img.brokers
    assert nxt.offset == 8


def test_partition_change_epochs_and_presence():
    img = base()
    ch = pb.PartitionChange(topic_id=T1.bytes, partition_id=0)
    ch.isr.ids.extend([0])
    ch.isr.SetInParent()
    img2 = apply_records(img, [wrap(ch)])
    p = img2.partition("a", 0)
    assert p.isr == (0,) and p.leader == 0 and p.leader_epoch == 0 and p.partition_epoch == 1
    assert p.replicas == (0, 1)  # absent field unchanged
    ch = pb.PartitionChange(topic_id=T1.bytes, partition_id=0, leader=1)
    img3 = apply_records(img2, [wrap(ch)])
    p = img3.partition("a", 0)
    assert (p.leader, p.leader_epoch, p.partition_epoch) == (1, 1, 2)
    # an empty list is a real value, distinct from "absent"
    ch = pb.PartitionChange(topic_id=T1.bytes, partition_id=0)
    ch.elr.SetInParent()
    ch.isr.SetInParent()
    p = apply_records(img3, [wrap(ch)]).partition("a", 0)
    assert p.isr == () and p.elr == ()


def test_broker_fence_unfence_shutdown_unregister():
    img = base()
    img = apply_records(img, [wrap(pb.UnfenceBroker(broker_id=2, broker_epoch=7))])
    assert not img.brokers[2].fenced and img.unfenced_broker_ids == (0, 1, 2)
    img = apply_records(img, [wrap(pb.FenceBroker(broker_id=0, broker_epoch=5))])
    assert img.brokers[0].fenced and 0 not in img.broker_endpoints("PLAINTEXT")
    img = apply_records(img, [wrap(pb.BrokerRegistrationChange(
        broker_id=1, broker_epoch=6, in_controlled_shutdown=True))])
    assert img.brokers[1].in_controlled_shutdown and not img.brokers[1].fenced
    img = apply_records(img, [wrap(pb.UnregisterBroker(broker_id=1, broker_epoch=6))])
    assert 1 not in img.brokers and img.last_broker_epoch == 7
    with pytest.raises(InvalidRecordError):
        apply_records(img, [wrap(pb.FenceBroker(broker_id=2, broker_epoch=99))])
    with pytest.raises(InvalidRecordError):
        apply_records(img, [wrap(pb.UnfenceBroker(broker_id=1, broker_epoch=6))])


def test_remove_topic_drops_partitions_and_configs_and_reports_it():
    img = apply_records(base(), [rec.config_record(RESOURCE_TOPIC, "a", "retention.ms", "1")])
    assert img.topic_config("a") == {"retention.ms": "1"}
    d = MetadataDelta(img)
    d.replay(rec.remove_topic_record(T1), offset=9, epoch=2)
    new = d.apply()
    assert new.topic("a") is None and new.topic_by_id(T1) is None
    assert new.topic_config("a") == {}
    assert d.deleted_topics[T1].name == "a" and len(d.deleted_topics[T1].partitions) == 2
    assert (new.offset, new.epoch) == (9, 2)
    # the name can be reused with a new id
    new = apply_records(new, [rec.topic_record("a", uuid.UUID(int=5))])
    assert new.topic("a").topic_id == uuid.UUID(int=5) and new.topic("a").num_partitions == 0


def test_configs_set_delete_and_broker_configs():
    img = apply_records(base(), [
        rec.config_record(RESOURCE_TOPIC, "a", "x", "1"),
        rec.config_record(RESOURCE_TOPIC, "a", "y", "2"),
        rec.config_record(RESOURCE_BROKER, "", "log.retention.ms", "3"),
        rec.config_record(RESOURCE_BROKER, "1", "log.retention.ms", "4"),
    ])
    assert img.topic_config("a") == {"x": "1", "y": "2"}
    assert img.broker_config() == {"log.retention.ms": "3"}
    assert img.broker_config(1) == {"log.retention.ms": "4"}
    img2 = apply_records(img, [rec.config_record(RESOURCE_TOPIC, "a", "x", None),
                               rec.config_record(RESOURCE_TOPIC, "a", "y", None)])
    assert img2.topic_config("a") == {} and (RESOURCE_TOPIC, "a") not in img2.configs
    assert img.topic_config("a") == {"x": "1", "y": "2"}  # old image untouched


def test_delta_tracks_changes():
    img = base()
    d = MetadataDelta(img)
    d.replay(rec.topic_record("c", uuid.UUID(int=9)))
    d.replay(rec.partition_record(uuid.UUID(int=9), 0, [1], [1], 1))
    d.replay(wrap(pb.PartitionChange(topic_id=T1.bytes, partition_id=1, leader=0)))
    d.replay(wrap(pb.FenceBroker(broker_id=1, broker_epoch=6)))
    assert d.created_topics == {uuid.UUID(int=9)}
    assert set(d.changed_partitions) == {(uuid.UUID(int=9), 0), (T1, 1)}
    assert d.changed_brokers == {1}
    new = d.apply()
    assert new.topic("c").partitions[0].leader == 1
    with pytest.raises(RuntimeError):
        d.replay(wrap(pb.NoOp()))


def test_producer_ids_and_features():
    img = apply_records(base(), [rec.producer_ids_record(0, 5, 1000),
                                 rec.feature_level_record("metadata.version", 3)])
    assert img.next_producer_id == 1000 and img.features == {"metadata.version": 3}
    with pytest.raises(InvalidRecordError):
        apply_records(img, [rec.producer_ids_record(0, 5, 10)])
    img = apply_records(img, [rec.feature_level_record("metadata.version", 0)])
    assert img.features == {}


@pytest.mark.parametrize("bad", [
    rec.topic_record("a", uuid.UUID(int=77)),          # name taken
    rec.topic_record("zz", T1),                         # id taken
    rec.partition_record(uuid.UUID(int=4), 0, [0], [0], 0),   # unknown topic
    wrap(pb.PartitionChange(topic_id=T1.bytes, partition_id=9)),  # unknown partition
    rec.remove_topic_record(uuid.UUID(int=4)),
    pb.MetadataRecord(),  # empty envelope
    wrap(pb.Topic(name="q", topic_id=b"short")),
])
def test_records_that_do_not_fit_are_rejected(bad):
    with pytest.raises(InvalidRecordError):
        apply_records(base(), [bad])


def test_decode_rejects_garbage_and_oversize():
    r = rec.topic_record("a", T1)
    assert rec.decode(rec.encode(r)) == r
    with pytest.raises(InvalidRecordError):
        rec.decode(b"\xff\xff\xff")
    with pytest.raises(InvalidRecordError):
        rec.decode(b"")
    with pytest.raises(InvalidRecordError):
        rec.decode(b"\x00" * (rec.MAX_RECORD_BYTES + 1))


def test_local_changes_for_one_broker():
    img = base()
    d = MetadataDelta(img)
    t3 = uuid.UUID(int=0xC3)
    d.replay(rec.topic_record("c", t3))
    d.replay(rec.partition_record(t3, 0, [1, 0], [1, 0], 1))
    d.replay(rec.partition_record(t3, 1, [2], [2], 2))
    ch = pb.PartitionChange(topic_id=T1.bytes, partition_id=0, leader=1)
    d.replay(wrap(ch))
    moved = pb.PartitionChange(topic_id=T1.bytes, partition_id=1)
    moved.replicas.ids.extend([1, 2])
    moved.isr.ids.extend([1, 2])
    d.replay(wrap(moved))
    d.replay(rec.remove_topic_record(T2))
    d.apply()
    on0 = d.local_changes(0)
    assert sorted((x.topic, x.partition) for x in on0.leaders) == []
    assert sorted((x.topic, x.partition) for x in on0.followers) == [("a", 0), ("c", 0)]
    assert sorted((x.topic, x.partition) for x in on0.deletes) == [("a", 1), ("b", 0)]
    on1 = d.local_changes(1)
    assert sorted((x.topic, x.partition) for x in on1.leaders) == [("a", 0), ("a", 1), ("c", 0)]
    assert on1.deletes == [] and on1.followers == []
    on2 = d.local_changes(2)
    assert sorted((x.topic, x.partition) for x in on2.leaders) == [("c", 1)]
    assert [(x.topic, x.partition) for x in on2.followers] == [("a", 1)]
    assert on2.leaders[0].registration.leader == 2 and on2.leaders[0].topic_id == t3
