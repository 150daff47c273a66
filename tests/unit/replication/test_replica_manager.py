import asyncio
import time

import pytest
from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.log import LogConfig, LogManager
from broker.protocol.records import Record, build_batch, decode_records
from broker.replication import ReplicaManager, Role
from broker.replication.replica_manager import FetchPartitionRequest

NODE = 1
pytestmark = pytest.mark.anyio


def batch(*values: bytes) -> bytes:
    return build_batch([Record(timestamp=1_700_000_000_000 + i, key=b"k", value=v)
                        for i, v in enumerate(values)])


@pytest.fixture
def manager(tmp_path):
    logs = LogManager([tmp_path], LogConfig(), lambda: int(time.time() * 1000))
    logs.load()
    rm = ReplicaManager(NODE, logs, lambda: int(time.time() * 1000))
    yield rm
    logs.shutdown()


def lead(rm: ReplicaManager, topic="t", index=0, replicas=(NODE,), isr=(NODE,), min_isr=1, epoch=0):
    rm.apply_partition(topic=topic, topic_id=None, index=index, leader=NODE, leader_epoch=epoch,
                       partition_epoch=0, replicas=replicas, isr=isr, min_insync_replicas=min_isr,
                       log_config=LogConfig())


def fetch_req(offset=0, topic="t", index=0, max_bytes=1 << 20, epoch=-1):
    return FetchPartitionRequest(topic=topic, partition=index, fetch_offset=offset,
                                 partition_max_bytes=max_bytes, current_leader_epoch=epoch)


async def test_append_then_fetch_returns_the_same_records(manager):
    lead(manager)
    res = await manager.append({("t", 0): batch(b"a", b"b")}, required_acks=-1, timeout_ms=1000)
    assert res[("t", 0)].base_offset == 0
    out = await manager.fetch([fetch_req()], replica_id=-1, max_wait_ms=0, min_bytes=1,
                              max_bytes=1 << 20)
    assert out[0].error_code is ErrorCode.none
    assert out[0].high_watermark == 2
    assert [r.value for r in decode_records(out[0].records.read_bytes())] == [b"a", b"b"]


async def test_unknown_partition_and_not_leader(manager):
    res = await manager.append({("nope", 0): batch(b"x")}, required_acks=1, timeout_ms=100)
    assert res[("nope", 0)].error_code is ErrorCode.unknown_topic_or_partition
    manager.apply_partition(topic="f", topic_id=None, index=0, leader=2, leader_epoch=3,
                            partition_epoch=0, replicas=(2, NODE), isr=(2, NODE),
                            min_insync_replicas=1, log_config=LogConfig())
    assert manager.get("f", 0).role is Role.FOLLOWER
    res = await manager.append({("f", 0): batch(b"x")}, required_acks=1, timeout_ms=100)
    assert res[("f", 0)].error_code is ErrorCode.not_leader_or_follower
    out = await manager.fetch([fetch_req(topic="f")], replica_id=-1, max_wait_ms=0, min_bytes=1,
                              max_bytes=100)
    assert out[0].error_code is ErrorCode.not_leader_or_follower
    assert (out[0].leader_id, out[0].leader_epoch) == (2, 3)


async def test_long_poll_wakes_on_append_not_on_timeout(manager):
    lead(manager)
    loop = asyncio.get_running_loop()

    async def produce_later():
        await asyncio.sleep(0.05)
        await manager.append({("t", 0): batch(b"late")}, required_acks=1, timeout_ms=100)

    started = loop.time()
    task = asyncio.create_task(produce_later())
    out = await manager.fetch([fetch_req()], replica_id=-1, max_wait_ms=5000, min_bytes=1,
                              max_bytes=1 << 20)
    elapsed = loop.time() - started
    await task
    assert out[0].records.length > 0
    assert 0.04 <= elapsed < 1.0


async def test_long_poll_times_out_with_empty_records(manager):
    lead(manager)
    loop = asyncio.get_running_loop()
    started = loop.time()
    out = await manager.fetch([fetch_req()], replica_id=-1, max_wait_ms=100, min_bytes=1,
                              max_bytes=1 << 20)
    assert 0.09 <= loop.time() - started < 1.0
    assert out[0].error_code is ErrorCode.none and out[0].size == 0


