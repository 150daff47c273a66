"""KIP-890 part 1 on the log side: the producer's verification guard (Kafka's
VerificationStateEntry) in the pure producer state, and a leader's append that needs it."""

from __future__ import annotations

from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.protocol.records import TRANSACTIONAL_MASK, BatchHeader
from broker.replication.producer_state import ProducerStateManager, VerificationGuard
from tests.unit.replication.test_producer_state import PID, TS, Log, hdr
from tests.unit.replication.test_transactions import Producer, leader, open_log


def txn(seq: int = 0, epoch: int = 0, n: int = 1, control: bool = False) -> BatchHeader:
    h = hdr(epoch=epoch, seq=seq, n=n, control=control)
    fields = {f: getattr(h, f) for f in h.__dataclass_fields__}
    fields["attributes"] |= TRANSACTIONAL_MASK
    return BatchHeader(**fields)


def refused(state: ProducerStateManager, h: BatchHeader,
            guard: VerificationGuard | None) -> ErrorCode:
    with pytest.raises(KafkaError) as info:
        state.validate([h], verify=True, guard=guard)
    return info.value.error_code


def test_a_guard_is_made_once_and_kept_until_the_transaction_is_in_the_log() -> None:
    state = ProducerStateManager()
    g = state.start_verification(PID, 0, 0, TS)
    assert isinstance(g, VerificationGuard)
    assert state.start_verification(PID, 0, 0, TS + 1) is g  # a retry reuses it
    assert state.validate([txn()], verify=True, guard=g) is None
    Log(state).write(txn())
    # the transaction is open here now: no guard, nothing to verify
    assert state.verification_entry(PID) is None
    assert state.start_verification(PID, 1, 0, TS) is None
    assert state.validate([txn(seq=1)], verify=True, guard=None) is None


def test_opening_a_transaction_without_the_current_guard_is_invalid_txn_state() -> None:
    state = ProducerStateManager()
    assert refused(state, txn(), None) is ErrorCode.invalid_txn_state
    g = state.start_verification(PID, 0, 0, TS)
    assert refused(state, txn(), VerificationGuard()) is ErrorCode.invalid_txn_state
    assert g is not None and state.validate([txn()], verify=True, guard=g) is None
    # without verification (disabled, or not a client's append) nothing is asked
    assert state.validate([txn()]) is None
    # non-transactional batches never need a guard
    assert state.validate([hdr(pid=PID + 1)], verify=True) is None


def test_a_marker_written_while_verifying_makes_the_late_write_fail() -> None:
    """The ABA case: the guard taken before asking the coordinator is dropped by the end
    marker of the transaction; a new guard for the next transaction is another object."""
    state = ProducerStateManager()
    log = Log(state)
    late = state.start_verification(PID, 0, 0, TS)         # the write, before asking
    assert late is not None
    # meanwhile the coordinator fenced the producer and its ABORT marker got here
    log.write(txn(epoch=1, seq=-1, control=True))
    assert state.verification_entry(PID) is None
    assert refused(state, txn(seq=0), late) is ErrorCode.invalid_txn_state
    fresh = state.start_verification(PID, 0, 1, TS)
    assert fresh is not None and fresh is not late


def test_a_higher_sequence_cannot_pass_a_lower_one_still_being_verified() -> None:
    state = ProducerStateManager()
    g = state.start_verification(PID, 5, 0, TS)
    assert state.start_verification(PID, 3, 0, TS) is g
    entry = state.verification_entry(PID)
    assert entry is not None and entry.lowest_sequence == 3
    with pytest.raises(KafkaError) as info:
        state.validate([txn(seq=5)], verify=True, guard=g)
    assert info.value.error_code is ErrorCode.out_of_order_sequence_number
    assert state.validate([txn(seq=3)], verify=True, guard=g) is None
    # a newer epoch starts over
    state.start_verification(PID, 0, 1, TS)
    entry = state.verification_entry(PID)
    assert entry is not None and (entry.epoch, entry.lowest_sequence) == (1, 0)


