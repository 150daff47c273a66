from __future__ import annotations

import contextlib
import random
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.controller import (
    AlterConfigOp,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    ConfigResource,
    Controller,
    ControllerSettings,
    CreatableTopic,
    CreatePartitionsTopic,
    IncrementalAlterConfigsResource,
)
from broker.metadata import InvalidRecordError, MetadataImage, apply_records
from broker.metadata import records as rec
from broker.metadata.records import RESOURCE_BROKER, RESOURCE_TOPIC
from broker.metadata.snapshot import (
    decode_snapshot,
    delete_snapshots_before,
    encode_snapshot,
    image_from_records,
    image_to_records,
    list_snapshots,
    load_latest_snapshot,
    snapshot_name,
    write_snapshot,
)

NAMES = ["a", "b", "c.d", "e_f", "g"]

op = st.one_of(
    st.tuples(st.just("register"), st.integers(0, 4), st.sampled_from(["r1", "r2", None])),
    st.tuples(st.just("heartbeat"), st.integers(0, 4), st.sampled_from(["", "fence", "shut"])),
    st.tuples(st.just("create"), st.sampled_from(NAMES), st.integers(1, 6), st.integers(1, 3)),
    st.tuples(st.just("delete"), st.sampled_from(NAMES)),
    st.tuples(st.just("partitions"), st.sampled_from(NAMES), st.integers(1, 8)),
    st.tuples(st.just("config"), st.sampled_from(NAMES),
              st.sampled_from(["retention.ms", "segment.bytes", "min.insync.replicas"]),
              st.sampled_from(["1", "2", "1048576", None])),
    st.tuples(st.just("broker_config"), st.sampled_from(["", "0", "1"]),
              st.sampled_from(["100", None])),
    st.tuples(st.just("tick"), st.integers(0, 4_000)),
    st.tuples(st.just("heartbeat"), st.integers(0, 2), st.just("")),
    st.tuples(st.just("create"), st.sampled_from(NAMES), st.integers(1, 3), st.integers(1, 2)),
    st.tuples(st.just("pids"), st.integers(0, 4)),
)


def run_ops(ops, seed: int) -> tuple[MetadataImage, list[list]]:
    """Drive a controller with random requests; returns the image and the committed batches."""
    c = Controller(ControllerSettings(cluster_id="c", broker_session_timeout_ms=9000),
                   random.Random(seed))
    image = MetadataImage.empty("c")
    batches: list[list] = []
    now = 0

    def commit(records):
        nonlocal image
        if records:
            image = apply_records(image, records, image.offset + len(records), 3)
            batches.append(list(records))

    preamble = [("register", b, ["r1", "r2", None][b]) for b in range(3)] + \
        [("heartbeat", b, "") for b in range(3)]
    for o in [*preamble, *ops]:
        now += 100
        kind = o[0]
        if kind == "register":
            r = c.register_broker(image, BrokerRegistrationRequest(
                o[1], "c", uuid.UUID(int=o[1] + 1), [("PLAINTEXT", "h", 9000 + o[1], "PLAINTEXT")],
                rack=o[2], previous_broker_epoch=image.brokers[o[1]].epoch
                if o[1] in image.brokers else -1), now)
            commit(r.records)
        elif kind == "heartbeat" and o[1] in image.brokers:
            b = image.brokers[o[1]]
            r = c.broker_heartbeat(image, BrokerHeartbeatRequest(
                o[1], b.epoch, image.offset, want_fence=o[2] == "fence",
                want_shut_down=o[2] == "shut"), now)
            commit(r.records)
        elif kind == "create":
            commit(c.create_topics(image, [CreatableTopic(o[1], o[2], o[3])]).records)
        elif kind == "delete":
            commit(c.delete_topics(image, names=[o[1]]).records)
        elif kind == "partitions":
            commit(c.create_partitions(image, [CreatePartitionsTopic(o[1], o[2])]).records)
        elif kind == "config":
            act = AlterConfigOp.SET if o[3] is not None else AlterConfigOp.DELETE
            commit(c.incremental_alter_configs(image, [IncrementalAlterConfigsResource(
                ConfigResource(RESOURCE_TOPIC, o[1]), [(o[2], act, o[3])])]).records)
        elif kind == "broker_config":
            act = AlterConfigOp.SET if o[2] is not None else AlterConfigOp.DELETE
            commit(c.incremental_alter_configs(image, [IncrementalAlterConfigsResource(
                ConfigResource(RESOURCE_BROKER, o[1]), [("log.retention.ms", act, o[2])])]
            ).records)
        elif kind == "tick":
            now += o[1]
            commit(c.tick(image, now))
        elif kind == "pids" and o[1] in image.brokers:
            commit(c.allocate_producer_ids(image, o[1], image.brokers[o[1]].epoch).records)
    return image, batches


def check_invariants(image: MetadataImage) -> None:
    assert len(image.topics_by_id) == len(image.topics_by_name)
    for name, t in image.topics_by_name.items():
        assert image.topics_by_id[t.topic_id] is t and t.name == name
        assert sorted(t.partitions) == list(range(len(t.partitions)))
        for p in t.partitions.values():
            assert set(p.isr) <= set(p.replicas) and set(p.elr) <= set(p.replicas)
            assert not set(p.isr) & set(p.elr)
            if p.leader != -1:
                assert p.leader in p.isr
                assert image.is_alive(p.leader)
    for (rtype, rname) in image.configs:
        if rtype == RESOURCE_TOPIC:
            assert rname in image.topics_by_name


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(op, max_size=40), seed=st.integers(0, 1000), cut=st.integers(0, 100))
def test_snapshot_round_trip_and_snapshot_plus_tail(ops, seed, cut):
    image, batches = run_ops(ops, seed)
    check_invariants(image)
    # records -> image
    rebuilt = image_from_records(image_to_records(image), image.cluster_id, image.offset,
                                 image.epoch, image.last_broker_epoch)
    assert rebuilt == image
    # bytes -> image
    assert decode_snapshot(encode_snapshot(image)) == image
    # restart: snapshot at some batch, then replay the tail
    k = cut % (len(batches) + 1)
    head = MetadataImage.empty("c")
    for b in batches[:k]:
        head = apply_records(head, b, head.offset + len(b), 3)
    restored = decode_snapshot(encode_snapshot(head))
    for b in batches[k:]:
        restored = apply_records(restored, b, restored.offset + len(b), 3)
    assert restored == image


