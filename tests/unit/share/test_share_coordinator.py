"""The pure share coordinator (broker/share/coordinator.py): its writes are applied when
replicated, its records replay to the same state, epochs fence, batches combine as Kafka's
PersisterStateBatchCombiner does, snapshots come every N updates, and one share-partition's
writes go one at a time."""

from __future__ import annotations

import uuid

from kio.schema.errors import ErrorCode

from broker.share.coordinator import (
    Effects,
    ShareCoordinator,
    ShareCoordinatorConfig,
    StateResult,
    combine,
)
from broker.share.records import (
    SHARE_SNAPSHOT_KEY_TYPE,
    SHARE_UPDATE_KEY_TYPE,
    SharePartitionKey,
    StateBatch,
)

KEY = SharePartitionKey("g", uuid.UUID(int=7), 0)
ACKED, ARCHIVED, AVAILABLE = 2, 4, 0


def _complete(coord: ShareCoordinator, fx: Effects, error: ErrorCode = ErrorCode.none
              ) -> list[StateResult]:
    """Completes every write of `fx` (and of what those completions start); the replies."""
    replies = [r.result for r in fx.replies]
    pending = list(fx.writes)
    while pending:
        w = pending.pop(0)
        more = coord.write_completed(w.write_id, error, 0)
        replies += [r.result for r in more.replies]
        pending += more.writes
    return replies


def _replayed(coord: ShareCoordinator, log: list) -> ShareCoordinator:  # type: ignore[type-arg]
    again = ShareCoordinator(coord.config, 0)
    for record_type, key, value in log:
        again.replay(record_type, key, value)
    return again


def test_combine_newer_wins_prunes_and_joins() -> None:
    old = [StateBatch(0, 9, AVAILABLE, 1)]
    new = [StateBatch(3, 5, ACKED, 1), StateBatch(6, 6, ACKED, 1)]
    assert combine(old, new, 0) == (StateBatch(0, 2, AVAILABLE, 1), StateBatch(3, 6, ACKED, 1),
                                    StateBatch(7, 9, AVAILABLE, 1))
    assert combine(old, new, 4) == (StateBatch(4, 6, ACKED, 1), StateBatch(7, 9, AVAILABLE, 1))
    assert combine([StateBatch(0, 3, ACKED, 1)], [StateBatch(4, 5, ACKED, 1)], 0) == (
        StateBatch(0, 5, ACKED, 1),)
    assert combine([StateBatch(0, 3, ACKED, 1)], [StateBatch(4, 5, ACKED, 2)], 0) == (
        StateBatch(0, 3, ACKED, 1), StateBatch(4, 5, ACKED, 2))
    assert combine(old, [], 20) == ()


def test_read_of_nothing_then_write_snapshot_then_updates() -> None:
    coord = ShareCoordinator(ShareCoordinatorConfig(snapshot_update_records_per_snapshot=2), 0)
    [r] = _complete(coord, coord.read(1, KEY, 0))
    assert (r.error, r.start_offset, r.state_epoch, r.state_batches) == (ErrorCode.none, -1, 0, ())
    log = []
    types = []
    for i, batches in enumerate([(), (StateBatch(0, 4, ACKED, 1),),
                                 (StateBatch(5, 5, ARCHIVED, 3),),
                                 (StateBatch(6, 7, AVAILABLE, 1),)]):
        fx = coord.write(10 + i, KEY, 0, 0, 0 if i < 2 else 5, batches, 1000 + i)
        assert len(fx.writes) == 1 and not fx.replies  # answered once replicated
        w = fx.writes[0]
        log.append((w.record_type, w.key, w.value))
        types.append(w.record_type)
        [done] = _complete(coord, fx)
        assert done.error is ErrorCode.none
    # the first write is a snapshot, then updates until two, then a snapshot again
    assert types == [SHARE_SNAPSHOT_KEY_TYPE, SHARE_UPDATE_KEY_TYPE, SHARE_UPDATE_KEY_TYPE,
                     SHARE_SNAPSHOT_KEY_TYPE]
    [r] = _complete(coord, coord.read(2, KEY, 0))
    assert r.start_offset == 5
    assert r.state_batches == (StateBatch(5, 5, ARCHIVED, 3), StateBatch(6, 7, AVAILABLE, 1))
    # the log replays to the same state
    assert _replayed(coord, log).states == coord.states


