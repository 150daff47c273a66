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
from tests.unit.share import per_offset_model

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
    assert sp.start_offset == 2 and 0 not in sp.in_flight() and 1 not in sp.in_flight()


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
    assert sp.start_offset == 3 and not sp.in_flight()


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
    assert sp.start_offset == 2 and set(sp.in_flight()) == {2, 3}


def test_in_flight_batches_are_the_new_offsets_of_each_acquisition() -> None:
    """Kafka's InFlightBatchCount and InFlightBatchMessageCount: a batch per acquisition of
    new offsets (the ones it archived on the way included), none for a redelivery, a batch
    gone once the start offset is past it; a loaded state's batches are batches."""
    sp = SharePartition(0, LIMITS)
    sp.acquire(A, [(0, 2)], 100, 0)
    sp.acquire(B, [(3, 3), (6, 6)], 100, 0)  # 4 and 5 are not in the log: archived
    assert sp.in_flight_batch_count() == 2 and sp.take_new_batches() == [3, 4]
    assert sp.take_new_batches() == []
    sp.acknowledge(A, 1, 1, [RELEASE], 0)
    assert sp.acquire(B, [(0, 12)], 100, 0) == [AcquiredRange(1, 1, 2), AcquiredRange(7, 9, 1)]
    assert sp.in_flight_batch_count() == 3 and sp.take_new_batches() == [3]
    sp.acknowledge(A, 0, 0, [ACCEPT], 0)
    sp.acknowledge(B, 1, 1, [ACCEPT], 0)
    assert sp.start_offset == 2 and sp.in_flight_batch_count() == 3  # 2 is still held
    sp.acknowledge(A, 2, 2, [ACCEPT], 0)
    sp.acknowledge(B, 3, 3, [ACCEPT], 0)
    assert sp.start_offset == 6 and sp.in_flight_batch_count() == 2
    sp.acknowledge(B, 6, 6, [ACCEPT], 0)
    assert sp.start_offset == 7 and sp.in_flight_batch_count() == 1
    sp.reset_start(10)
    assert sp.in_flight_batch_count() == 0
    loaded = SharePartition.from_state(3, [(0, 2, 2, 1), (3, 4, 0, 1), (5, 5, 4, 1)], LIMITS)
    assert loaded.in_flight_batch_count() == 2 and loaded.take_new_batches() == [2, 1]


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
            before = {o: (r.state, r.member_id) for o, r in sp.in_flight().items()}
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
        states = sp.in_flight()
        for off, r in states.items():
            if r.state is RecordState.ARCHIVED:
                archived.add(off)
        # the window: SPSO <= SPEO, its size bounded, no state below SPSO, SPSO on an open one
        assert sp.start_offset <= sp.end_offset
        assert sp.end_offset - sp.start_offset <= LIMITS.max_record_locks
        assert all(sp.start_offset <= o < sp.end_offset for o in states)
        if sp.start_offset < sp.end_offset:
            assert states[sp.start_offset].state not in (RecordState.ACKNOWLEDGED,
                                                             RecordState.ARCHIVED)
        for r in states.values():
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


def test_a_marker_read_with_its_transaction_archives_only_itself() -> None:
    """The log's batches in order: a committed transaction (0-2), its marker (3), a record
    (4). The records ahead of the marker are acquired, not archived with it."""
    sp = SharePartition(0, LIMITS)
    got = sp.acquire_batches(A, [(0, 2, True), (3, 3, False), (4, 4, True)], 100, 0)
    assert got == [AcquiredRange(0, 2, 1), AcquiredRange(4, 4, 1)]
    assert sp.state_of(3).state is RecordState.ARCHIVED


def test_batches_past_a_cut_short_one_wait_for_the_next_fetch() -> None:
    """Two records fit the budget: the walk stops inside the first batch, so the marker and
    the aborted batch after it are not archived before offsets 2 and 3 were offered."""
    sp = SharePartition(0, LIMITS)
    got = sp.acquire_batches(A, [(0, 3, True), (4, 4, False), (5, 6, False)], 2, 0)
    assert got == [AcquiredRange(0, 1, 1)]
    assert sp.end_offset == 2
    got = sp.acquire_batches(B, [(0, 3, True), (4, 4, False), (5, 6, False), (7, 7, True)],
                             100, 0)
    assert got == [AcquiredRange(2, 3, 1), AcquiredRange(7, 7, 1)]
    assert all(sp.state_of(o).state is RecordState.ARCHIVED for o in (4, 5, 6))


