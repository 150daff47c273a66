"""The transaction coordinator's transition table (broker/txn/coordinator.py), every listed
transition driven through the pure core, and every pair the table refuses."""

from __future__ import annotations

import itertools

import pytest
from kio.schema.errors import ErrorCode

from broker.txn.coordinator import (
    MAX_PRODUCER_EPOCH,
    NEED_PRODUCER_ID,
    TRANSITIONS,
    Effects,
    EndResult,
    IllegalTransition,
    InitResult,
    TransactionCoordinator,
    TxnConfig,
    TxnState,
    check_transition,
)
from broker.txn.records import decode_value, encode_value

S = TxnState
TID = "txn-a"
T0 = 1_000_000
CONFIG = TxnConfig(max_timeout_ms=900000, abort_interval_ms=1000, remove_interval_ms=5000,
                   id_expiration_ms=60000)
P1 = ("t", 0)
P2 = ("t", 1)

# the table at the top of the module, as pairs (from, to)
LISTED = {
    (S.EMPTY, S.EMPTY), (S.EMPTY, S.ONGOING), (S.EMPTY, S.DEAD),
    (S.ONGOING, S.ONGOING), (S.ONGOING, S.PREPARE_COMMIT), (S.ONGOING, S.PREPARE_ABORT),
    (S.ONGOING, S.PREPARE_EPOCH_FENCE), (S.PREPARE_EPOCH_FENCE, S.PREPARE_ABORT),
    (S.PREPARE_COMMIT, S.COMPLETE_COMMIT), (S.PREPARE_ABORT, S.COMPLETE_ABORT),
    (S.COMPLETE_COMMIT, S.EMPTY), (S.COMPLETE_COMMIT, S.ONGOING), (S.COMPLETE_COMMIT, S.DEAD),
    (S.COMPLETE_ABORT, S.EMPTY), (S.COMPLETE_ABORT, S.ONGOING), (S.COMPLETE_ABORT, S.DEAD),
}


class Driver:
    """The core with a log that acknowledges (or fails) each write, and replies by token."""

    def __init__(self, config: TxnConfig = CONFIG) -> None:
        self.core = TransactionCoordinator(config, coordinator_epoch=5, now_ms=T0)
        self.now = T0
        self.tokens = itertools.count(1)
        self.replies: dict[int, object] = {}
        self.log: list[tuple[str, object]] = []
        self.markers: list[object] = []
        self.fail_writes: ErrorCode | None = None

    def run(self, fx: Effects) -> None:
        for r in fx.replies:
            self.replies[r.token] = r.result
        self.markers += fx.markers
        for w in fx.writes:
            error = self.fail_writes or ErrorCode.none
            if error is ErrorCode.none:
                self.log.append((w.transactional_id, w.value))
            self.run(self.core.write_completed(w.write_id, error, self.now))

    def call(self, fn: object, *args: object, **kw: object) -> object:
        token = next(self.tokens)
        self.run(fn(token, *args, **kw))  # type: ignore[operator]
        return self.replies.pop(token)

    def init(self, tid: str = TID, timeout: int = 60000, *, pid: int = -1, epoch: int = -1,
             new_pid: int | None = 1000) -> InitResult:
        r = self.call(self.core.init_producer_id, tid, timeout, self.now,
                      expected_producer_id=pid, expected_epoch=epoch, new_producer_id=new_pid)
        assert isinstance(r, InitResult)
        return r

    def add(self, parts: list[tuple[str, int]], tid: str = TID, pid: int | None = None,
            epoch: int | None = None) -> object:
        meta = self.core.txns[tid]
        return self.call(self.core.add_partitions, tid,
                         meta.producer_id if pid is None else pid,
                         meta.producer_epoch if epoch is None else epoch, parts, self.now)

    def end(self, committed: bool, tid: str = TID, epoch: int | None = None) -> object:
        """EndTxn v0-v4: the error only."""
        r = self.end_result(committed, tid, epoch)
        return r.error

    def end_result(self, committed: bool, tid: str = TID, epoch: int | None = None, *,
                   pid: int | None = None, tv2: bool = False,
                   next_pid: int | None = None) -> EndResult:
        meta = self.core.txns[tid]
        r = self.call(self.core.end_txn, tid, meta.producer_id if pid is None else pid,
                      meta.producer_epoch if epoch is None else epoch, committed, self.now,
                      tv2=tv2, next_producer_id=next_pid)
        assert isinstance(r, EndResult)
        return r

    def markers_done(self, tid: str = TID) -> None:
        meta = self.core.txns[tid]
        self.run(self.core.markers_completed(tid, meta.producer_id, meta.producer_epoch,
                                             self.now))

    def state(self, tid: str = TID) -> TxnState:
        return self.core.txns[tid].state

    def to(self, state: TxnState) -> None:
        """Bring TID to `state` through the table's own transitions."""
        assert self.init().error is ErrorCode.none
        if state is S.EMPTY:
            return
        assert self.add([P1]) is ErrorCode.none
        if state is S.ONGOING:
            return
        if state in (S.PREPARE_COMMIT, S.COMPLETE_COMMIT):
            assert self.end(True) is ErrorCode.none
        else:
            assert self.end(False) is ErrorCode.none
        if state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            self.markers_done()
        assert self.state() is state