def test_unverified_guards_expire_with_producer_id_expiration() -> None:
    state = ProducerStateManager()
    state.start_verification(PID, 0, 0, TS)
    state.expire(TS + 999, 1000)
    assert state.verification_entry(PID) is not None
    state.expire(TS + 1000, 1000)
    assert state.verification_entry(PID) is None
    state.start_verification(PID, 0, 0, TS)
    state.clear()
    assert state.verification_entry(PID) is None


def test_leader_append_needs_the_guard_and_writes_nothing_without_it(tmp_path: Path) -> None:
    part = leader(open_log(tmp_path / "t-0"))
    p = Producer(7)
    batch = p.batch([b"a"])
    with pytest.raises(KafkaError) as info:
        part.append_as_leader(batch, 1, verify=True, guard=None)
    assert info.value.error_code is ErrorCode.invalid_txn_state
    assert part.log.log_end_offset == 0
    guard = part.start_verification(7, 0, 0)
    # an end marker reaches the partition before the verified write
    part.write_marker(producer_id=7, producer_epoch=0, coordinator_epoch=0, committed=False)
    end = part.log.log_end_offset
    with pytest.raises(KafkaError) as info:
        part.append_as_leader(batch, 1, verify=True, guard=guard)
    assert info.value.error_code is ErrorCode.invalid_txn_state
    assert part.log.log_end_offset == end and not part.producer_state.ongoing_txns
    guard = part.start_verification(7, 0, 0)
    result = part.append_as_leader(batch, 1, verify=True, guard=guard)
    assert result.base_offset == end and part.producer_state.ongoing_txns == {7: end}
    part.log.close()


def test_v2_next_transaction_before_the_previous_marker_is_verified(tmp_path: Path) -> None:
    """Transactions V2 bump the epoch at every EndTxn, so the next transaction's first batch
    (epoch 1) can reach the leader while the previous transaction (epoch 0) is still open
    here, its COMMIT marker (which carries epoch 1) not written yet. Kafka 4.4 verifies that
    batch (UnifiedLog.hasOngoingTransaction compares the epoch), and the coordinator holds
    it off with CONCURRENT_TRANSACTIONS until the previous transaction is complete. Skipping
    the verification let the old marker end the new transaction's records too (the Java
    client then got PRODUCER_FENCED aborting that transaction)."""
    part = leader(open_log(tmp_path / "t-0"))
    first = Producer(7)
    guard = part.start_verification(7, 0, 0, supports_epoch_bump=True)
    part.append_as_leader(first.batch([b"t1"]), 1, verify=True, guard=guard)
    state = part.producer_state
    assert state.has_ongoing_txn(7, 0) and not state.has_ongoing_txn(7, 1)
    second = Producer(7, epoch=1)
    batch = second.batch([b"t2"])
    # the open transaction at epoch 0 does not let an epoch 1 batch in unverified
    with pytest.raises(KafkaError) as info:
        part.append_as_leader(batch, 1, verify=True, guard=None)
    assert info.value.error_code is ErrorCode.invalid_txn_state
    g2 = part.start_verification(7, 0, 1, supports_epoch_bump=True)
    assert g2 is not None
    # the previous transaction's marker, at the bumped epoch, keeps the verification going
    part.write_marker(producer_id=7, producer_epoch=1, coordinator_epoch=0, committed=True)
    entry = state.verification_entry(7)
    assert entry is not None and entry.guard is g2
    assert not state.ongoing_txns
    result = part.append_as_leader(batch, 1, verify=True, guard=g2)
    assert state.ongoing_txns == {7: result.base_offset}
    assert state.has_ongoing_txn(7, 1)
    part.log.close()


def test_a_v1_marker_at_the_verified_epoch_still_drops_the_guard() -> None:
    """Transactions V1 keep the epoch: a marker at the epoch being verified ends the
    transaction that verification was for (the ABA case), as in Kafka."""
    state = ProducerStateManager()
    g = state.start_verification(PID, 0, 0, TS)
    assert g is not None
    Log(state).write(txn(epoch=0, seq=-1, control=True))
    assert state.verification_entry(PID) is None
    v2 = ProducerStateManager()
    g2 = v2.start_verification(PID, 0, 0, TS, supports_epoch_bump=True)
    Log(v2).write(txn(epoch=0, seq=-1, control=True))
    entry = v2.verification_entry(PID)
    assert entry is not None and entry.guard is g2
