"""ListOffsets v0-11: earliest, latest, by timestamp, max timestamp, earliest local and latest
tiered; v0's offset lists."""

from __future__ import annotations

import datetime
import importlib
import time
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.handlers import list_offsets
from broker.protocol.kio_build import build
from tests.unit.handlers.conftest import TestNode, make_ctx, roundtrip, run
from tests.unit.handlers.datapath import (
    BASE_TS,
    create,
    produce_ok,
    produce_txn,
    records,
    schema_module,
    txn_records,
)

VERSIONS = range(1, 12)


def request(version: int, topic: str, timestamp: int, partition: int = 0) -> Any:
    m = importlib.import_module(f"kio.schema.list_offsets.v{version}.request")
    return build(m.ListOffsetsRequest, replica_id=-1, isolation_level=0,
                 timeout=datetime.timedelta(seconds=30), topics=(
        build(m.ListOffsetsTopic, name=topic, partitions=(
            build(m.ListOffsetsPartition, partition_index=partition, timestamp=timestamp,
                  current_leader_epoch=-1),)),))


async def lookup(node: TestNode, version: int, timestamp: int, topic: str = "t") -> Any:
    resp = await list_offsets.handle(node, make_ctx(2, version), request(version, topic, timestamp))
    roundtrip(resp)
    return resp.topics[0].partitions[0]


@pytest.mark.parametrize("version", VERSIONS)
def test_earliest_latest_and_timestamps(node: TestNode, version: int) -> None:
    async def go() -> None:
        await create(node, "t")
        await produce_ok(node, "t", records(b"a", b"b", b"c", ts=BASE_TS))        # 0..2
        await produce_ok(node, "t", records(b"d", b"e", ts=BASE_TS + 100))        # 3..4
        assert (await lookup(node, version, -2)).offset == 0
        assert (await lookup(node, version, -1)).offset == 5
        exact = await lookup(node, version, BASE_TS + 1)
        assert (exact.offset, exact.timestamp) == (1, BASE_TS + 1)
        assert (await lookup(node, version, BASE_TS + 50)).offset == 3
        past_end = await lookup(node, version, BASE_TS + 10_000)
        assert (past_end.error_code, past_end.offset, past_end.timestamp) == (
            ErrorCode.none, -1, -1)
        if version >= 7:
            newest = await lookup(node, version, -3)
            assert (newest.offset, newest.timestamp) == (4, BASE_TS + 101)
        if version >= 8:
            node.replicas.get("t", 0).log.delete_records_before(1)
            # Earliest local: the log start, with its epoch (the whole log is local).
            local = await lookup(node, version, -4)
            assert (local.error_code, local.offset, local.timestamp, local.leader_epoch) == (
                ErrorCode.none, 1, -1, node.topic("t").partitions[0].leader_epoch)
        if version >= 9:
            # Latest tiered: nothing is tiered, answered as Kafka without remote storage.
            tiered = await lookup(node, version, -5)
            assert (tiered.error_code, tiered.offset, tiered.timestamp, tiered.leader_epoch) == (
                ErrorCode.none, -1, -1, -1)
        if version >= 11:
            # Earliest pending upload (KIP-1023): nothing is tiered either.
            pending = await lookup(node, version, -6)
            assert (pending.error_code, pending.offset, pending.timestamp,
                    pending.leader_epoch) == (ErrorCode.none, -1, -1, -1)
        # A special timestamp newer than the version, or unknown: UNSUPPORTED_VERSION for
        # the partition, as Kafka 4.4 answers (seen against the reference node).
        for ts, since in ((-3, 7), (-4, 8), (-5, 9), (-6, 11), (-7, 99)):
            if version < since:
                refused = await lookup(node, version, ts)
                assert (refused.error_code, refused.offset) == (
                    ErrorCode.unsupported_version, -1), (version, ts)
    run(go())


def test_unknown_partition(node: TestNode) -> None:
    async def go() -> None:
        part = await lookup(node, 7, -1, topic="missing")
        assert part.error_code is ErrorCode.unknown_topic_or_partition
    run(go())


def test_after_delete_records_earliest_moves(node: TestNode) -> None:
    async def go() -> None:
        await create(node, "t")
        await produce_ok(node, "t", records(b"a", b"b", b"c"))
        node.replicas.get("t", 0).log.delete_records_before(2)
        assert (await lookup(node, 7, -2)).offset == 2
    run(go())


def v0_request(topic: str, timestamp: int, max_num_offsets: int, partition: int = 0) -> Any:
    m = schema_module("list_offsets", 0)
    return build(m.ListOffsetsRequest, replica_id=-1, topics=(
        build(m.ListOffsetsTopic, name=topic, partitions=(
            build(m.ListOffsetsPartition, partition_index=partition, timestamp=timestamp,
                  max_num_offsets=max_num_offsets),)),))