def test_table_matches_the_module_docstring() -> None:
    table = {(old, new) for new, olds in TRANSITIONS.items() for old in olds}
    assert table == LISTED


@pytest.mark.parametrize("old,new", sorted(
    (o, n) for o in S for n in S if (o, n) not in LISTED))
def test_every_unlisted_pair_is_refused(old: TxnState, new: TxnState) -> None:
    with pytest.raises(IllegalTransition):
        check_transition(TID, old, new)


# ---- every listed transition, driven through requests ------------------------------------


def test_new_id_becomes_empty_with_epoch_zero() -> None:
    d = Driver()
    r = d.init(new_pid=1000)
    assert r == InitResult(ErrorCode.none, 1000, 0)
    assert d.state() is S.EMPTY
    tid, value = d.log[-1]
    assert tid == TID and value is not None


def test_unknown_id_asks_for_a_producer_id_first() -> None:
    d = Driver()
    assert d.core.wants_producer_id(TID)
    assert d.init(new_pid=None) is NEED_PRODUCER_ID
    assert TID not in d.core.txns


def test_empty_to_empty_bumps_the_epoch() -> None:
    d = Driver()
    d.to(S.EMPTY)
    r = d.init()
    assert (r.error, r.producer_id, r.producer_epoch) == (ErrorCode.none, 1000, 1)
    assert d.state() is S.EMPTY


@pytest.mark.parametrize("start", [S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT])
def test_to_ongoing_records_start_time_and_partitions(start: TxnState) -> None:
    d = Driver()
    d.to(start)
    d.now += 10
    assert d.add([P1, P2]) is ErrorCode.none
    meta = d.core.txns[TID]
    assert meta.state is S.ONGOING and meta.partitions == {P1, P2} and meta.start_ms == d.now


def test_ongoing_to_ongoing_adds_partitions_and_keeps_start() -> None:
    d = Driver()
    d.to(S.ONGOING)
    start = d.core.txns[TID].start_ms
    writes = len(d.log)
    assert d.add([P1]) is ErrorCode.none  # already in: nothing written
    assert len(d.log) == writes
    d.now += 5
    assert d.add([P2]) is ErrorCode.none
    meta = d.core.txns[TID]
    assert meta.partitions == {P1, P2} and meta.start_ms == start and len(d.log) == writes + 1


@pytest.mark.parametrize("committed", [True, False])
def test_end_txn_prepares_then_markers_complete(committed: bool) -> None:
    d = Driver()
    d.to(S.ONGOING)
    assert d.end(committed) is ErrorCode.none
    assert d.state() is (S.PREPARE_COMMIT if committed else S.PREPARE_ABORT)
    [m] = d.markers
    assert m.committed is committed and m.partitions == {P1}  # type: ignore[attr-defined]
    d.markers_done()
    meta = d.core.txns[TID]
    assert meta.state is (S.COMPLETE_COMMIT if committed else S.COMPLETE_ABORT)
    assert meta.partitions == frozenset()


def test_init_on_ongoing_fences_and_aborts() -> None:
    d = Driver()
    d.to(S.ONGOING)
    old_epoch = d.core.txns[TID].producer_epoch
    r = d.init()
    assert r.error is ErrorCode.concurrent_transactions
    meta = d.core.txns[TID]
    # Ongoing -> PrepareEpochFence -> PrepareAbort, with the epoch bumped
    assert meta.state is S.PREPARE_ABORT and meta.producer_epoch == old_epoch + 1
    _, written = d.log[-1]
    assert written.state == S.PREPARE_ABORT  # type: ignore[union-attr]
    [m] = d.markers
    assert m.committed is False and m.producer_epoch == old_epoch + 1  # type: ignore[attr-defined]
    # the zombie's EndTxn is fenced
    assert d.end(True, epoch=old_epoch) is ErrorCode.producer_fenced
    # retries get CONCURRENT_TRANSACTIONS until the abort completes, then a second bump
    assert d.init().error is ErrorCode.concurrent_transactions
    d.markers_done()
    assert d.state() is S.COMPLETE_ABORT
    r = d.init()
    assert (r.error, r.producer_epoch) == (ErrorCode.none, old_epoch + 2)