def _sample_image() -> MetadataImage:
    ops = [("register", 0, "r1"), ("register", 1, None), ("heartbeat", 0, ""),
           ("heartbeat", 1, ""), ("create", "a", 3, 2), ("config", "a", "retention.ms", "1"),
           ("broker_config", "", "100"), ("pids", 0)]
    image, _ = run_ops(ops, 1)
    assert image.topic("a") and image.next_producer_id and image.broker_config()
    return image


def test_snapshot_files(tmp_path: Path):
    image = _sample_image()
    p = write_snapshot(tmp_path, image)
    assert p.name == snapshot_name(image.offset, image.epoch)
    assert p.name == f"{image.offset + 1:020d}-{image.epoch:010d}.checkpoint"
    assert load_latest_snapshot(tmp_path) == image
    newer = apply_records(image, [rec.topic_record("zz", uuid.UUID(int=99))],
                          image.offset + 1, image.epoch + 1)
    p2 = write_snapshot(tmp_path, newer)
    assert load_latest_snapshot(tmp_path) == newer
    assert [x[2] for x in list_snapshots(tmp_path)] == [p, p2]
    # a torn newest file is skipped in favour of the previous one
    data = p2.read_bytes()
    p2.write_bytes(data[: len(data) // 2])
    assert load_latest_snapshot(tmp_path) == image
    assert delete_snapshots_before(tmp_path, image.offset + 2) == [p]
    assert load_latest_snapshot(tmp_path) is None
    assert load_latest_snapshot(tmp_path / "missing") is None


@pytest.mark.parametrize("mutate", [
    lambda b: b[:-1],
    lambda b: b[:3],
    lambda b: b"",
    lambda b: b[:8] + bytes([b[8] ^ 0xFF]) + b[9:],        # CRC mismatch
    lambda b: b"\x7f\xff\xff\xff" + b[4:],                 # absurd length, not allocated
    lambda b: b + b"\x00\x00\x00\x01\x00\x00\x00\x00\x00",  # extra frame, count mismatch
])
def test_corrupt_snapshots_are_rejected(mutate):
    data = encode_snapshot(_sample_image())
    with pytest.raises(InvalidRecordError):
        decode_snapshot(mutate(data))


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_never_crash_the_decoder(data):
    with contextlib.suppress(InvalidRecordError):
        decode_snapshot(data)


def test_snapshot_policy():
    from broker.metadata.snapshot import SnapshotPolicy
    p = SnapshotPolicy(max_bytes_between=100, max_interval_ms=1000, now_ms=0)
    assert not p.due(10_000)  # nothing applied since: never
    p.applied(99)
    assert not p.due(999) and p.due(1000)
    p.taken(1000)
    p.applied(100)
    assert p.due(1001)
    p.taken(1001)
    off = SnapshotPolicy(100, 0, 0)
    off.applied(1)
    assert not off.due(10**9)
    from broker.config import build_config
    cfg = build_config({"process.roles": "controller", "node.id": "0",
                        "controller.quorum.voters": "0@h:9093",
                        "listeners": "CONTROLLER://:9093",
                        "controller.listener.names": "CONTROLLER"})
    d = SnapshotPolicy.from_config(cfg, 0)
    assert (d.max_bytes_between, d.max_interval_ms) == (20 * 1024 * 1024, 3_600_000)


def test_log_dirs_and_replica_directories_survive_a_snapshot() -> None:
    """KIP-858 state: a broker's online log dirs after one went offline, each replica's
    directory, and directories following replicas through a reassignment."""
    from broker.metadata.image import UNASSIGNED_DIR
    from broker.metadata.records import pb
    from broker.metadata.snapshot import decode_snapshot, encode_snapshot, image_from_records

    a, b, tid = uuid.UUID(int=0xA), uuid.UUID(int=0xB), uuid.UUID(int=0x7)
    reg = pb.RegisterBroker(broker_id=1, incarnation_id=uuid.UUID(int=5).bytes,
                            broker_epoch=3, log_dirs=[a.bytes, b.bytes])
    change = pb.BrokerRegistrationChange(broker_id=1, broker_epoch=3)
    change.log_dirs.ids.append(a.bytes)
    change.log_dirs.SetInParent()
    move = pb.PartitionChange(topic_id=tid.bytes, partition_id=0)
    move.replicas.ids.extend([1, 3])
    move.replicas.SetInParent()
    image = image_from_records([
        rec.wrap(reg), rec.topic_record("t", tid),
        rec.partition_record(tid, 0, [1, 2], [1, 2], 1, directories=[b, a]),
        rec.wrap(change), rec.wrap(move)])
    assert image.brokers[1].log_dirs == (a,)
    p = image.partition("t", 0)
    assert p is not None and p.directories == (b, UNASSIGNED_DIR)  # 1 kept its dir
    back = decode_snapshot(encode_snapshot(image))
    assert back.brokers[1].log_dirs == (a,)
    assert back.partition("t", 0) == p
