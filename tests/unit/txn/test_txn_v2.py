"""Transactions V2 (KIP-890 part 2) and verification (part 1) in the pure coordinator: the
epoch bumped by every EndTxn v5, its retries, the producer id taken over after the epoch
overflows, partitions added by a leader, and AddPartitionsToTxn's verify_only answers."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.txn.coordinator import (
    MAX_PRODUCER_EPOCH,
    NEED_NEXT_PRODUCER_ID,
    EndResult,
    TransactionCoordinator,
)
from broker.txn.records import decode_value, encode_value
from tests.unit.txn.test_txn_transition_table import CONFIG, P1, P2, TID, Driver, S


def v2_txn(d: Driver, parts: list[tuple[str, int]] = [P1]) -> tuple[int, int]:  # noqa: B006
    meta = d.core.txns[TID]
    r = d.call(d.core.add_partitions, TID, meta.producer_id, meta.producer_epoch, parts,
               d.now, tv2=True)
    assert r is ErrorCode.none
    assert d.core.txns[TID].client_tv2
    return meta.producer_id, meta.producer_epoch


def test_end_txn_v2_bumps_the_epoch_and_markers_carry_it() -> None:
    d = Driver()
    assert d.init().error is ErrorCode.none
    pid, epoch = v2_txn(d)
    r = d.end_result(True, epoch=epoch, tv2=True)
    assert r == EndResult(ErrorCode.none, pid, epoch + 1)
    assert d.state() is S.PREPARE_COMMIT
    (marker,) = d.markers
    assert (marker.producer_id, marker.producer_epoch, marker.committed) == (pid, epoch + 1, True)
    d.markers_done()
    assert d.state() is S.COMPLETE_COMMIT and d.core.txns[TID].producer_epoch == epoch + 1
    # the record says ClientTransactionVersion 2 and reads back as such
    _, value = d.log[-1]
    assert value is not None and value.client_transaction_version == 2
    again = decode_value(encode_value(value, 1))
    assert again == value
    # the next transaction runs at the new epoch
    _, epoch2 = v2_txn(d, [P2])
    assert epoch2 == epoch + 1
    assert d.end_result(False, epoch=epoch2, tv2=True) == EndResult(ErrorCode.none, pid,
                                                                     epoch + 2)


def test_end_txn_v2_retries_with_the_old_epoch() -> None:
    d = Driver()
    d.init()
    pid, epoch = v2_txn(d)
    assert d.end_result(True, epoch=epoch, tv2=True).error is ErrorCode.none
    # a retry while the markers are out: CONCURRENT_TRANSACTIONS, the other result invalid
    assert d.end_result(True, epoch=epoch, tv2=True).error is ErrorCode.concurrent_transactions
    assert d.end_result(False, epoch=epoch, tv2=True).error is ErrorCode.invalid_txn_state
    d.markers_done()
    # once complete, the retry gets the answer again, with the bumped epoch
    assert d.end_result(True, epoch=epoch, tv2=True) == EndResult(ErrorCode.none, pid, epoch + 1)
    assert d.end_result(False, epoch=epoch, tv2=True).error is ErrorCode.invalid_txn_state
    # an older epoch than that, or a current-epoch EndTxn with nothing ongoing
    assert d.end_result(True, epoch=epoch - 1, tv2=True).error is ErrorCode.producer_fenced
    assert d.end_result(True, epoch=epoch + 1, tv2=True).error is ErrorCode.producer_fenced


def test_end_txn_v2_overflow_takes_a_new_producer_id() -> None:
    d = Driver()
    d.init()
    meta = d.core.txns[TID]
    meta.producer_epoch = MAX_PRODUCER_EPOCH - 1  # as after 32765 transactions
    pid, epoch = v2_txn(d)
    assert d.core.wants_next_producer_id(TID, True)
    assert d.end_result(True, epoch=epoch, tv2=True) == NEED_NEXT_PRODUCER_ID
    r = d.end_result(True, epoch=epoch, tv2=True, next_pid=2000)
    assert r == EndResult(ErrorCode.none, 2000, 0)
    (marker,) = d.markers  # the markers go out under the old id at the last epoch
    assert (marker.producer_id, marker.producer_epoch) == (pid, MAX_PRODUCER_EPOCH)
    d.run(d.core.markers_completed(TID, pid, MAX_PRODUCER_EPOCH, d.now))
    meta = d.core.txns[TID]
    assert (meta.state, meta.producer_id, meta.producer_epoch, meta.previous_producer_id) == (
        S.COMPLETE_COMMIT, 2000, 0, pid)
    # the retry with the old id and epoch is recognised
    assert d.end_result(True, epoch=epoch, pid=pid, tv2=True) == EndResult(
        ErrorCode.none, 2000, 0)
    # a coordinator loaded from the log knows the same
    core = TransactionCoordinator(CONFIG, coordinator_epoch=6, now_ms=d.now)
    for tid, value in d.log:
        core.replay(tid, None if value is None else decode_value(encode_value(value, 1)))
    loaded = core.txns[TID]
    assert (loaded.producer_id, loaded.producer_epoch, loaded.client_tv2) == (2000, 0, True)


def test_v1_end_txn_keeps_the_epoch() -> None:
    d = Driver()
    d.init()
    assert d.add([P1]) is ErrorCode.none
    meta = d.core.txns[TID]
    assert not meta.client_tv2
    r = d.end_result(True)
    assert r == EndResult(ErrorCode.none, meta.producer_id, meta.producer_epoch)
    d.markers_done()
    _, value = d.log[-1]
    assert value is not None and value.client_transaction_version == 0


def test_init_producer_id_after_a_v2_transaction_starts_over_as_v1() -> None:
    d = Driver()
    d.init()
    v2_txn(d)
    d.end_result(True, tv2=True)
    d.markers_done()
    epoch = d.core.txns[TID].producer_epoch
    assert d.init().producer_epoch == epoch + 1
    assert not d.core.txns[TID].client_tv2


def test_verify_only_answers() -> None:
    d = Driver()
    d.init()
    meta = d.core.txns[TID]
    pid, epoch = meta.producer_id, meta.producer_epoch
    verify = d.core.verify_partitions
    assert verify("other", pid, epoch, [P1]) == {P1: ErrorCode.invalid_producer_id_mapping}
    assert verify(TID, pid + 1, epoch, [P1]) == {P1: ErrorCode.invalid_producer_id_mapping}
    assert verify(TID, pid, epoch + 1, [P1]) == {P1: ErrorCode.producer_fenced}
    assert verify(TID, pid, epoch, [P1]) == {P1: ErrorCode.transaction_abortable}
    assert d.add([P1]) is ErrorCode.none
    assert verify(TID, pid, epoch, [P1, P2]) == {P1: ErrorCode.none,
                                                 P2: ErrorCode.transaction_abortable}
    assert d.end(False) is ErrorCode.none
    assert verify(TID, pid, epoch, [P1]) == {P1: ErrorCode.concurrent_transactions}
    d.markers_done()
    assert verify(TID, pid, epoch, [P1]) == {P1: ErrorCode.transaction_abortable}
