"""The pure fetch-session core (KIP-227): contexts, epochs, what an incremental answer
carries, Kafka's eviction order, and the fetching side's handler."""

from __future__ import annotations

import random

from kio.schema.errors import ErrorCode

from broker.replication.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    MIN_EVICTION_MS,
    Answer,
    ContextKind,
    FetchSessionCache,
    FetchSessionHandler,
    Key,
    PartitionData,
    SessionRequest,
    next_epoch,
)


def parts(n: int, topic: str = "t", offset: int = 0) -> list[tuple[Key, PartitionData]]:
    return [((topic, i), PartitionData(offset, 1024)) for i in range(n)]


def idle(hw: int = 0) -> Answer:
    return Answer(False, False, hw, hw, 0)


def open_session(cache: FetchSessionCache, n: int, now: int = 0, *,
                 privileged: bool = False, topic: str = "t") -> int:
    ctx = cache.new_context(SessionRequest(0, INITIAL_EPOCH, parts(n, topic),
                                           privileged=privileged), now)
    assert ctx.kind is ContextKind.FULL
    session_id, include = ctx.finish([idle()] * n, now)
    assert include == [True] * n
    return session_id


def test_epochs_wrap_to_one() -> None:
    assert next_epoch(0) == 1 and next_epoch(5) == 6
    assert next_epoch(2**31 - 1) == 1
    assert next_epoch(FINAL_EPOCH) == FINAL_EPOCH


def test_sessionless_full_fetch_creates_nothing() -> None:
    cache = FetchSessionCache(10)
    ctx = cache.new_context(SessionRequest(0, FINAL_EPOCH, parts(3)), 0)
    assert ctx.kind is ContextKind.SESSIONLESS
    assert ctx.finish([idle()] * 3, 0) == (0, [True] * 3)
    assert len(cache) == 0 and cache.sessionless == 1


def test_full_fetch_creates_session_and_incremental_answers_only_changes() -> None:
    cache = FetchSessionCache(10, rng=random.Random(1))
    sid = open_session(cache, 4)
    assert sid != 0 and cache.session_epoch(sid) == 1
    # Nothing changed: an empty incremental fetch reads all four and answers none.
    ctx = cache.new_context(SessionRequest(sid, 1, []), 1)
    assert ctx.kind is ContextKind.INCREMENTAL
    assert [k for k, _ in ctx.partitions] == [("t", i) for i in range(4)]
    assert ctx.finish([idle()] * 4, 1) == (sid, [False] * 4)
    # New data on 1, a high watermark move on 2, an error on 3.
    ctx = cache.new_context(SessionRequest(sid, 2, []), 2)
    answers = [idle(), Answer(True, False, 0, 0, 0), idle(5), Answer(False, True, -1, -1, -1)]
    assert ctx.finish(answers, 2) == (sid, [False, True, True, True])
    # Partitions that returned records move last; the error partition is answered again
    # once it clears (its cached high watermark was reset).
    ctx = cache.new_context(SessionRequest(sid, 3, []), 3)
    assert [k[1] for k, _ in ctx.partitions] == [0, 2, 3, 1]
    assert ctx.finish([idle(), idle(5), idle(), idle()], 3)[1] == [False, False, True, False]
    assert cache.full == 1 and cache.incremental == 3


def test_log_start_and_last_stable_offset_changes_are_answered() -> None:
    cache = FetchSessionCache(10)
    sid = open_session(cache, 2)
    ctx = cache.new_context(SessionRequest(sid, 1, []), 1)
    assert ctx.finish([Answer(False, False, 0, 0, 3), Answer(False, False, 0, -1, 0)],
                      1)[1] == [True, True]


def test_session_errors() -> None:
    cache = FetchSessionCache(10)
    sid = open_session(cache, 1)
    ctx = cache.new_context(SessionRequest(sid + 1, 1, []), 1)
    assert (ctx.kind, ctx.error) == (ContextKind.ERROR, ErrorCode.fetch_session_id_not_found)
    ctx = cache.new_context(SessionRequest(sid, 7, []), 1)
    assert ctx.error is ErrorCode.invalid_fetch_session_epoch
    ctx = cache.new_context(SessionRequest(sid, 1, [], uses_topic_ids=True), 1)
    assert ctx.error is ErrorCode.fetch_session_topic_id_error
    # None of these moved the epoch: epoch 1 still works.
    assert cache.new_context(SessionRequest(sid, 1, []), 1).kind is ContextKind.INCREMENTAL
    assert cache.errors == 3


def test_added_updated_and_forgotten_partitions() -> None:
    cache = FetchSessionCache(10)
    sid = open_session(cache, 2)
    new = (("u", 0), PartitionData(7, 1024))
    moved = (("t", 0), PartitionData(3, 1024))
    ctx = cache.new_context(SessionRequest(sid, 1, [moved, new], forgotten=[("t", 1)]), 1)
    assert dict(ctx.partitions) == {("t", 0): PartitionData(3, 1024), ("u", 0): new[1]}
    # The new partition was never answered: it goes in the answer even when idle.
    assert ctx.finish([idle(), idle()], 1)[1] == [False, True]
    # Forgetting every partition closes the session.
    ctx = cache.new_context(SessionRequest(sid, 2, [], forgotten=[("t", 0), ("u", 0)]), 2)
    assert ctx.kind is ContextKind.SESSIONLESS and len(cache) == 0


