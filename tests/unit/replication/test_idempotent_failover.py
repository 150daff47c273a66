"""An idempotent producer's retry across a partition leader change, on real ReplicaManagers
over loopback: the new leader must answer a retry of any batch it replicated as a follower
(one of the producer's last five) with the batch's original offsets, whatever happened to
the new leader's replica in between (a crash and recovery, a truncation of a divergent
tail), and append a retried batch it never got exactly once. The chaos run
(tests/chaos/test_partitions.py) found a record twice across a leader change; these pin
the broker's side of Kafka's guarantee, each scenario step by step."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from kio.schema.errors import ErrorCode

from broker.log import AppendResult
from broker.protocol.records import Record, build_batch
from broker.replication import Role
from broker.testing.inprocess_cluster import FAST, Cluster, eventually, now_ms, run

PID = 4242
OTHER_PID = 5151
SLOW_SHRINK = dataclasses.replace(FAST, lag_time_max_ms=10_000)


def idempotent(seq: int, value: bytes, pid: int = PID) -> bytes:
    return build_batch([Record(timestamp=now_ms(), key=None, value=value)],
                       producer_id=pid, producer_epoch=0, base_sequence=seq)


async def produce(c: Cluster, broker: int, data: bytes, acks: int = -1) -> AppendResult:
    res = await c.brokers[broker].replicas.append({("t", 0): data}, required_acks=acks,
                                                  timeout_ms=5000)
    result = res[("t", 0)]
    assert isinstance(result, AppendResult), result
    return result


def values(c: Cluster, broker: int) -> list[bytes | None]:
    return [r.value for r in c.brokers[broker].replicas.get("t", 0).log.read_records(0)]


async def caught_up(c: Cluster, end: int, *brokers: int) -> None:
    await eventually(lambda: all(c.brokers[b].replicas.get("t", 0).log.log_end_offset == end
                                 for b in brokers), what=f"brokers {brokers} at {end}")


def test_retries_of_the_last_five_after_the_new_leader_recovered_from_a_crash(
        tmp_path: Path) -> None:
    """Broker 2 replicates six batches of the producer (and another producer's), crashes and
    recovers (its producer state rebuilt from its log), then leads: each of the last five
    retried is answered with its original offset; the sixth back is out of order."""
    async def main() -> None:
        c = Cluster(tmp_path, settings=SLOW_SHRINK)
        await c.start()
        try:
            await c.create_topic("t", [1, 2, 3], min_isr=1)
            original: dict[int, int] = {}
            for seq in range(6):
                original[seq] = (await produce(c, 1, idempotent(seq, b"p%d" % seq))).base_offset
                await produce(c, 1, idempotent(seq, b"q%d" % seq, pid=OTHER_PID))
            await caught_up(c, 12, 2, 3)
            await c.crash(2)
            await c.heartbeat(2, want_fence=True)
            await c.restart(2)
            await eventually(lambda: c.metadata.partition("t", 0).isr == (1, 3, 2)
                             or set(c.metadata.partition("t", 0).isr) == {1, 2, 3},
                             what="broker 2 back in the ISR")
            await c.brokers[3].fetchers.stop()  # broker 3 must not be the one elected
            await c.heartbeat(3, want_fence=True)
            await c.heartbeat(1, want_fence=True)
            assert c.leader("t").node_id == 2
            assert c.brokers[2].replicas.get("t", 0).role is Role.LEADER
            await c.heartbeat(3)
            c.brokers[3].fetchers.start()
            for seq in range(1, 6):
                retry = await produce(c, 2, idempotent(seq, b"p%d" % seq))
                assert retry.base_offset == original[seq], seq
            too_old = await c.brokers[2].replicas.append(
                {("t", 0): idempotent(0, b"p0")}, required_acks=-1, timeout_ms=5000)
            err = too_old[("t", 0)]
            assert not isinstance(err, AppendResult)
            assert err.error_code is ErrorCode.out_of_order_sequence_number
            assert (await produce(c, 2, idempotent(6, b"p6"))).base_offset == 12
            assert values(c, 2).count(b"p5") == 1 and len(values(c, 2)) == 13
        finally:
            await c.stop()

    run(main)


def test_retry_after_the_new_leader_truncated_a_divergent_tail(tmp_path: Path) -> None:
    """Broker 2 replicates batch 0 and batch 1 of the producer; batch 1 is on no other
    replica. Broker 3 leads next (without batch 1), broker 2 truncates batch 1 away as its
    follower (producer state rebuilt from what is left), then broker 2 leads: the retry of
    batch 0 is answered with its original offset, the retry of batch 1 appended once."""
    async def main() -> None:
        c = Cluster(tmp_path, settings=SLOW_SHRINK)
        await c.start()
        try:
            await c.create_topic("t", [1, 2, 3], min_isr=1)
            first = await produce(c, 1, idempotent(0, b"zero"))
            await caught_up(c, 1, 2, 3)
            await c.brokers[3].fetchers.stop()
            await produce(c, 1, idempotent(1, b"one"), acks=1)  # its answer is lost
            await caught_up(c, 2, 2)
            await c.brokers[2].fetchers.stop()
            await c.brokers[1].fetchers.stop()
            # Broker 3 leads without batch 1 and takes another producer's record.
            await c.heartbeat(2, want_fence=True)
            await c.heartbeat(1, want_fence=True)
            assert c.leader("t").node_id == 3
            c.brokers[3].fetchers.start()
            await produce(c, 3, idempotent(0, b"other", pid=OTHER_PID), acks=1)
            await c.heartbeat(2)
            c.brokers[2].fetchers.start()
            await eventually(lambda: values(c, 2) == [b"zero", b"other"],
                             what="broker 2 truncated batch 1 and follows broker 3")
            # Broker 2 leads.
            await c.brokers[3].fetchers.stop()
            await c.heartbeat(1)
            await c.heartbeat(3, want_fence=True)
            assert c.leader("t").node_id == 2
            retry0 = await produce(c, 2, idempotent(0, b"zero"), acks=1)
            assert retry0.base_offset == first.base_offset == 0
            retry1 = await produce(c, 2, idempotent(1, b"one"), acks=1)
            assert retry1.base_offset == 2
            again = await produce(c, 2, idempotent(1, b"one"), acks=1)
            assert again.base_offset == 2
            assert values(c, 2) == [b"zero", b"other", b"one"]
        finally:
            await c.stop()

    run(main)


def test_a_retry_reaching_the_new_leader_before_the_batch_is_appended_once(
        tmp_path: Path) -> None:
    """The old leader wrote the batch but no follower fetched it: the new leader does not
    have it, appends the retry, and the old leader drops its own copy when it follows: one
    copy on every replica."""
    async def main() -> None:
        c = Cluster(tmp_path, settings=SLOW_SHRINK)
        await c.start()
        try:
            await c.create_topic("t", [1, 2, 3], min_isr=1)
            await produce(c, 1, idempotent(0, b"zero"))
            await caught_up(c, 1, 2, 3)
            for b in (2, 3):
                await c.brokers[b].fetchers.stop()
            await produce(c, 1, idempotent(1, b"one"), acks=1)  # on broker 1 only
            await c.brokers[1].fetchers.stop()
            await c.heartbeat(1, want_fence=True)
            new = c.leader("t").node_id
            assert new in (2, 3)
            for b in (2, 3):
                c.brokers[b].fetchers.start()
            await produce(c, new, idempotent(0, b"other", pid=OTHER_PID))
            retry = await produce(c, new, idempotent(1, b"one"))
            assert retry.base_offset == 2
            await c.heartbeat(1)
            c.brokers[1].fetchers.start()
            await caught_up(c, 3, 1, 2, 3)
            for b in (1, 2, 3):
                assert values(c, b) == [b"zero", b"other", b"one"], b
        finally:
            await c.stop()

    run(main)
