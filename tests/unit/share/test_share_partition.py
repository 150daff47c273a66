"""The pure share-partition (broker/share/partition.py): each transition at the top of the
module, and properties over random operation sequences."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from broker.share.partition import (
    AcknowledgeType,
    AcquiredRange,
    RecordState,
    ShareLimits,
    SharePartition,
)

LIMITS = ShareLimits(record_lock_duration_ms=1000, delivery_count_limit=3, max_record_locks=10)
A, B = "member-a", "member-b"
ACCEPT, RELEASE, REJECT, GAP, RENEW = (int(t) for t in (
    AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT,
    AcknowledgeType.GAP, AcknowledgeType.RENEW))


def test_acquire_locks_new_records_with_delivery_count_one() -> None:
    sp = SharePartition(5, LIMITS)
    assert sp.acquire(A, [(5, 7)], 100, now_ms=0) == [AcquiredRange(5, 7, 1)]
    assert sp.state_of(6).state is RecordState.ACQUIRED
    assert sp.state_of(6).deadline_ms == 1000 and sp.state_of(6).member_id == A
    assert sp.end_offset == 8 and sp.start_offset == 5
    # acquired records are not acquired again
    assert sp.acquire(B, [(5, 7)], 100, now_ms=1) == []
    assert sp.next_fetch_offset(1) == 8


def test_offsets_below_start_are_never_acquired() -> None:
    sp = SharePartition(5, LIMITS)
    assert sp.acquire(A, [(0, 6)], 100, now_ms=0) == [AcquiredRange(5, 6, 1)]


def test_accept_advances_the_start_offset() -> None:
    sp = SharePartition(0, LIMITS)
    sp.acquire(A, [(0, 3)], 100, 0)
    assert sp.acknowledge(A, 1, 1, [ACCEPT], 10) is ErrorCode.none
    assert sp.start_offset == 0  # 0 is still acquired
    assert sp.acknowledge(A, 0, 0, [ACCEPT], 10) is ErrorCode.none
    assert sp.start_offset == 2 and 0 not in sp.records and 1 not in sp.records


def test_release_makes_available_again_with_a_higher_count() -> None:
    sp = SharePartition(0, LIMITS)
    sp.acquire(A, [(0, 0)], 100, 0)
    assert sp.acknowledge(A, 0, 0, [RELEASE], 10) is ErrorCode.none
    assert sp.state_of(0).state is RecordState.AVAILABLE
    assert sp.next_fetch_offset(10) == 0
    assert sp.acquire(B, [(0, 0)], 100, 20) == [AcquiredRange(0, 0, 2)]


def test_reject_and_gap_archive() -> None:
    sp = SharePartition(0, LIMITS)
    sp.acquire(A, [(0, 2)], 100, 0)
    assert sp.acknowledge(A, 1, 2, [REJECT, GAP], 10) is ErrorCode.none
    assert sp.state_of(1).state is RecordState.ARCHIVED
    assert sp.state_of(2).state is RecordState.ARCHIVED
    assert sp.acknowledge(A, 0, 0, [ACCEPT], 10) is ErrorCode.none
    assert sp.start_offset == 3 and not sp.records


def test_lock_expiry_returns_records_then_archives_at_the_limit() -> None:
    sp = SharePartition(0, LIMITS)
    now = 0
    for count in (1, 2, 3):
        assert sp.acquire(A, [(0, 0)], 100, now) == [AcquiredRange(0, 0, count)]
        now += 999
        assert sp.expire(now) == []
        now += 1
        assert sp.expire(now) == [0]
    # delivered 3 times (the limit): archived, never delivered again
    assert sp.acquire(A, [(0, 0)], 100, now) == []
    assert sp.start_offset == 1
    assert sp.lock_timeouts == 3 and sp.in_flight_message_count() == 0


def test_release_at_the_limit_archives() -> None:
    sp = SharePartition(0, LIMITS)
    for _ in range(3):
        assert sp.acquire(A, [(0, 0)], 100, 0)
        assert sp.acknowledge(A, 0, 0, [RELEASE], 0) is ErrorCode.none
    assert sp.start_offset == 1 and sp.next_fetch_offset(0) == 1


def test_renew_extends_the_lock() -> None:
    sp = SharePartition(0, LIMITS)
    sp.acquire(A, [(0, 0)], 100, 0)
    assert sp.acknowledge(A, 0, 0, [RENEW], 900) is ErrorCode.none
    assert sp.expire(1500) == []
    assert sp.state_of(0).state is RecordState.ACQUIRED
    assert sp.expire(1900) == [0]


def test_acknowledging_what_the_member_does_not_hold_is_refused_whole() -> None:
    sp = SharePartition(0, LIMITS)
    sp.acquire(A, [(0, 1)], 100, 0)
    assert sp.acknowledge(B, 0, 0, [ACCEPT], 10) is ErrorCode.invalid_record_state
    # offset 2 was never delivered: the whole batch changes nothing
    assert sp.acknowledge(A, 0, 2, [ACCEPT], 10) is ErrorCode.invalid_record_state
    assert sp.state_of(0).state is RecordState.ACQUIRED
    # after the lock expired the record is no longer the member's
    assert sp.acknowledge(A, 0, 0, [ACCEPT], 5000) is ErrorCode.invalid_record_state


def test_malformed_batches_are_invalid_requests() -> None:
    sp = SharePartition(0, LIMITS)
    sp.acquire(A, [(0, 3)], 100, 0)
    assert sp.acknowledge(A, 2, 1, [ACCEPT], 0) is ErrorCode.invalid_request
    assert sp.acknowledge(A, 0, 3, [ACCEPT, ACCEPT], 0) is ErrorCode.invalid_request
    assert sp.acknowledge(A, 0, 0, [], 0) is ErrorCode.invalid_request
    assert sp.acknowledge(A, 0, 0, [9], 0) is ErrorCode.invalid_request


def test_max_records_and_max_record_locks_bound_acquisition() -> None:
    sp = SharePartition(0, LIMITS)
    assert sp.acquire(A, [(0, 99)], 4, 0) == [AcquiredRange(0, 3, 1)]
    # the window holds at most 10 in-flight offsets
    assert sp.acquire(B, [(4, 99)], 100, 0) == [AcquiredRange(4, 9, 1)]
    assert not sp.can_acquire(0)
    assert sp.acknowledge(A, 0, 3, [ACCEPT], 0) is ErrorCode.none
    assert sp.can_acquire(0)
    assert sp.acquire(A, [(10, 99)], 100, 0) == [AcquiredRange(10, 13, 1)]


def test_member_release_and_control_batches() -> None:
    sp = SharePartition(0, LIMITS)
    sp.acquire(A, [(0, 1)], 100, 0)
    sp.acquire(B, [(2, 2)], 100, 0)
    assert sp.release_member(A) == 2
    assert sp.state_of(0).state is RecordState.AVAILABLE
    assert sp.state_of(2).member_id == B
    sp.skip(3, 3)  # a transaction marker
    sp.acquire(B, [(4, 4)], 100, 0)
    assert sp.state_of(3).state is RecordState.ARCHIVED
    assert sp.next_fetch_offset(0) == 0


def test_offsets_the_log_skipped_are_archived() -> None:
    sp = SharePartition(0, LIMITS)
    assert sp.acquire(A, [(0, 0), (5, 5)], 100, 0) == [AcquiredRange(0, 0, 1),
                                                       AcquiredRange(5, 5, 1)]
    assert all(sp.state_of(o).state is RecordState.ARCHIVED for o in range(1, 5))
    sp.acknowledge(A, 0, 0, [ACCEPT], 0)
    assert sp.start_offset == 5


def test_reset_start_forgets_what_the_log_dropped() -> None:
    sp = SharePartition(0, LIMITS)
    sp.acquire(A, [(0, 3)], 100, 0)
    sp.reset_start(2)
    assert sp.start_offset == 2 and set(sp.records) == {2, 3}


# ---- properties ---------------------------------------------------------------------------

_OPS = st.lists(st.tuples(
    st.sampled_from(["acquire", "ack", "expire", "leave"]),
    st.sampled_from([A, B]),
    st.integers(0, 14), st.integers(0, 4), st.integers(0, 4), st.integers(0, 700)),
    max_size=60)


@settings(max_examples=100, deadline=None)
@given(_OPS)
def test_invariants_over_random_operations(ops: list[tuple[str, str, int, int, int, int]]
                                           ) -> None:
    sp = SharePartition(0, LIMITS)
    now = 0
    accepted: set[int] = set()
    archived: set[int] = set()
    log_end = 15
    for op, member, first, length, kind, dt in ops:
        now += dt
        if op == "acquire":
            got = sp.acquire(member, [(first, min(first + length, log_end - 1))], 5, now)
            for r in got:
                for off in range(r.first_offset, r.last_offset + 1):
                    # nothing ACCEPTed or archived is delivered again
                    assert off not in accepted and off not in archived
                    assert 1 <= r.delivery_count <= LIMITS.delivery_count_limit
        elif op == "ack":
            types = [(ACCEPT, RELEASE, REJECT, GAP, RENEW)[kind]]
            before = {o: (r.state, r.member_id) for o, r in sp.records.items()}
            last = first + length
            err = sp.acknowledge(member, first, last, types, now)
            if err is ErrorCode.none:
                for off in range(first, last + 1):
                    assert before[off] == (RecordState.ACQUIRED, member)
                    if types[0] == ACCEPT:
                        accepted.add(off)
            else:
                assert err is ErrorCode.invalid_record_state
        elif op == "expire":
            sp.expire(now)
        else:
            sp.release_member(member)
        for off, r in sp.records.items():
            if r.state is RecordState.ARCHIVED:
                archived.add(off)
        # the window: SPSO <= SPEO, its size bounded, no state below SPSO, SPSO on an open one
        assert sp.start_offset <= sp.end_offset
        assert sp.end_offset - sp.start_offset <= LIMITS.max_record_locks
        assert all(sp.start_offset <= o < sp.end_offset for o in sp.records)
        if sp.start_offset < sp.end_offset:
            assert sp.records[sp.start_offset].state not in (RecordState.ACKNOWLEDGED,
                                                             RecordState.ARCHIVED)
        for r in sp.records.values():
            assert r.delivery_count <= LIMITS.delivery_count_limit
            assert (r.member_id is not None) == (r.state is RecordState.ACQUIRED)


# ---- the persisted state ---------------------------------------------------------------------


def test_persisted_state_carries_the_start_before_the_acknowledgements() -> None:
    """As Kafka's SharePartition writes it: the SPSO before the acknowledgements a write
    records, the completed records from there, an acquired record as AVAILABLE with its
    count; the moved SPSO goes with the next write."""
    sp = SharePartition(0, LIMITS)
    sp.acquire(A, [(0, 5)], 100, now_ms=0)
    assert sp.acknowledge(A, 0, 2, [ACCEPT, REJECT, ACCEPT], 0) is ErrorCode.none
    assert sp.acknowledge(A, 4, 4, [RELEASE], 0) is ErrorCode.none
    assert sp.start_offset == 3 and sp.persisted_start() == 0
    assert sp.persisted_batches() == [(0, 0, 2, 1), (1, 1, 4, 1), (2, 2, 2, 1), (3, 5, 0, 1)]
    sp.persisted(sp.start_offset)
    assert sp.persisted_start() == 3
    assert sp.persisted_batches() == [(3, 5, 0, 1)]


def test_from_state_rebuilds_what_was_persisted() -> None:
    sp = SharePartition(0, LIMITS)
    sp.acquire(A, [(0, 5)], 100, now_ms=0)
    sp.acknowledge(A, 0, 0, [ACCEPT], 0)
    sp.acknowledge(A, 2, 2, [REJECT], 0)
    sp.acknowledge(A, 3, 3, [RELEASE], 0)
    again = SharePartition.from_state(sp.persisted_start(), sp.persisted_batches(), LIMITS)
    assert again.start_offset == 1 and again.end_offset == 6
    # nothing ACCEPTed or REJECTed is delivered again; the rest is, its count going on
    assert again.acquire(B, [(0, 9)], 100, now_ms=0) == [
        AcquiredRange(1, 1, 2), AcquiredRange(3, 5, 2), AcquiredRange(6, 9, 1)]
    # a persisted ACQUIRED (Kafka never writes one) counts as AVAILABLE; batches before the
    # start are ignored
    odd = SharePartition.from_state(4, [(0, 3, 2, 1), (4, 4, 1, 2), (6, 7, 4, 1)], LIMITS)
    assert odd.start_offset == 4 and odd.state_of(4).state is RecordState.AVAILABLE
    assert odd.acquire(A, [(4, 8)], 100, now_ms=0) == [AcquiredRange(4, 4, 3),
                                                       AcquiredRange(5, 5, 1),
                                                       AcquiredRange(8, 8, 1)]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([A, B]), st.integers(0, 12), st.integers(0, 3),
                          st.sampled_from([ACCEPT, RELEASE, REJECT]), st.booleans()),
                max_size=25))
def test_a_reload_delivers_what_the_original_would(
        ops: list[tuple[str, int, int, int, bool]]) -> None:
    """Whatever happened (and whichever writes were made), a share-partition rebuilt from
    its persisted state delivers exactly what the original would once its members left:
    the same offsets with the same delivery counts, never a completed record."""
    sp = SharePartition(0, LIMITS)
    completed: set[int] = set()
    for member, first, length, kind, written in ops:
        sp.acquire(member, [(first, first + length)], 100, now_ms=0)
        for off in range(first, first + length + 1):
            if sp.acknowledge(member, off, off, [kind], 0) is ErrorCode.none \
                    and kind != RELEASE:
                completed.add(off)
        if written:
            sp.persisted(sp.start_offset)
    again = SharePartition.from_state(sp.persisted_start(), sp.persisted_batches(), LIMITS)
    sp.release_member(A)
    sp.release_member(B)
    expected = sp.acquire("c", [(0, 40)], 1000, now_ms=0)
    got = again.acquire("c", [(0, 40)], 1000, now_ms=0)
    assert got == expected
    assert not {o for r in got for o in range(r.first_offset, r.last_offset + 1)} & completed