async def test_acks_all_waits_for_follower_and_times_out_without_it(manager):
    lead(manager, replicas=(NODE, 2), isr=(NODE, 2), min_isr=2)
    res = await manager.append({("t", 0): batch(b"x")}, required_acks=-1, timeout_ms=100)
    assert res[("t", 0)].error_code is ErrorCode.request_timed_out
    # The follower's fetch at offset 1 says it holds offset 0: now acks=all completes at once.
    task = asyncio.create_task(
        manager.append({("t", 0): batch(b"y")}, required_acks=-1, timeout_ms=2000))
    await asyncio.sleep(0.01)
    await manager.fetch([fetch_req(offset=2)], replica_id=2, max_wait_ms=0, min_bytes=0,
                        max_bytes=100)
    res = await task
    assert res[("t", 0)].base_offset == 1
    assert manager.get("t", 0).high_watermark == 2


async def test_consumers_do_not_see_past_the_high_watermark(manager):
    lead(manager, replicas=(NODE, 2), isr=(NODE, 2), min_isr=1)
    await manager.append({("t", 0): batch(b"x")}, required_acks=1, timeout_ms=100)
    out = await manager.fetch([fetch_req()], replica_id=-1, max_wait_ms=0, min_bytes=1,
                              max_bytes=1 << 20)
    assert out[0].high_watermark == 0 and out[0].size == 0
    follower = await manager.fetch([fetch_req()], replica_id=2, max_wait_ms=0, min_bytes=1,
                                   max_bytes=1 << 20)
    assert follower[0].size > 0


async def test_followers_wait_for_the_log_end_and_consumers_for_the_high_watermark(manager):
    lead(manager, replicas=(NODE, 2, 3), isr=(NODE, 2, 3), min_isr=2)
    part = manager.get("t", 0)
    await manager.append({("t", 0): batch(b"x")}, required_acks=1, timeout_ms=100)
    for replica in (2, 3):
        await manager.fetch([fetch_req(offset=0)], replica_id=replica, max_wait_ms=0,
                            min_bytes=1, max_bytes=1 << 20)
    follower = part.new_waiter(for_log_end=True)
    consumer = part.new_waiter()
    # Follower 2 holds offset 0; follower 3's fetch then moves the high watermark.
    await manager.fetch([fetch_req(offset=1)], replica_id=2, max_wait_ms=0, min_bytes=0,
                        max_bytes=100)
    assert part.high_watermark == 0 and not consumer.done()
    await manager.fetch([fetch_req(offset=1)], replica_id=3, max_wait_ms=0, min_bytes=0,
                        max_bytes=100)
    assert part.high_watermark == 1
    assert consumer.done() and not follower.done()
    await manager.append({("t", 0): batch(b"y")}, required_acks=1, timeout_ms=100)
    assert follower.done()


async def test_not_enough_replicas_for_acks_all_below_min_isr(manager):
    lead(manager, replicas=(NODE, 2), isr=(NODE,), min_isr=2)
    res = await manager.append({("t", 0): batch(b"x")}, required_acks=-1, timeout_ms=100)
    assert isinstance(res[("t", 0)], KafkaError)
    assert res[("t", 0)].error_code is ErrorCode.not_enough_replicas
    res = await manager.append({("t", 0): batch(b"x")}, required_acks=1, timeout_ms=100)
    assert res[("t", 0)].base_offset == 0


async def test_fenced_and_unknown_leader_epoch(manager):
    lead(manager, epoch=5)
    for epoch, code in ((4, ErrorCode.fenced_leader_epoch), (6, ErrorCode.unknown_leader_epoch)):
        out = await manager.fetch([fetch_req(epoch=epoch)], replica_id=-1, max_wait_ms=0,
                                  min_bytes=1, max_bytes=100)
        assert out[0].error_code is code


async def test_max_bytes_spans_partitions_but_first_gets_one_batch(manager):
    lead(manager, index=0)
    lead(manager, index=1)
    big = batch(b"x" * 5000)
    await manager.append({("t", 0): big, ("t", 1): big}, required_acks=1, timeout_ms=100)
    out = await manager.fetch([fetch_req(index=0), fetch_req(index=1)], replica_id=-1,
                              max_wait_ms=0, min_bytes=1, max_bytes=100)
    assert out[0].size == len(big)  # KIP-74: at least one batch, even above max_bytes
    assert out[1].size == 0