def test_the_batch_optimized_mode_acquires_to_the_end_of_the_batch_holding_the_limit() -> None:
    """Kafka's default acquire mode (KIP-1206) aligns an acquisition with batch boundaries:
    with MaxRecords 3, the batch 2-5 holding the third record is acquired to its end, and the
    next batch is not begun; the record-limit mode stops at the third record."""
    batches = [(0, 1, True), (2, 5, True), (6, 9, True)]
    sp = SharePartition(0, LIMITS)
    assert sp.acquire_batches(A, batches, 3, 0, whole_batches=True) == [AcquiredRange(0, 5, 1)]
    sp = SharePartition(0, LIMITS)
    assert sp.acquire_batches(A, batches, 3, 0) == [AcquiredRange(0, 2, 1)]


# ---- against the per-offset model ------------------------------------------------------------

_MODEL_OPS = st.lists(st.one_of(
    st.tuples(st.just("batches"), st.sampled_from([A, B]),
              st.lists(st.tuples(st.integers(1, 6), st.booleans()), min_size=1, max_size=4),
              st.integers(1, 12), st.booleans(), st.integers(0, 3)),
    st.tuples(st.just("acquire"), st.sampled_from([A, B]), st.integers(0, 40),
              st.integers(0, 8), st.integers(1, 12)),
    st.tuples(st.just("ack"), st.sampled_from([A, B]), st.integers(0, 40), st.integers(0, 6),
              st.lists(st.integers(0, 5), min_size=1, max_size=7)),
    st.tuples(st.just("time"), st.integers(0, 1500)),
    st.tuples(st.just("leave"), st.sampled_from([A, B])),
    st.tuples(st.just("reset"), st.integers(0, 45)),
    st.tuples(st.just("skip"), st.integers(0, 3)),
    st.tuples(st.just("persist"), st.booleans()),
    st.tuples(st.just("reload")),
), max_size=50)


def _same(sp: SharePartition, model: per_offset_model.SharePartition, now: int) -> None:
    assert (sp.start_offset, sp.end_offset) == (model.start_offset, model.end_offset)
    for off in range(max(0, sp.start_offset - 2), sp.end_offset + 2):
        mine, theirs = sp.state_of(off), model.state_of(off)
        assert (mine.state, mine.delivery_count, mine.member_id, mine.deadline_ms) == (
            theirs.state, theirs.delivery_count, theirs.member_id, theirs.deadline_ms), off
    assert sp.persisted_start() == model.persisted_start()
    assert sp.persisted_batches() == model.persisted_batches()
    assert sp.lock_timeouts == model.lock_timeouts
    assert sp.next_deadline() == model.next_deadline()
    assert sp.acquired_by_anyone() == model.acquired_by_anyone()
    for member in (A, B):
        assert sp.acquired_by(member) == sorted(model.acquired_by(member))
    assert sp.in_flight_message_count() == model.in_flight_message_count()
    # spans: in order, without gaps, exactly [SPSO, SPEO), neighbours never alike
    assert [s.first for s in sp.spans[:1]] == ([sp.start_offset] if sp.spans else [])
    assert all(a.last + 1 == b.first for a, b in zip(sp.spans, sp.spans[1:], strict=False))
    assert (sp.spans[-1].last + 1 if sp.spans else sp.start_offset) == sp.end_offset
    assert not any(a.alike(b) for a, b in zip(sp.spans, sp.spans[1:], strict=False))
    assert sp.can_acquire(now) == model.can_acquire(now)