def test_prepare_epoch_fence_is_the_state_while_the_abort_is_written() -> None:
    d = Driver()
    d.to(S.ONGOING)
    token = next(d.tokens)
    fx = d.core.init_producer_id(token, TID, 60000, d.now)
    assert d.state() is S.PREPARE_EPOCH_FENCE
    assert d.core.txns[TID].pending is S.PREPARE_ABORT
    assert d.add([P2]) is ErrorCode.concurrent_transactions
    d.run(fx)
    assert d.state() is S.PREPARE_ABORT


def test_fence_write_failure_returns_to_ongoing() -> None:
    d = Driver()
    d.to(S.ONGOING)
    epoch = d.core.txns[TID].producer_epoch
    d.fail_writes = ErrorCode.not_enough_replicas
    assert d.init().error is ErrorCode.concurrent_transactions
    assert d.state() is S.ONGOING and d.core.txns[TID].producer_epoch == epoch


@pytest.mark.parametrize("start", [S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT])
def test_expired_ids_become_dead_and_are_forgotten(start: TxnState) -> None:
    d = Driver()
    d.to(start)
    d.now += CONFIG.id_expiration_ms + CONFIG.remove_interval_ms
    d.run(d.core.tick(d.now))
    assert TID not in d.core.txns
    assert d.log[-1] == (TID, None)  # tombstone


def test_ongoing_and_prepared_ids_do_not_expire() -> None:
    d = Driver()
    d.to(S.ONGOING)
    assert d.core.expire_ids(d.now + CONFIG.id_expiration_ms * 2) == []


def test_timed_out_transaction_is_aborted_by_the_coordinator() -> None:
    d = Driver()
    assert d.init(timeout=2000).error is ErrorCode.none
    assert d.add([P1]) is ErrorCode.none
    epoch = d.core.txns[TID].producer_epoch
    d.now += 1500
    d.run(d.core.tick(d.now))
    assert d.state() is S.ONGOING
    d.now += 1000
    d.run(d.core.tick(d.now))
    assert d.state() is S.PREPARE_ABORT and d.core.txns[TID].producer_epoch == epoch + 1
    assert d.add([P2], epoch=epoch) is ErrorCode.producer_fenced


# ---- refusals and answers -------------------------------------------------------------


def test_invalid_timeouts() -> None:
    d = Driver()
    assert d.init(timeout=0).error is ErrorCode.invalid_transaction_timeout
    assert d.init(timeout=CONFIG.max_timeout_ms + 1).error is ErrorCode.invalid_transaction_timeout
    assert d.init(timeout=CONFIG.max_timeout_ms).error is ErrorCode.none


@pytest.mark.parametrize("state", [S.PREPARE_COMMIT, S.PREPARE_ABORT])
def test_init_while_completing_is_concurrent(state: TxnState) -> None:
    d = Driver()
    d.to(state)
    assert d.init().error is ErrorCode.concurrent_transactions
    assert d.add([P2]) is ErrorCode.concurrent_transactions


def test_add_partitions_refusals() -> None:
    d = Driver()
    assert d.call(d.core.add_partitions, TID, 1, 0, [P1], d.now) is \
        ErrorCode.invalid_producer_id_mapping
    d.to(S.EMPTY)
    assert d.add([P1], pid=999) is ErrorCode.invalid_producer_id_mapping
    assert d.add([P1], epoch=7) is ErrorCode.producer_fenced


@pytest.mark.parametrize("state,committed,expected", [
    (S.EMPTY, True, ErrorCode.invalid_txn_state),
    (S.EMPTY, False, ErrorCode.invalid_txn_state),
    (S.PREPARE_COMMIT, True, ErrorCode.concurrent_transactions),
    (S.PREPARE_COMMIT, False, ErrorCode.invalid_txn_state),
    (S.PREPARE_ABORT, False, ErrorCode.concurrent_transactions),
    (S.PREPARE_ABORT, True, ErrorCode.invalid_txn_state),
    (S.COMPLETE_COMMIT, True, ErrorCode.none),
    (S.COMPLETE_COMMIT, False, ErrorCode.invalid_txn_state),
    (S.COMPLETE_ABORT, False, ErrorCode.none),
    (S.COMPLETE_ABORT, True, ErrorCode.invalid_txn_state),
])
def test_end_txn_answers(state: TxnState, committed: bool, expected: ErrorCode) -> None:
    d = Driver()
    d.to(state)
    writes = len(d.log)
    assert d.end(committed) is expected
    assert len(d.log) == writes and d.state() is state


def test_end_txn_unknown_and_fenced() -> None:
    d = Driver()
    assert d.call(d.core.end_txn, TID, 1, 0, True, d.now) == EndResult(
        ErrorCode.invalid_producer_id_mapping)
    d.to(S.ONGOING)
    assert d.end(True, epoch=9) is ErrorCode.producer_fenced