def test_full_or_final_fetch_closes_the_session_it_names() -> None:
    cache = FetchSessionCache(10)
    sid = open_session(cache, 1)
    ctx = cache.new_context(SessionRequest(sid, FINAL_EPOCH, parts(1)), 1)
    assert ctx.kind is ContextKind.SESSIONLESS and len(cache) == 0
    sid = open_session(cache, 1)
    ctx = cache.new_context(SessionRequest(sid, INITIAL_EPOCH, parts(1)), 1)
    new_sid, _ = ctx.finish([idle()], 1)
    assert cache.session_ids() == [new_sid] and new_sid != sid


def test_zero_slots_means_no_sessions() -> None:
    cache = FetchSessionCache(0)
    ctx = cache.new_context(SessionRequest(0, INITIAL_EPOCH, parts(1)), 0)
    assert ctx.finish([idle()], 0)[0] == 0


def test_full_cache_consumer_cannot_evict_young_sessions() -> None:
    cache = FetchSessionCache(2)
    open_session(cache, 5)
    open_session(cache, 5, 10)
    assert open_session(cache, 100, 20) == 0  # neither is older than MIN_EVICTION_MS
    assert len(cache) == 2 and cache.evictions == 0


def test_stale_session_is_evicted_first() -> None:
    cache = FetchSessionCache(2)
    a = open_session(cache, 5, 0)
    b = open_session(cache, 1, 1000)
    now = MIN_EVICTION_MS + 1
    c = open_session(cache, 1, now)  # a was last used over MIN_EVICTION_MS ago
    assert c != 0 and set(cache.session_ids()) == {b, c} and cache.evictions == 1
    assert a not in cache.session_ids()


def test_follower_evicts_a_consumer_session_and_bigger_beats_smaller() -> None:
    cache = FetchSessionCache(2)
    small = open_session(cache, 1, 0)
    big = open_session(cache, 50, 0)
    # A follower's session (privileged) may evict any consumer session: the cheapest goes.
    follower = open_session(cache, 1, 10, privileged=True)
    assert follower != 0 and set(cache.session_ids()) == {big, follower}
    assert small not in cache.session_ids()
    # A consumer's session may evict only sessions older than MIN_EVICTION_MS, and only
    # when it is worth more (privileged, then size).
    later = MIN_EVICTION_MS + 5
    for sid, epoch in ((big, 1), (follower, 1)):  # keep both recently used
        cache.new_context(SessionRequest(sid, epoch, []), later - 1).finish(
            [idle()] * (50 if sid == big else 1), later - 1)
    assert open_session(cache, 50, later) == 0  # equal size does not evict
    bigger = open_session(cache, 51, later)
    assert bigger != 0 and set(cache.session_ids()) == {follower, bigger}


def test_handler_full_then_incremental_then_fallback() -> None:
    h = FetchSessionHandler()
    wanted = parts(3)
    sid, epoch, send, forgotten = h.build(wanted)
    assert (sid, epoch, len(send), forgotten) == (0, 0, 3, [])
    h.handle_response(ErrorCode.none, 77)
    sid, epoch, send, forgotten = h.build(wanted)
    assert (sid, epoch, send, forgotten) == (77, 1, [], [])
    h.handle_response(ErrorCode.none, 77)
    changed = [(("t", 0), PartitionData(9, 1024)), *wanted[1:2]]
    sid, epoch, send, forgotten = h.build(changed)
    assert (epoch, send, forgotten) == (2, [changed[0]], [("t", 2)])
    h.handle_response(ErrorCode.invalid_fetch_session_epoch, 0)
    sid, epoch, send, _ = h.build(changed)
    assert (sid, epoch, len(send)) == (77, 0, 2)  # full, closing 77
    h.handle_response(ErrorCode.none, 0)  # the broker had no slot
    assert h.build(changed)[:2] == (0, 0)
    h.handle_response(ErrorCode.fetch_session_id_not_found, 0)
    assert h.build(changed)[:2] == (0, 0)
    assert h.full_requests == 4 and h.incremental_requests == 2


def test_handler_and_cache_together() -> None:
    cache = FetchSessionCache(4)
    h = FetchSessionHandler()
    offsets = [0, 0, 0]
    for round_ in range(5):
        wanted = [(("t", i), PartitionData(offsets[i], 1024)) for i in range(3)]
        sid, epoch, send, forgotten = h.build(wanted)
        ctx = cache.new_context(SessionRequest(sid, epoch, send, forgotten), round_)
        assert ctx.kind is (ContextKind.FULL if round_ == 0 else ContextKind.INCREMENTAL)
        assert [d.fetch_offset for _, d in ctx.partitions] == [offsets[k[1]]
                                                             for k, _ in ctx.partitions]
        new_sid, _ = ctx.finish([idle()] * len(ctx.partitions), round_)
        h.handle_response(ErrorCode.none, new_sid)
        offsets[round_ % 3] += 1
