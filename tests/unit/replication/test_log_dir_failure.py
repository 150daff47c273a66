"""Several log dirs and the failure of one (KIP-858), in LogManager and ReplicaManager:
placement on the online dir with the fewest partitions, each dir's id from meta.properties,
an I/O error taking exactly one dir offline (its partitions answer KAFKA_STORAGE_ERROR, the
others go on), the high-watermark checkpoint that finds a vanished dir, and the directory
assignments the controller is to be told."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.log import LogConfig, LogManager
from broker.protocol.kafka_uuid import uuid_to_kafka
from broker.protocol.records import Record, build_batch
from broker.replication import ReplicaManager
from broker.replication.replica_manager import REPLICATION_OFFSET_CHECKPOINT, FetchPartitionRequest

NODE = 1
TOPIC_ID = uuid.UUID(int=0x70)


def clock() -> int:
    return int(time.time() * 1000)


def batch(*values: bytes) -> bytes:
    return build_batch([Record(timestamp=1_700_000_000_000 + i, key=b"k", value=v)
                        for i, v in enumerate(values)])


def two_dirs(tmp_path: Path) -> tuple[LogManager, Path, Path]:
    a, b = tmp_path / "a", tmp_path / "b"
    for d, n in ((a, 0xA), (b, 0xB)):
        d.mkdir()
        (d / "meta.properties").write_text(
            f"version=1\ncluster.id=c\nnode.id=1\ndirectory.id={uuid_to_kafka(uuid.UUID(int=n))}\n")
    logs = LogManager([a, b], LogConfig(), clock)
    logs.load()
    return logs, a, b


def lead(rm: ReplicaManager, index: int, directory: uuid.UUID | None = None) -> None:
    rm.apply_partition(topic="t", topic_id=TOPIC_ID, index=index, leader=NODE, leader_epoch=0,
                       partition_epoch=0, replicas=(NODE, 2), isr=(NODE,),
                       min_insync_replicas=1, log_config=LogConfig(), directory=directory)


def break_dir(d: Path) -> None:
    """What a lost disk looks like to the next file created there: the path is no longer a
    directory (already open files keep working, as on Linux)."""
    os.rename(d, d.with_name(d.name + ".lost"))
    d.write_text("not a directory any more")


def test_dir_ids_come_from_meta_properties_and_placement_balances(tmp_path: Path) -> None:
    logs, a, b = two_dirs(tmp_path)
    assert logs.dir_id(a) == uuid.UUID(int=0xA) and logs.dir_id(b) == uuid.UUID(int=0xB)
    assert logs.dir_by_id(uuid.UUID(int=0xB)) == b
    for i in range(4):
        logs.get_or_create("t", i)
    assert [logs.log_dir_of("t", i) for i in range(4)] == [a, b, a, b]
    logs.shutdown()


def test_a_failed_dir_goes_offline_alone(tmp_path: Path) -> None:
    logs, a, b = two_dirs(tmp_path)
    told: list[Path] = []
    logs.dir_failure_listeners.append(told.append)
    for i in range(4):
        logs.get_or_create("t", i)
    logs.fail_dir(b, OSError(5, "Input/output error"))
    logs.fail_dir(b, "again")  # once only
    assert told == [b] and logs.offline_dirs == {b} and logs.online_dirs == [a]
    assert logs.get("t", 1) is None and logs.get("t", 0) is not None
    with pytest.raises(KafkaError) as exc:
        logs.get_or_create("t", 1)
    assert exc.value.error_code is ErrorCode.kafka_storage_error
    # new partitions go to the online dir only
    logs.get_or_create("t", 9)
    assert logs.log_dir_of("t", 9) == a
    logs.fail_dir(a, "last one")
    with pytest.raises(KafkaError) as exc:
        logs.get_or_create("t", 10)
    assert exc.value.error_code is ErrorCode.kafka_storage_error
    logs.shutdown()


def test_checkpoint_io_error_fails_that_dir(tmp_path: Path) -> None:
    logs, a, b = two_dirs(tmp_path)
    logs.get_or_create("t", 0)
    logs.get_or_create("t", 1)
    break_dir(b)
    logs.checkpoint_recovery_points()
    assert logs.offline_dirs == {b}
    assert logs.get("t", 0) is not None
    logs.shutdown()  # the clean marker is written in the online dir only
    assert (a / ".kafka_cleanshutdown").exists()


def test_replica_manager_serves_the_other_dir_and_queues_assignments(tmp_path: Path) -> None:
    async def go() -> None:
        logs, a, b = two_dirs(tmp_path)
        rm = ReplicaManager(NODE, logs, clock)
        lead(rm, 0, directory=uuid.UUID(int=0))   # unassigned: told where it went
        lead(rm, 1, directory=uuid.UUID(int=0xB))  # already known: nothing to tell
        assert rm.pending_assignments == {("t", 0): (TOPIC_ID, uuid.UUID(int=0xA))}
        rm.assignments_sent(dict(rm.pending_assignments))
        assert rm.pending_assignments == {}
        for i in (0, 1):
            res = await rm.append({("t", i): batch(b"before")}, required_acks=1, timeout_ms=100)
            assert not isinstance(res[("t", i)], KafkaError)
        break_dir(b)
        rm.checkpoint_high_watermarks()  # Kafka's replication-offset-checkpoint finds it
        assert logs.offline_dirs == {b}
        assert (a / REPLICATION_OFFSET_CHECKPOINT).read_text().startswith("0\n1\nt 0 ")
        res = await rm.append({("t", 0): batch(b"x"), ("t", 1): batch(b"y")},
                              required_acks=1, timeout_ms=100)
        assert not isinstance(res[("t", 0)], KafkaError)
        err = res[("t", 1)]
        assert isinstance(err, KafkaError) and err.error_code is ErrorCode.kafka_storage_error
        [r0, r1] = await rm.fetch(
            [FetchPartitionRequest("t", 0, 0, 1 << 20), FetchPartitionRequest("t", 1, 0, 1 << 20)],
            replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20)
        assert r0.error_code is ErrorCode.none and r0.size > 0
        assert r1.error_code is ErrorCode.kafka_storage_error
        # metadata does not bring it back; the controller is told where it was
        lead(rm, 1, directory=uuid.UUID(int=0xB))
        assert rm.get("t", 1) is None and ("t", 1) in rm.offline
        # (its directory was already known, so there is nothing more to tell)
        assert rm.pending_assignments == {}
        # once this broker is no replica any more, the partition is forgotten
        rm.apply_partition(topic="t", topic_id=TOPIC_ID, index=1, leader=2, leader_epoch=1,
                           partition_epoch=1, replicas=(2, 3), isr=(2,),
                           min_insync_replicas=1, log_config=LogConfig())
        assert ("t", 1) not in rm.offline and ("t", 1) not in logs.offline_logs
        logs.shutdown()
    asyncio.run(go())


def test_write_error_while_appending_fails_the_dir(tmp_path: Path) -> None:
    async def go() -> None:
        logs, _a, b = two_dirs(tmp_path)
        rm = ReplicaManager(NODE, logs, clock)
        lead(rm, 0)
        lead(rm, 1)
        part = rm.get("t", 1)
        assert part is not None

        def eio(*_a: object, **_k: object) -> None:
            raise OSError(5, "Input/output error")

        # the disk fails under the append (os, not the log's methods: the log may be
        # compiled, broker/native.py)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(os, "pwritev", eio)
            mp.setattr(os, "pwrite", eio)
            res = await rm.append({("t", 1): batch(b"x")}, required_acks=1, timeout_ms=100)
        err = res[("t", 1)]
        assert isinstance(err, KafkaError) and err.error_code is ErrorCode.kafka_storage_error
        assert logs.offline_dirs == {b} and ("t", 1) in rm.offline
        assert rm.pending_assignments[("t", 1)] == (TOPIC_ID, uuid.UUID(int=0xB))
        res = await rm.append({("t", 0): batch(b"y")}, required_acks=1, timeout_ms=100)
        assert not isinstance(res[("t", 0)], KafkaError)
        logs.shutdown()
    asyncio.run(go())


def test_a_dir_unusable_at_start_is_offline_from_the_start(tmp_path: Path) -> None:
    logs, a, b = two_dirs(tmp_path)
    logs.get_or_create("t", 0)
    logs.get_or_create("t", 1)
    logs.shutdown()
    break_dir(b)
    again = LogManager([a, b], LogConfig(), clock)
    again.load()
    assert again.offline_dirs == {b} and again.online_dirs == [a]
    assert again.get("t", 0) is not None and again.get("t", 1) is None
    again.shutdown()
    break_dir(a)
    with pytest.raises(KafkaError) as exc:
        LogManager([a, b], LogConfig(), clock).load()
    assert exc.value.error_code is ErrorCode.kafka_storage_error