async def test_remove_deletes_the_log(manager, tmp_path):
    lead(manager)
    assert (tmp_path / "t-0").is_dir()
    manager.remove("t", 0, delete_log=True)
    assert manager.get("t", 0) is None
    assert not (tmp_path / "t-0").exists()


async def test_only_assigned_replicas_fetch_as_followers(manager):
    lead(manager, replicas=(NODE, 2), isr=(NODE, 2), min_isr=1)
    await manager.append({("t", 0): batch(b"x")}, required_acks=1, timeout_ms=100)
    out = await manager.fetch([fetch_req(offset=1)], replica_id=7, max_wait_ms=0, min_bytes=1,
                              max_bytes=1 << 20)
    assert out[0].error_code is ErrorCode.not_leader_or_follower
    assert out[0].size == 0
    assert manager.get("t", 0).high_watermark == 0  # a stranger does not move it


def test_wait_first_returns_on_the_first_waiter_or_the_timeout_and_cancels_the_rest() -> None:
    from broker.replication.replica_manager import wait_first

    async def main() -> None:
        loop = asyncio.get_running_loop()
        a, b = loop.create_future(), loop.create_future()
        loop.call_later(0.01, b.set_result, None)
        t0 = loop.time()
        await wait_first([a, b], 5.0)
        assert loop.time() - t0 < 1.0
        assert a.cancelled() and b.done()

        c = loop.create_future()
        t0 = loop.time()
        await wait_first([c], 0.05)  # nobody wakes it: the timeout ends the wait
        assert 0.04 <= loop.time() - t0 < 1.0
        assert c.done()

        d = loop.create_future()
        task = loop.create_task(wait_first([d], 5.0))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert d.cancelled()

    asyncio.run(main())


def test_producer_id_expiration_ms_reaches_every_partition(tmp_path) -> None:
    """producer.id.expiration.ms (Kafka's: a producer idle that long is forgotten) is read
    from the broker config and applied by each partition this broker hosts: a producer whose
    last batch is older than it is gone at the next expiry check, one more recent is kept."""
    from broker.config import build_config
    from broker.replication import ReplicationSettings
    from broker.replication.partition import PRODUCER_ID_EXPIRATION_CHECK_MS

    cfg = build_config({
        "process.roles": "broker,controller", "node.id": "1",
        "controller.quorum.voters": "1@127.0.0.1:19093",
        "listeners": "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093",
        "controller.listener.names": "CONTROLLER", "log.dirs": str(tmp_path),
        "producer.id.expiration.ms": "60000",
    })
    settings = ReplicationSettings.from_config(cfg)
    assert settings.producer_id_expiration_ms == 60_000
    assert ReplicationSettings().producer_id_expiration_ms == 86_400_000  # Kafka's default
    ts = 1_700_000_000_000
    now = [ts]
    logs = LogManager([tmp_path], LogConfig(), lambda: now[0])
    logs.load()
    rm = ReplicaManager(NODE, logs, lambda: now[0], settings=settings)
    try:
        lead(rm)
        lead(rm, index=1)
        for index in (0, 1):
            part = rm.get("t", index)
            assert part.producer_id_expiration_ms == 60_000
            part.append_as_leader(build_batch(
                [Record(timestamp=ts, key=b"k", value=b"a")], producer_id=7,
                producer_epoch=0, base_sequence=0), required_acks=1)
            assert part.producer_state.entry(7) is not None
        # next expiry check, the producer idle for more than 60 s (but far less than a day)
        now[0] = ts + PRODUCER_ID_EXPIRATION_CHECK_MS
        for index in (0, 1):
            part = rm.get("t", index)
            part.append_as_leader(build_batch(
                [Record(timestamp=now[0], key=b"k", value=b"b")], producer_id=8,
                producer_epoch=0, base_sequence=0), required_acks=1)
            assert part.producer_state.entry(7) is None, index
            assert part.producer_state.entry(8) is not None
    finally:
        logs.shutdown()