def test_v0_old_style_offsets(node: TestNode) -> None:
    """v0: up to max_num_offsets offsets, newest first, from segment bases and the log end."""
    async def go() -> None:
        await create(node, "t")
        await produce_ok(node, "t", records(b"a", b"b"))          # 0..1
        node.replicas.get("t", 0).log.roll()                       # segment at 2
        await produce_ok(node, "t", records(b"c", b"d", b"e"))    # 2..4

        async def ask(timestamp: int, n: int, topic: str = "t") -> Any:
            resp = await list_offsets.handle(node, make_ctx(2, 0), v0_request(topic, timestamp, n))
            roundtrip(resp)
            return resp.topics[0].partitions[0]

        latest = await ask(-1, 10)
        assert (latest.error_code, latest.old_style_offsets) == (ErrorCode.none, (5, 2, 0))
        assert (await ask(-1, 1)).old_style_offsets == (5,)
        assert (await ask(-2, 1)).old_style_offsets == (0,)
        assert (await ask(-2, 5)).old_style_offsets == (0,)
        far_future = int(time.time() * 1000) + 3_600_000
        assert (await ask(far_future, 10)).old_style_offsets == (5, 2, 0)
        assert (await ask(1, 10)).old_style_offsets == ()  # before every segment
        missing = await ask(-1, 1, topic="nope")
        assert (missing.error_code, missing.old_style_offsets) == (
            ErrorCode.unknown_topic_or_partition, ())
    run(go())


@pytest.mark.parametrize("version", [2, 5, 7])
def test_read_committed_latest_is_the_lso(node: TestNode, version: int) -> None:
    async def go() -> None:
        await create(node, "t")
        await produce_ok(node, "t", records(b"a", ts=BASE_TS))                    # 0
        await produce_txn(node, "t", txn_records(4, 0, 0, b"t", ts=BASE_TS + 50))  # 1
        await produce_ok(node, "t", records(b"b", ts=BASE_TS + 100))              # 2
        m = importlib.import_module(f"kio.schema.list_offsets.v{version}.request")

        async def ask(isolation: int, timestamp: int) -> Any:
            req = build(m.ListOffsetsRequest, replica_id=-1, isolation_level=isolation,
                        topics=(build(m.ListOffsetsTopic, name="t", partitions=(
                            build(m.ListOffsetsPartition, partition_index=0,
                                  timestamp=timestamp, current_leader_epoch=-1),)),))
            resp = await list_offsets.handle(node, make_ctx(2, version), req)
            roundtrip(resp)
            return resp.topics[0].partitions[0]

        assert (await ask(1, -1)).offset == 1
        assert (await ask(0, -1)).offset == 3
        assert (await ask(1, BASE_TS + 100)).offset == -1   # at/after the LSO: not found
        assert (await ask(0, BASE_TS + 100)).offset == 2
    run(go())


def test_latest_on_a_leader_whose_high_watermark_is_stale_is_offset_not_available(
        tmp_path: Path) -> None:
    """KIP-207: until the followers bring a new leader's high watermark up to where its
    epoch began, a consumer's LATEST is OFFSET_NOT_AVAILABLE (retried by clients), not the
    stale high watermark; a follower's ListOffsets (replica_id set) is answered."""
    from broker.errors import KafkaError
    from broker.log import LogConfig, PartitionLog, TopicPartition
    from broker.protocol.records import Record, build_batch
    from broker.replication.partition import LATEST_TIMESTAMP, Partition

    plog = PartitionLog(tmp_path / "t-0", TopicPartition("t", 0), LogConfig(),
                        clock=lambda: BASE_TS)
    for i in range(40):  # written in epoch 3, under the previous leader
        plog.append_as_leader(build_batch([Record(offset=0, timestamp=BASE_TS, key=None,
                                                  value=b"%d" % i, headers=())]), 3, BASE_TS)
    part = Partition(topic="t", index=0, topic_id=None, log=plog, clock=lambda: BASE_TS,
                     node_id=1)
    part.become_leader(leader_epoch=4, partition_epoch=1, replicas=(1, 2), isr=(1, 2),
                       min_insync_replicas=1)
    try:
        assert part.high_watermark < part.leader_epoch_start_offset == 40
        epoch = plog.epoch_cache.epoch_for_offset(40)
        with pytest.raises(KafkaError) as refused:
            part.fetch_offset_for_timestamp(LATEST_TIMESTAMP, replica_id=-1)
        assert refused.value.error_code is ErrorCode.offset_not_available
        assert part.fetch_offset_for_timestamp(LATEST_TIMESTAMP, replica_id=2) == (-1, 40, epoch)
        part.high_watermark = 40
        assert part.fetch_offset_for_timestamp(LATEST_TIMESTAMP, replica_id=-1) == (-1, 40, epoch)
    finally:
        plog.close()