@settings(max_examples=300, deadline=None)
@given(_MODEL_OPS)
def test_spans_answer_as_the_per_offset_model(ops: list[tuple]) -> None:  # type: ignore[type-arg]
    """Random sequences of every transition (batches with transaction markers and aborted
    data, the record-limit and whole-batch modes, per-offset acknowledgement types, lock
    expiry, members leaving, the log start moving, writes and reloads of the persisted
    state): the span-based share-partition answers every call as the per-offset model does
    and holds the same state after each."""
    sp = SharePartition(0, LIMITS)
    model = per_offset_model.SharePartition(0, per_offset_model.ShareLimits(
        LIMITS.record_lock_duration_ms, LIMITS.delivery_count_limit, LIMITS.max_record_locks))
    now, log_end = 0, 0
    dead: set[int] = set()
    for op in ops:
        kind = op[0]
        if kind == "batches":
            _, member, shapes, max_records, whole, back = op
            start = max(0, min(sp.next_fetch_offset(now), log_end) - back)
            batches, off = [], start
            for size, deliverable in shapes:
                batches.append((off, off + size - 1, deliverable))
                off += size
            log_end = max(log_end, off)
            got = sp.acquire_batches(member, batches, max_records, now, whole_batches=whole)
            want = model.acquire_batches(member, batches, max_records, now,
                                         whole_batches=whole)
            assert [(r.first_offset, r.last_offset, r.delivery_count) for r in got] == [
                (r.first_offset, r.last_offset, r.delivery_count) for r in want]
        elif kind == "acquire":
            _, member, first, length, max_records = op
            got = sp.acquire(member, [(first, first + length)], max_records, now)
            want = model.acquire(member, [(first, first + length)], max_records, now)
            assert [(r.first_offset, r.last_offset, r.delivery_count) for r in got] == [
                (r.first_offset, r.last_offset, r.delivery_count) for r in want]
        elif kind == "ack":
            _, member, first, length, types = op
            types = types[:1] if len(types) != length + 1 else types
            assert sp.acknowledge(member, first, first + length, types, now) == \
                model.acknowledge(member, first, first + length, types, now)
        elif kind == "time":
            now += op[1]
            assert sp.expire(now) == sorted(model.expire(now))
        elif kind == "leave":
            assert sp.release_member(op[1]) == model.release_member(op[1])
        elif kind == "reset":
            sp.reset_start(op[1])
            model.reset_start(op[1])
        elif kind == "skip":
            first = sp.end_offset + op[1]
            sp.skip(first, first)
            model.skip(first, first)
        elif kind == "persist":
            assert sp.persisted_batches() == model.persisted_batches()
            if op[1]:
                upto = sp.start_offset
                sp.persisted(upto)
                model.persisted(upto)
        else:
            start, batches = sp.persisted_start(), sp.persisted_batches()
            sp = SharePartition.from_state(start, batches, LIMITS)
            model = per_offset_model.SharePartition.from_state(start, batches, model.limits)
        _same(sp, model, now)
        # each record a REJECT or the delivery limit archived is a dead letter once
        for run in sp.take_dead():
            offsets = set(range(run.first, run.last + 1))
            assert not offsets & dead and 1 <= run.delivery_count <= LIMITS.delivery_count_limit
            assert run.rejected or run.delivery_count == LIMITS.delivery_count_limit
            assert all(sp.state_of(o).state is RecordState.ARCHIVED for o in offsets
                       if o >= sp.start_offset)
            dead |= offsets


def test_from_state_takes_the_later_of_overlapping_batches_and_fills_gaps() -> None:
    batches = [(2, 6, int(RecordState.ARCHIVED), 2), (4, 5, int(RecordState.AVAILABLE), 1),
               (9, 9, int(RecordState.ACQUIRED), 3)]
    sp = SharePartition.from_state(3, batches, LIMITS)
    model = per_offset_model.SharePartition.from_state(3, batches, model_limits())
    _same(sp, model, 0)
    assert sp.state_of(7).state is RecordState.AVAILABLE and sp.state_of(7).delivery_count == 0
    assert sp.state_of(9).state is RecordState.AVAILABLE and sp.state_of(9).delivery_count == 3


def model_limits() -> per_offset_model.ShareLimits:
    return per_offset_model.ShareLimits(LIMITS.record_lock_duration_ms,
                                        LIMITS.delivery_count_limit, LIMITS.max_record_locks)
