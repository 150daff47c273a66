"""Replication between real ReplicaManagers over loopback: follower fetch, high watermark,
acks=all, ISR changes through the controller, leader changes."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

from kio.schema.errors import ErrorCode
from structlog.testing import capture_logs

from broker.controller.requests import AlterPartitionReply, AlterPartitionRequest
from broker.protocol.records import Record, build_batch
from broker.replication import Role
from broker.testing.inprocess_cluster import FAST, Cluster, batch, eventually, now_ms, run


def test_followers_catch_up_and_the_high_watermark_follows(tmp_path: Path) -> None:
    async def main() -> None:
        c = Cluster(tmp_path)
        await c.start()
        try:
            await c.create_topic("t", [1, 2, 3], min_isr=2)
            leader = c.leader("t")
            assert leader.node_id == 1
            lp = leader.replicas.get("t", 0)
            res = await leader.replicas.append({("t", 0): batch(b"a", b"b", b"c")},
                                               required_acks=-1, timeout_ms=5000)
            assert res[("t", 0)].base_offset == 0
            # acks=all answered only once the ISR holds the batch.
            assert lp.high_watermark == 3
            for b in (2, 3):
                fp = c.brokers[b].replicas.get("t", 0)
                assert fp.role is Role.FOLLOWER
                assert fp.log.log_end_offset >= 3
                assert c.brokers[b].fetchers.source_of("t", 0) == 1
            # Followers learn the high watermark on their next fetch.
            await eventually(lambda: all(
                c.brokers[b].replicas.get("t", 0).high_watermark == 3 for b in (2, 3)),
                what="follower high watermarks")
            follower_bytes = c.brokers[2].replicas.get("t", 0).log.read(0, 1 << 20, 3).read_bytes()
            assert follower_bytes == lp.log.read(0, 1 << 20, 3).read_bytes()
            # DeleteRecords on the leader: followers move their log start along.
            lp.log.delete_records_before(2)
            await leader.replicas.append({("t", 0): batch(b"d")}, required_acks=-1,
                                         timeout_ms=5000)
            await eventually(lambda: all(
                c.brokers[b].replicas.get("t", 0).log.log_start_offset == 2 for b in (2, 3)),
                what="follower log start offsets")
        finally:
            await c.stop()

    run(main)


def test_acks_all_waits_for_the_isr_which_shrinks_and_expands(tmp_path: Path) -> None:
    async def main() -> None:
        c = Cluster(tmp_path)
        await c.start()
        try:
            await c.create_topic("t", [1, 2, 3], min_isr=2)
            leader = c.brokers[1]
            lp = leader.replicas.get("t", 0)
            await c.brokers[3].fetchers.stop()  # broker 3 stops fetching (paused)
            loop = asyncio.get_running_loop()
            started = loop.time()
            res = await leader.replicas.append({("t", 0): batch(b"x")}, required_acks=-1,
                                               timeout_ms=5000)
            waited = loop.time() - started
            assert res[("t", 0)].base_offset == 0
            # Answered only after replica.lag.time.max.ms (0.4 s) dropped broker 3.
            assert waited >= 0.3, waited
            assert c.metadata.partition("t", 0).isr == (1, 2)
            assert lp.isr == (1, 2) and lp.high_watermark == 1
            shrink = c.alter_calls[-1]
            [(topic_id, [item])] = shrink.topics
            assert topic_id == c.metadata.topic("t").topic_id
            assert [b for b, _ in item.new_isr] == [1, 2]
            assert dict(item.new_isr)[1] == leader.broker_epoch
            # Broker 2 fetches with v15+ ReplicaState: its broker epoch is known and sent.
            assert dict(item.new_isr)[2] == c.brokers[2].broker_epoch
            # Broker 3 resumes, catches up and is added back.
            c.brokers[3].fetchers.start()
            await eventually(lambda: c.metadata.partition("t", 0).isr == (1, 2, 3),
                             what="ISR expansion")
            assert lp.isr == (1, 2, 3)
            assert c.brokers[3].replicas.get("t", 0).log.log_end_offset == 1
            # With both followers gone the ISR shrinks below min.insync.replicas.
            await c.brokers[2].fetchers.stop()
            await c.brokers[3].fetchers.stop()
            await eventually(lambda: lp.isr == (1,), what="ISR shrink to the leader")
            res = await leader.replicas.append({("t", 0): batch(b"y")}, required_acks=-1,
                                               timeout_ms=1000)
            assert res[("t", 0)].error_code is ErrorCode.not_enough_replicas
            ok = await leader.replicas.append({("t", 0): batch(b"y")}, required_acks=1,
                                              timeout_ms=1000)
            assert ok[("t", 0)].base_offset == 1
            # Strict min ISR: the high watermark does not move with an ISR of one.
            assert lp.high_watermark == 1
        finally:
            await c.stop()

    run(main)


def test_refused_isr_change_is_dropped_and_retried(tmp_path: Path) -> None:
    async def main() -> None:
        c = Cluster(tmp_path)
        refusals = 0

        async def refuse_first(req: AlterPartitionRequest) -> AlterPartitionReply:
            nonlocal refusals
            if refusals < 2:
                refusals += 1
                # As if another change had bumped the partition epoch meanwhile.
                stale = AlterPartitionRequest(
                    broker_id=req.broker_id, broker_epoch=req.broker_epoch,
                    topics=[(tid, [dataclasses.replace(i, partition_epoch=i.partition_epoch - 1)
                                   for i in items]) for tid, items in req.topics])
                return await c.controller_alter_partition(stale)
            return await c.controller_alter_partition(req)

        await c.start()
        try:
            await c.create_topic("t", [1, 2], min_isr=1)
            await c.brokers[2].fetchers.stop()
            c.alter_hook = refuse_first
            lp = c.brokers[1].replicas.get("t", 0)
            await eventually(lambda: lp.isr == (1,), what="ISR shrink after refusals")
            errors = [r.topics[0][1][0].error for r in c.alter_replies]
            assert errors[:2] == [ErrorCode.invalid_update_version] * 2
            assert errors[2] is ErrorCode.none
            assert lp.pending_isr is None
            assert lp.partition_epoch == c.metadata.partition("t", 0).partition_epoch
        finally:
            await c.stop()

    run(main)


def test_leader_change_moves_the_partition_to_another_fetcher(tmp_path: Path) -> None:
    async def main() -> None:
        c = Cluster(tmp_path, settings=dataclasses.replace(FAST, lag_time_max_ms=10_000))
        await c.start()
        try:
            await c.create_topic("t", [1, 2, 3], min_isr=2)
            await c.brokers[1].replicas.append({("t", 0): batch(b"a")}, required_acks=-1,
                                               timeout_ms=5000)
            assert c.brokers[3].fetchers.source_of("t", 0) == 1
            await c.heartbeat(1, want_fence=True)  # the controller moves leadership away
            new = c.leader("t")
            assert new.node_id in (2, 3)
            other = c.brokers[5 - new.node_id]
            assert new.fetchers.source_of("t", 0) is None
            assert 1 not in new.fetchers.fetchers  # the idle fetcher was stopped
            assert other.fetchers.source_of("t", 0) == new.node_id
            res = await new.replicas.append({("t", 0): batch(b"b")}, required_acks=-1,
                                            timeout_ms=5000)
            assert res[("t", 0)].base_offset == 1
            # The old leader, fenced but still assigned, follows the new one.
            old = c.brokers[1].replicas.get("t", 0)
            assert old.role is Role.FOLLOWER
            assert c.brokers[1].fetchers.source_of("t", 0) == new.node_id
            await eventually(lambda: old.log.log_end_offset == 2, what="old leader catches up")
            assert [r.value for r in old.log.read_records(0)] == [b"a", b"b"]
        finally:
            await c.stop()

    run(main)


def test_divergent_tail_of_the_old_leader_is_truncated(tmp_path: Path) -> None:
    async def main() -> None:
        slow_shrink = dataclasses.replace(FAST, lag_time_max_ms=10_000)
        c = Cluster(tmp_path, ids=(1, 2), settings=slow_shrink)
        await c.start()
        try:
            await c.create_topic("t", [1, 2], min_isr=1)
            old = c.brokers[1].replicas.get("t", 0)
            await c.brokers[1].replicas.append({("t", 0): batch(b"a", b"b")}, required_acks=-1,
                                               timeout_ms=5000)
            await c.brokers[2].fetchers.stop()
            # Acknowledged with acks=1 only: broker 2 never gets these.
            for v in (b"lost1", b"lost2", b"lost3"):
                await c.brokers[1].replicas.append({("t", 0): batch(v)}, required_acks=1,
                                                   timeout_ms=1000)
            assert old.log.log_end_offset == 5
            await c.brokers[1].fetchers.stop()  # the old leader must not fetch yet
            await c.heartbeat(1, want_fence=True)
            assert c.leader("t").node_id == 2
            new = c.brokers[2].replicas.get("t", 0)
            await c.brokers[2].replicas.append({("t", 0): batch(b"new1", b"new2")},
                                               required_acks=1, timeout_ms=1000)
            assert new.log.log_end_offset == 4 and old.log.log_end_offset == 5
            # what the fetcher truncated, from its log lines (Partition may be compiled,
            # broker/native.py, so its methods cannot be wrapped)
            with capture_logs() as events:
                c.brokers[1].fetchers.start()
                await eventually(lambda: old.log.log_end_offset == 4
                                 and old.log.latest_epoch == new.leader_epoch,
                                 what="truncation and catch-up")
            truncations = [(e["event"], e.get("truncate_to", e.get("start_at"))) for e in events
                           if e["event"] in ("replica_truncate", "replica_truncate_fully")]
            # Exactly to the end of the shared prefix: not below it, not to zero.
            assert truncations == [("replica_truncate", 2)]
            assert [r.value for r in old.log.read_records(0)] == [b"a", b"b", b"new1", b"new2"]
            assert old.log.epoch_cache.entries() == new.log.epoch_cache.entries()
        finally:
            await c.stop()

    run(main)


def test_follower_behind_the_leaders_log_start_truncates_fully(tmp_path: Path) -> None:
    async def main() -> None:
        c = Cluster(tmp_path, ids=(1, 2))
        await c.start()
        try:
            await c.create_topic("t", [1, 2], min_isr=1)
            lp = c.brokers[1].replicas.get("t", 0)
            fp = c.brokers[2].replicas.get("t", 0)
            await c.brokers[2].fetchers.stop()
            for i in range(5):
                await c.brokers[1].replicas.append({("t", 0): batch(b"v%d" % i)},
                                                   required_acks=1, timeout_ms=1000)
            await eventually(lambda: lp.isr == (1,), what="ISR shrink")
            assert lp.high_watermark == 5
            lp.log.delete_records_before(4)
            assert fp.log.log_end_offset == 0
            c.brokers[2].fetchers.start()
            await eventually(lambda: fp.log.log_end_offset == 5, what="follower restart at 4")
            assert fp.log.log_start_offset == 4
            assert [r.value for r in fp.log.read_records(4)] == [b"v4"]
            await eventually(lambda: lp.isr == (1, 2), what="ISR expansion")
        finally:
            await c.stop()

    run(main)


def test_fetcher_reconnects_after_its_connection_drops(tmp_path: Path) -> None:
    async def main() -> None:
        c = Cluster(tmp_path, ids=(1, 2))
        await c.start()
        try:
            await c.create_topic("t", [1, 2], min_isr=2)
            leader = c.brokers[1].replicas
            await leader.append({("t", 0): batch(b"a")}, required_acks=-1, timeout_ms=5000)
            [fetcher] = c.brokers[2].fetchers.fetchers.values()
            first = fetcher._conn
            assert first is not None
            await first.close()  # as if the leader's side reset it
            res = await leader.append({("t", 0): batch(b"b")}, required_acks=-1,
                                      timeout_ms=5000)
            assert res[("t", 0)].base_offset == 1
            assert fetcher._conn is not None and fetcher._conn is not first
            fp = c.brokers[2].replicas.get("t", 0)
            assert [r.value for r in fp.log.read_records(0)] == [b"a", b"b"]
        finally:
            await c.stop()

    run(main)


def test_a_partition_added_during_a_long_poll_is_fetched_at_once(tmp_path: Path) -> None:
    async def main() -> None:
        slow_polls = dataclasses.replace(FAST, fetch_wait_max_ms=5000)
        c = Cluster(tmp_path, ids=(1, 2), settings=slow_polls)
        await c.start()
        try:
            await c.create_topic("a", [1, 2])
            fetcher = c.brokers[2].fetchers.fetchers[1]
            await eventually(lambda: fetcher._conn is not None, what="first fetch")
            await asyncio.sleep(0.1)  # broker 2's fetch of "a" now sits in broker 1's long poll
            loop = asyncio.get_running_loop()
            started = loop.time()
            await c.create_topic("b", [1, 2], min_isr=2)
            res = await c.brokers[1].replicas.append({("b", 0): batch(b"x")}, required_acks=-1,
                                                     timeout_ms=10_000)
            assert res[("b", 0)].base_offset == 0
            assert loop.time() - started < 2.0  # not the 5 s long poll
            assert c.brokers[2].fetchers.fetchers[1] is fetcher  # one fetcher per leader
        finally:
            await c.stop()

    run(main)


def test_crashed_leader_restarts_truncates_its_tail_and_rejoins_the_isr(tmp_path: Path) -> None:
    async def main() -> None:
        slow_shrink = dataclasses.replace(FAST, lag_time_max_ms=10_000)
        c = Cluster(tmp_path, settings=slow_shrink)
        await c.start()
        try:
            await c.create_topic("t", [3, 1, 2], min_isr=2)
            assert c.leader("t").node_id == 3
            await c.brokers[3].replicas.append({("t", 0): batch(b"a", b"b")},
                                               required_acks=-1, timeout_ms=5000)
            for b in (1, 2):
                await c.brokers[b].fetchers.stop()
            for v in (b"lost1", b"lost2"):  # acks=1: on broker 3 only
                await c.brokers[3].replicas.append({("t", 0): batch(v)}, required_acks=1,
                                                   timeout_ms=1000)
            old_epoch = c.brokers[3].broker_epoch
            await c.crash(3)
            await c.heartbeat(3, want_fence=True)  # the controller's session expiry
            assert c.leader("t").node_id == 1
            assert c.metadata.partition("t", 0).isr == (1, 2)
            for b in (1, 2):
                c.brokers[b].fetchers.start()
            await c.brokers[1].replicas.append({("t", 0): batch(b"new")}, required_acks=-1,
                                               timeout_ms=5000)

            b3 = await c.restart(3)
            assert b3.broker_epoch > old_epoch
            p3 = b3.replicas.get("t", 0)
            assert p3 is not None and p3.log.log_end_offset == 4  # recovered, tail included
            await eventually(lambda: c.metadata.partition("t", 0).isr == (1, 2, 3),
                             what="broker 3 back in the ISR")
            assert [r.value for r in p3.log.read_records(0)] == [b"a", b"b", b"new"]
            expand = c.alter_calls[-1]
            [(_, [item])] = expand.topics
            assert dict(item.new_isr)[3] == b3.broker_epoch  # vouched for by its new epoch
        finally:
            await c.stop()

    run(main)


def test_new_leader_knows_the_idempotent_producers_from_replication(tmp_path: Path) -> None:
    async def main() -> None:
        slow_shrink = dataclasses.replace(FAST, lag_time_max_ms=10_000)
        c = Cluster(tmp_path, ids=(1, 2), settings=slow_shrink)
        await c.start()
        try:
            await c.create_topic("t", [1, 2], min_isr=2)

            def idempotent(seq: int, value: bytes) -> bytes:
                return build_batch([Record(timestamp=now_ms(), key=None, value=value)],
                                   producer_id=4242, producer_epoch=0, base_sequence=seq)

            first, second = idempotent(0, b"one"), idempotent(1, b"two")
            for data in (first, second):
                await c.brokers[1].replicas.append({("t", 0): data}, required_acks=-1,
                                                   timeout_ms=5000)
            await c.heartbeat(1, want_fence=True)
            assert c.leader("t").node_id == 2
            new = c.brokers[2].replicas
            # The producer did not see the second acknowledgement and retries it.
            retry = await new.append({("t", 0): second}, required_acks=1, timeout_ms=1000)
            assert retry[("t", 0)].base_offset == 1  # the original offset, not a new record
            assert [r.value for r in new.get("t", 0).log.read_records(0)] == [b"one", b"two"]
            nxt = await new.append({("t", 0): idempotent(2, b"three")}, required_acks=1,
                                   timeout_ms=1000)
            assert nxt[("t", 0)].base_offset == 2
            gap = await new.append({("t", 0): idempotent(5, b"gap")}, required_acks=1,
                                   timeout_ms=1000)
            assert gap[("t", 0)].error_code is ErrorCode.out_of_order_sequence_number
        finally:
            await c.stop()

    run(main)


def test_fenced_follower_is_not_proposed_for_the_isr_until_unfenced(tmp_path: Path) -> None:
    async def main() -> None:
        c = Cluster(tmp_path)
        await c.start()
        try:
            await c.create_topic("t", [1, 2, 3], min_isr=2)
            await c.heartbeat(3, want_fence=True)  # the controller drops it from the ISR
            lp = c.brokers[1].replicas.get("t", 0)
            assert lp.isr == (1, 2)
            calls = len(c.alter_calls)
            # Broker 3 keeps fetching and is caught up, but fenced: no proposal.
            await c.brokers[1].replicas.append({("t", 0): batch(b"a")}, required_acks=-1,
                                               timeout_ms=5000)
            await eventually(lambda: c.brokers[3].replicas.get("t", 0).log.log_end_offset == 1,
                             what="fenced follower still replicates")
            await asyncio.sleep(0.3)
            assert len(c.alter_calls) == calls and lp.isr == (1, 2)
            await c.heartbeat(3)  # unfenced
            await eventually(lambda: lp.isr == (1, 2, 3), what="expansion after unfencing")
        finally:
            await c.stop()

    run(main)


def test_settings_from_node_config() -> None:
    from broker.config import build_config
    from broker.replication import ReplicationSettings

    cfg = build_config({
        "process.roles": "broker,controller", "node.id": "1",
        "controller.quorum.voters": "1@127.0.0.1:19093",
        "listeners": "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093",
        "controller.listener.names": "CONTROLLER", "log.dirs": "/tmp/unused",
        "replica.lag.time.max.ms": "7000", "replica.fetch.wait.max.ms": "250",
        "broker.rack": "r1",
    })
    s = ReplicationSettings.from_config(cfg)
    assert (s.lag_time_max_ms, s.fetch_wait_max_ms, s.rack) == (7000, 250, "r1")
    assert (s.fetch_max_bytes, s.fetch_backoff_ms) == (1024 * 1024, 1000)
