"""The leader's ISR state machine and high watermark in Partition, with a manual clock:
Kafka's caught-up rule, pending expand/shrink semantics, and the order in which an
AlterPartition answer and the matching metadata arrive."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.log import LogConfig, PartitionLog, TopicPartition
from broker.replication.partition import Partition
from broker.testing.inprocess_cluster import batch, now_ms

LAG_MS = 1000


class Clock:
    def __init__(self) -> None:
        self.ms = now_ms()

    def __call__(self) -> int:
        return self.ms


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def part(tmp_path: Path, clock: Clock) -> Iterator[Partition]:
    plog = PartitionLog(tmp_path / "t-0", TopicPartition("t", 0), LogConfig(), clock=clock)
    p = Partition(topic="t", index=0, topic_id=None, log=plog, clock=clock, node_id=1)
    p.become_leader(leader_epoch=3, partition_epoch=10, replicas=(1, 2, 3), isr=(1, 2, 3),
                    min_insync_replicas=2)
    yield p
    plog.close()


def append(p: Partition, n: int = 1) -> None:
    for _ in range(n):
        p.append_as_leader(batch(b"v"), required_acks=1)


def test_new_leader_counts_its_epoch_from_the_log_end_before_writing(
    tmp_path: Path, clock: Clock,
) -> None:
    plog = PartitionLog(tmp_path / "e-0", TopicPartition("e", 0), LogConfig(), clock=clock)
    for epoch in (1, 1, 2):
        plog.append_as_leader(batch(b"v"), epoch, clock.ms)
    p = Partition(topic="e", index=0, topic_id=None, log=plog, clock=clock, node_id=1)
    p.become_leader(leader_epoch=5, partition_epoch=0, replicas=(1, 2), isr=(1, 2),
                    min_insync_replicas=1)
    assert p.leader_epoch_start_offset == 3
    assert plog.epoch_cache.entries() == [(1, 0), (2, 2)]  # nothing written (no fsync)
    # As if epoch 5 started at 3: a follower that wrote in epoch 3 or 4 (which this
    # leader never had) learns that epoch 2 ends at 3.
    assert p.end_offset_for_epoch(4) == (2, 3)
    assert p.end_offset_for_epoch(3) == (2, 3)
    assert p.end_offset_for_epoch(2) == (2, 3)
    assert p.end_offset_for_epoch(1) == (1, 2)
    assert p.end_offset_for_epoch(5) == (5, 3)
    assert p.end_offset_for_epoch(6) == (-1, -1)
    append(p, 1)
    assert plog.epoch_cache.entries() == [(1, 0), (2, 2), (5, 3)]
    assert p.end_offset_for_epoch(4) == (2, 3)
    assert p.end_offset_for_epoch(5) == (5, 4)
    plog.close()


def test_high_watermark_is_the_smallest_isr_log_end(part: Partition) -> None:
    append(part, 3)
    assert part.high_watermark == 0
    part.update_follower(2, 3)
    assert part.high_watermark == 0
    part.update_follower(3, 2)
    assert part.high_watermark == 2
    part.update_follower(3, 3)
    assert part.high_watermark == 3


def test_caught_up_by_reaching_the_leader_end_or_the_previous_fetch_end(
    part: Partition, clock: Clock,
) -> None:
    append(part, 2)
    start = clock.ms
    clock.ms += 100
    part.update_follower(2, 0)  # behind; the leader's end (2) is remembered
    assert part.followers[2].last_caught_up_ms == start  # set when the leader took over
    clock.ms += 100
    append(part, 1)
    part.update_follower(2, 2)  # reached what the leader had at its previous fetch
    assert part.followers[2].last_caught_up_ms == start + 100
    clock.ms += 100
    part.update_follower(2, 3)  # reached the leader's end now
    assert part.followers[2].last_caught_up_ms == start + 300


def test_shrink_keeps_old_isr_bounding_hw_until_committed(part: Partition, clock: Clock) -> None:
    append(part, 4)
    part.update_follower(2, 4)
    part.update_follower(3, 1)
    assert part.high_watermark == 1
    clock.ms += LAG_MS + 1
    part.update_follower(2, 4)
    assert part.out_of_sync_replicas(clock.ms, LAG_MS) == [3]
    pending = part.maybe_shrink_isr(clock.ms, LAG_MS)
    assert pending is not None and pending.new_isr == (1, 2) and not pending.expand
    assert pending.partition_epoch == 10
    assert part.maybe_shrink_isr(clock.ms, LAG_MS) is None  # one change in flight
    append(part, 1)
    part.update_follower(2, 5)
    assert part.high_watermark == 1  # broker 3 still counts until the controller agrees
    assert part.apply_isr_result(pending, error=ErrorCode.none, isr=(1, 2), leader_epoch=3,
                                 partition_epoch=11)
    assert part.isr == (1, 2) and part.partition_epoch == 11
    assert part.high_watermark == 5


def test_pending_expand_counts_for_nothing_until_committed(
    tmp_path: Path, clock: Clock,
) -> None:
    plog = PartitionLog(tmp_path / "u-0", TopicPartition("u", 0), LogConfig(), clock=clock)
    p = Partition(topic="u", index=0, topic_id=None, log=plog, clock=clock, node_id=1)
    p.become_leader(leader_epoch=0, partition_epoch=0, replicas=(1, 2, 3), isr=(1,),
                    min_insync_replicas=2)
    append(p, 2)
    p.update_follower(2, 2)
    pending = p.maybe_expand_isr(2, clock.ms)
    assert pending is not None and pending.new_isr == (1, 2) and pending.expand
    # The proposed member does not make |ISR| reach min.insync.replicas yet.
    assert p.high_watermark == 0
    with pytest.raises(KafkaError) as refused:
        p.append_as_leader(batch(b"x"), required_acks=-1)
    assert refused.value.error_code is ErrorCode.not_enough_replicas
    assert p.maybe_expand_isr(3, clock.ms) is None  # one change in flight
    assert p.apply_isr_result(pending, error=ErrorCode.none, isr=(1, 2), leader_epoch=0,
                              partition_epoch=1)
    assert p.high_watermark == 2
    plog.close()


def test_expand_needs_the_high_watermark_and_the_epoch_start(
    tmp_path: Path, clock: Clock,
) -> None:
    plog = PartitionLog(tmp_path / "v-0", TopicPartition("v", 0), LogConfig(), clock=clock)
    for _ in range(3):
        plog.append_as_leader(batch(b"old"), 0, clock.ms)
    p = Partition(topic="v", index=0, topic_id=None, log=plog, clock=clock, node_id=1)
    p.become_leader(leader_epoch=1, partition_epoch=0, replicas=(1, 2), isr=(1,),
                    min_insync_replicas=1)
    assert p.leader_epoch_start_offset == 3
    append(p, 1)
    assert p.high_watermark == 4
    p.update_follower(2, 2)
    assert p.maybe_expand_isr(2, clock.ms) is None  # below HW and the epoch start
    p.update_follower(2, 4)
    assert p.maybe_expand_isr(2, clock.ms) is not None
    plog.close()


def test_refused_change_waits_out_the_backoff(part: Partition, clock: Clock) -> None:
    clock.ms += LAG_MS + 1
    pending = part.maybe_shrink_isr(clock.ms, LAG_MS)
    assert pending is not None and pending.new_isr == (1,)
    assert not part.apply_isr_result(pending, error=ErrorCode.invalid_update_version,
                                     retry_after_ms=clock.ms + 500)
    assert part.pending_isr is None and part.isr == (1, 2, 3)
    assert part.maybe_shrink_isr(clock.ms, LAG_MS) is None
    clock.ms += 500
    assert part.maybe_shrink_isr(clock.ms, LAG_MS) is not None


def test_answer_first_then_metadata_is_accepted(part: Partition, clock: Clock) -> None:
    clock.ms += LAG_MS + 1
    pending = part.maybe_shrink_isr(clock.ms, LAG_MS)
    assert pending is not None
    assert part.apply_isr_result(pending, error=ErrorCode.none, isr=(1,), leader_epoch=3,
                                 partition_epoch=11)
    # The committed record reaches this broker's metadata afterwards, at the same epoch.
    part.become_leader(leader_epoch=3, partition_epoch=11, replicas=(1, 2, 3), isr=(1,),
                       min_insync_replicas=2)
    assert (part.isr, part.partition_epoch) == ((1,), 11)
    # An older image replayed late changes nothing.
    part.become_leader(leader_epoch=3, partition_epoch=10, replicas=(1, 2, 3), isr=(1, 2, 3),
                       min_insync_replicas=2)
    assert (part.isr, part.partition_epoch) == ((1,), 11)


def test_metadata_first_then_answer_is_ignored(part: Partition, clock: Clock) -> None:
    clock.ms += LAG_MS + 1
    pending = part.maybe_shrink_isr(clock.ms, LAG_MS)
    assert pending is not None
    part.become_leader(leader_epoch=3, partition_epoch=11, replicas=(1, 2, 3), isr=(1,),
                       min_insync_replicas=2)
    assert part.pending_isr is None
    assert not part.apply_isr_result(pending, error=ErrorCode.none, isr=(1,), leader_epoch=3,
                                     partition_epoch=11)
    assert (part.isr, part.partition_epoch) == ((1,), 11)


def test_new_leader_epoch_drops_the_pending_change(part: Partition, clock: Clock) -> None:
    clock.ms += LAG_MS + 1
    pending = part.maybe_shrink_isr(clock.ms, LAG_MS)
    assert pending is not None
    part.become_follower(leader_id=2, leader_epoch=4, partition_epoch=12, replicas=(1, 2, 3),
                         isr=(1, 2, 3))
    assert part.pending_isr is None
    assert not part.apply_isr_result(pending, error=ErrorCode.none, isr=(1,), leader_epoch=3,
                                     partition_epoch=11)
    assert part.isr == (1, 2, 3)


def test_replica_being_added_holds_the_high_watermark_back(
    tmp_path: Path, clock: Clock,
) -> None:
    plog = PartitionLog(tmp_path / "w-0", TopicPartition("w", 0), LogConfig(), clock=clock)
    p = Partition(topic="w", index=0, topic_id=None, log=plog, clock=clock, node_id=1)
    p.become_leader(leader_epoch=0, partition_epoch=0, replicas=(1, 2, 3), isr=(1, 2),
                    min_insync_replicas=2)
    p.update_follower(3, 0)
    pending = p.maybe_expand_isr(3, clock.ms)
    assert pending is not None
    append(p, 2)
    p.update_follower(2, 2)
    # Broker 2 holds everything, but broker 3 may be in the ISR any moment now: had the
    # high watermark moved to 2, the committed ISR (1, 2, 3) would have a member without it.
    assert p.high_watermark == 0
    assert p.apply_isr_result(pending, error=ErrorCode.none, isr=(1, 2, 3), leader_epoch=0,
                              partition_epoch=1)
    p.update_follower(3, 2)
    assert p.high_watermark == 2
    plog.close()


def test_proposed_isr_is_ascending_as_kafkas_leader_sends_it(
    tmp_path: Path, clock: Clock,
) -> None:
    """Kafka 4.4's leader sends its ISR in its hash set's order (ascending ids), not in the
    order replicas caught up: after a reassignment to [3, 1], kafka-topics shows Isr: 1,3."""
    plog = PartitionLog(tmp_path / "o-0", TopicPartition("o", 0), LogConfig(), clock=clock)
    p = Partition(topic="o", index=0, topic_id=None, log=plog, clock=clock, node_id=3)
    p.become_leader(leader_epoch=0, partition_epoch=0, replicas=(3, 1, 2), isr=(3, 2),
                    min_insync_replicas=1)
    p.update_follower(1, 0)
    pending = p.maybe_expand_isr(1, clock.ms)
    assert pending is not None and pending.new_isr == (1, 2, 3)
    assert p.apply_isr_result(pending, error=ErrorCode.none, isr=(1, 2, 3), leader_epoch=0,
                              partition_epoch=1)
    clock.ms += LAG_MS + 1
    p.update_follower(1, 0)
    shrink = p.maybe_shrink_isr(clock.ms, LAG_MS)
    assert shrink is not None and shrink.new_isr == (1, 3)
    plog.close()