def test_failed_write_changes_nothing_and_is_answered() -> None:
    coord = ShareCoordinator(ShareCoordinatorConfig(), 0)
    [r] = _complete(coord, coord.write(1, KEY, 0, 0, 3, (), 0),
                    ErrorCode.not_leader_or_follower)
    assert r.error is ErrorCode.coordinator_not_available
    assert KEY not in coord.states


def test_epochs_fence() -> None:
    coord = ShareCoordinator(ShareCoordinatorConfig(), 0)
    _complete(coord, coord.write(1, KEY, 1, 5, 0, (), 0))
    [r] = _complete(coord, coord.write(2, KEY, 1, 4, 0, (), 0))
    assert r.error is ErrorCode.fenced_leader_epoch
    [r] = _complete(coord, coord.write(3, KEY, 0, 5, 0, (), 0))
    assert r.error is ErrorCode.fenced_state_epoch
    [r] = _complete(coord, coord.read(4, KEY, 3))
    assert r.error is ErrorCode.fenced_leader_epoch
    # a read at a newer leader epoch raises the recorded one: the old leader is fenced
    [r] = _complete(coord, coord.read(5, KEY, 8))
    assert r.error is ErrorCode.none
    [r] = _complete(coord, coord.write(6, KEY, 1, 5, 0, (), 0))
    assert r.error is ErrorCode.fenced_leader_epoch


def test_initialize_bumps_the_state_epoch_and_fences_older_writers() -> None:
    coord = ShareCoordinator(ShareCoordinatorConfig(), 0)
    _complete(coord, coord.write(1, KEY, 0, 2, 10, (StateBatch(10, 12, ACKED, 1),), 0))
    [r] = _complete(coord, coord.initialize(2, KEY, 0, 3, 0))
    assert r.error is ErrorCode.fenced_state_epoch  # not above the current one
    [r] = _complete(coord, coord.initialize(3, KEY, 1, 3, 0))
    assert r.error is ErrorCode.none
    [s] = _complete(coord, coord.read_summary(4, KEY))
    assert (s.start_offset, s.state_epoch, s.delivery_complete_count) == (3, 1, 0)
    assert coord.states[KEY].state_batches == () and coord.states[KEY].snapshot_epoch == 1
    [r] = _complete(coord, coord.write(5, KEY, 0, 2, 3, (), 0))
    assert r.error is ErrorCode.fenced_state_epoch


def test_delete_writes_a_tombstone() -> None:
    coord = ShareCoordinator(ShareCoordinatorConfig(), 0)
    [r] = _complete(coord, coord.delete(1, KEY, 0))
    assert r.error is ErrorCode.none  # nothing to delete: no record
    _complete(coord, coord.write(2, KEY, 0, 0, 4, (), 0))
    fx = coord.delete(3, KEY, 0)
    assert [(w.record_type, w.value) for w in fx.writes] == [(SHARE_SNAPSHOT_KEY_TYPE, None)]
    _complete(coord, fx)
    assert KEY not in coord.states
    [r] = _complete(coord, coord.read(4, KEY, 0))
    assert r.start_offset == -1


def test_one_partitions_writes_go_one_at_a_time() -> None:
    coord = ShareCoordinator(ShareCoordinatorConfig(), 0)
    first = coord.write(1, KEY, 0, 0, 0, (StateBatch(0, 0, ACKED, 1),), 0)
    second = coord.write(2, KEY, 0, 0, 0, (StateBatch(1, 1, ACKED, 1),), 0)
    other = coord.write(3, SharePartitionKey("h", KEY.topic_id, 0), 0, 0, 0, (), 0)
    assert len(first.writes) == 1 and not second.writes and len(other.writes) == 1
    done = coord.write_completed(first.writes[0].write_id, ErrorCode.none, 0)
    # the queued write starts once the first is applied, and sees its state
    assert [r.token for r in done.replies] == [1] and len(done.writes) == 1
    assert done.writes[0].record_type == SHARE_UPDATE_KEY_TYPE
    _complete(coord, done)
    assert coord.states[KEY].state_batches == (StateBatch(0, 1, ACKED, 1),)


def test_unload_answers_waiting_requests_not_coordinator() -> None:
    coord = ShareCoordinator(ShareCoordinatorConfig(), 0)
    coord.write(1, KEY, 0, 0, 0, (), 0)
    coord.write(2, KEY, 0, 0, 0, (), 0)
    fx = coord.unload()
    assert sorted((r.token, r.result.error) for r in fx.replies) == [
        (1, ErrorCode.not_coordinator), (2, ErrorCode.not_coordinator)]
    assert not fx.writes