def test_prepare_write_failure_keeps_ongoing() -> None:
    d = Driver()
    d.to(S.ONGOING)
    d.fail_writes = ErrorCode.not_leader_or_follower
    assert d.end(True) is ErrorCode.not_coordinator
    assert d.state() is S.ONGOING and d.markers == []


def test_failed_complete_write_is_retried_on_tick() -> None:
    d = Driver()
    d.to(S.PREPARE_COMMIT)
    d.fail_writes = ErrorCode.request_timed_out
    d.markers_done()
    assert d.state() is S.PREPARE_COMMIT
    d.fail_writes = None
    d.run(d.core.tick(d.now))
    assert d.state() is S.COMPLETE_COMMIT


def test_markers_of_an_older_epoch_complete_nothing() -> None:
    d = Driver()
    d.to(S.PREPARE_COMMIT)
    meta = d.core.txns[TID]
    d.run(d.core.markers_completed(TID, meta.producer_id, meta.producer_epoch - 1, d.now))
    assert d.state() is S.PREPARE_COMMIT


# ---- KIP-360 and epoch exhaustion ---------------------------------------------------------


def test_kip360_recovery_with_the_current_epoch_bumps() -> None:
    d = Driver()
    d.to(S.COMPLETE_ABORT)
    meta = d.core.txns[TID]
    r = d.init(pid=meta.producer_id, epoch=meta.producer_epoch)
    assert (r.error, r.producer_epoch) == (ErrorCode.none, 1)


def test_kip360_retry_with_the_last_epoch_returns_the_same_epoch() -> None:
    d = Driver()
    d.to(S.EMPTY)  # epoch 0
    assert d.init(pid=1000, epoch=0).producer_epoch == 1  # last epoch 0
    r = d.init(pid=1000, epoch=0)  # the answer was lost: same result
    assert (r.error, r.producer_epoch) == (ErrorCode.none, 1)


def test_kip360_other_producer_or_old_epoch_is_fenced() -> None:
    d = Driver()
    d.to(S.EMPTY)
    d.init()
    d.init()  # epoch 2, last epoch -1
    assert d.init(pid=4242, epoch=0).error is ErrorCode.producer_fenced
    assert d.init(pid=1000, epoch=0).error is ErrorCode.producer_fenced


def test_exhausted_epoch_rotates_the_producer_id() -> None:
    d = Driver()
    d.to(S.EMPTY)
    d.core.txns[TID].producer_epoch = MAX_PRODUCER_EPOCH - 1
    assert d.core.wants_producer_id(TID)
    assert d.init(new_pid=None) is NEED_PRODUCER_ID
    r = d.init(new_pid=2000)
    assert (r.error, r.producer_id, r.producer_epoch) == (ErrorCode.none, 2000, 0)
    assert d.core.txns[TID].previous_producer_id == 1000


# ---- loading and failover -----------------------------------------------------------------


def test_replay_resumes_prepared_transactions() -> None:
    d = Driver()
    d.to(S.PREPARE_COMMIT)
    d.init("txn-b")
    new = TransactionCoordinator(CONFIG, coordinator_epoch=6, now_ms=T0)
    for tid, value in d.log:
        new.replay(tid, None if value is None else decode_value(encode_value(value)))  # type: ignore[arg-type]
    fx = new.finish_loading(T0)
    [m] = fx.markers
    assert (m.transactional_id, m.committed, m.partitions) == (TID, True, {P1})
    assert new.txns["txn-b"].state is S.EMPTY
    new.replay("txn-b", None)
    assert "txn-b" not in new.txns


def test_unload_answers_pending_writes_not_coordinator() -> None:
    core = TransactionCoordinator(CONFIG, 1, T0)
    fx = core.init_producer_id(1, TID, 60000, T0, new_producer_id=7)
    assert fx.writes and not fx.replies
    fx = core.unload()
    assert [(r.token, r.result) for r in fx.replies] == [
        (1, InitResult(ErrorCode.not_coordinator))]


def test_operator_abort() -> None:
    d = Driver()
    assert d.call(d.core.abort, TID, d.now) is ErrorCode.transactional_id_not_found
    d.to(S.EMPTY)
    assert d.call(d.core.abort, TID, d.now) is ErrorCode.invalid_txn_state
    assert d.add([P1]) is ErrorCode.none
    assert d.call(d.core.abort, TID, d.now) is ErrorCode.none
    assert d.state() is S.PREPARE_ABORT


def test_list_filters() -> None:
    d = Driver()
    d.to(S.ONGOING)
    d.init("txn-b", new_pid=2000)
    assert [t.transactional_id for t in d.core.list([S.ONGOING])] == [TID]
    assert [t.transactional_id for t in d.core.list(producer_ids=[2000])] == ["txn-b"]
    assert d.core.list(min_duration_ms=10, now_ms=d.now + 5) == []
    assert [t.transactional_id for t in d.core.list(min_duration_ms=10, now_ms=d.now + 50)] \
        == [TID]
