"""Incremental fetch sessions (KIP-227): the broker's session cache and the fetching side's
session handler, both pure (no IO, no clock: callers pass `now_ms`).

Broker side, `FetchSessionCache.new_context(...)`, as Kafka's FetchManager.newContext:

- session_id 0, epoch -1 (FINAL): a sessionless full fetch (`SESSIONLESS`); any session named
  with epoch -1 is closed first.
- epoch 0 (INITIAL): a full fetch (`FULL`); a session it names is closed, and answering it
  creates a new session (`finish`) when the cache has a free slot or may evict one; else the
  answer carries session_id 0 and the client goes on with full fetches.
- epoch > 0: an incremental fetch (`INCREMENTAL`) of the named session: FETCH_SESSION_ID_NOT_FOUND
  when the cache has no such session, INVALID_FETCH_SESSION_EPOCH when the epoch is not the
  session's next, FETCH_SESSION_TOPIC_ID_ERROR when the request names topics by id and the
  session by name or the other way round (`ERROR`). The request's partitions are added to
  or updated in the session, forgotten ones removed; the broker reads every partition of
  the session and answers only those that changed (`finish`): new records, a high
  watermark, last stable offset or log start offset other than the last one answered, an
  error, a diverging epoch or a preferred read replica. Partitions that returned records
  move to the end of the session's order, so a response-size limit does not starve the
  later ones. A session emptied by forgotten partitions is closed (a sessionless answer).

Session states: created (FULL answered with a slot) -> used (each INCREMENTAL with the right
epoch advances the epoch: 1, 2, ..., 2^31-1, 1) -> removed (a FULL or FINAL request naming
it, emptied, or evicted).

Eviction (Kafka's FetchSessionCache, max.incremental.fetch.session.cache.slots, eviction
time MIN_EVICTION_MS = 120 s as Kafka's KafkaServer fixes it): a new session takes a free
slot; else the least recently used session goes if it was last used over MIN_EVICTION_MS
ago; else the cheapest evictable session goes when the new one is worth more, ordered by
(privileged, size, id): followers' sessions are privileged; a consumer's new session may
evict only sessions older than MIN_EVICTION_MS, a follower's also any consumer session; an
equal key (the new session's id counts as 0) does not evict.

Fetching side, `FetchSessionHandler` (Kafka's FetchSessionHandler): builds each request from
the partitions wanted now (full when there is no session; else only those new or changed
since the session last saw them, and the ones no longer wanted as forgotten) and follows the
answer (a session id starts a session at epoch 1; a session error falls back to a full fetch).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum

from kio.schema.errors import ErrorCode

__all__ = [
    "FINAL_EPOCH", "INITIAL_EPOCH", "INVALID_SESSION_ID", "MIN_EVICTION_MS", "Answer",
    "ContextKind", "FetchContext", "FetchSessionCache", "FetchSessionHandler", "Key",
    "PartitionData", "SessionPartition", "SessionRequest", "next_epoch", "would_respond",
]

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MIN_EVICTION_MS = 120_000
_MAX_EPOCH = 2**31 - 1

Key = tuple["str | uuid.UUID", int]
"""(topic name, or topic id for Fetch v13+, partition index)."""


def next_epoch(epoch: int) -> int:
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == _MAX_EPOCH else epoch + 1


@dataclass(slots=True)
class PartitionData:
    """What a request says of one partition."""

    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    log_start_offset: int = -1  # a follower's own log start


@dataclass(slots=True)
class SessionPartition:
    """A partition of a session: the client's last fetch state and what it was last told."""

    data: PartitionData
    # What the last answer told the client (-1: never answered, or an error since).
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1


@dataclass(slots=True)
class Answer:
    """What the broker read for one partition of a context, in the context's order."""

    has_records: bool
    error: bool
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    must_respond: bool = False  # a diverging epoch or preferred read replica


@dataclass(eq=False)
class _Session:
    id: int
    privileged: bool
    uses_topic_ids: bool
    partitions: dict[Key, SessionPartition]
    created_ms: int
    last_used_ms: int
    epoch: int = 1
    cached_size: int = -1
    evictable_by_all: bool = False
    evictable_by_privileged: bool = False

    def key(self) -> tuple[bool, int, int]:
        return (self.privileged, self.cached_size, self.id)


class ContextKind(Enum):
    SESSIONLESS = "sessionless"
    FULL = "full"
    INCREMENTAL = "incremental"
    ERROR = "error"


@dataclass(eq=False)
class FetchContext:
    kind: ContextKind
    partitions: list[tuple[Key, PartitionData]]
    """What to read, in order: a full fetch's request, or every partition of the session."""
    error: ErrorCode = ErrorCode.none
    session_id: int = INVALID_SESSION_ID
    privileged: bool = False
    uses_topic_ids: bool = False
    _cache: FetchSessionCache | None = None
    _session: _Session | None = None

    @property
    def cached(self) -> list[SessionPartition]:
        """An INCREMENTAL context's session partitions, in the order of `partitions`."""
        assert self._session is not None
        return list(self._session.partitions.values())

    def finish(self, answers: Sequence[Answer], now_ms: int,
               subset: Sequence[int] | None = None) -> tuple[int, list[bool]]:
        """(the answer's session_id, per partition of `partitions` (or of the indexes
        `subset` of them, an INCREMENTAL context's partitions that were read): whether it
        goes in the answer). A FULL context creates its session here when the cache allows
        it."""
        if self.kind is ContextKind.INCREMENTAL:
            assert self._session is not None
            order = self.partitions if subset is None else [self.partitions[i] for i in subset]
            return self._session.id, _update_session(self._session, order, answers)
        if self.kind is ContextKind.FULL and self._cache is not None:
            cached = {key: SessionPartition(data) for key, data in self.partitions}
            for (key, _), answer in zip(self.partitions, answers, strict=True):
                _respond(cached[key], answer)
            self.session_id = self._cache.maybe_create(
                now_ms, privileged=self.privileged, uses_topic_ids=self.uses_topic_ids,
                partitions=cached)
        return self.session_id, [True] * len(answers)


def would_respond(cached: SessionPartition, answer: Answer) -> bool:
    """Whether `answer` goes in an incremental answer (Kafka's
    CachedPartition.maybeUpdateResponseData), without remembering it."""
    return (answer.has_records or answer.must_respond or answer.error
            or cached.high_watermark != answer.high_watermark
            or cached.last_stable_offset != answer.last_stable_offset
            or cached.log_start_offset != answer.log_start_offset)


def _respond(cached: SessionPartition, answer: Answer) -> bool:
    """would_respond, remembering what the answer tells the client."""
    must = would_respond(cached, answer)
    cached.high_watermark = answer.high_watermark
    cached.last_stable_offset = answer.last_stable_offset
    cached.log_start_offset = answer.log_start_offset
    if answer.error:
        # Sent every time, and once more when the error goes away.
        cached.high_watermark = -1
    return must


def _update_session(session: _Session, order: list[tuple[Key, PartitionData]],
                    answers: Sequence[Answer]) -> list[bool]:
    include: list[bool] = []
    moved: list[Key] = []
    for (key, _), answer in zip(order, answers, strict=True):
        cached = session.partitions.get(key)
        must = cached is not None and _respond(cached, answer)
        include.append(must)
        if answer.has_records:
            moved.append(key)
    for key in moved:  # fairness: who got records this time goes last next time
        session.partitions[key] = session.partitions.pop(key)
    return include


@dataclass(slots=True)
class SessionRequest:
    session_id: int
    epoch: int
    partitions: list[tuple[Key, PartitionData]]
    forgotten: list[Key] = field(default_factory=list)
    privileged: bool = False  # from a follower
    uses_topic_ids: bool = False


class FetchSessionCache:
    """The broker's incremental fetch sessions (see the module doc). Counters, for metrics
    and tests: `full`, `incremental`, `sessionless`, `errors` (requests by kind), `evictions`."""

    def __init__(self, max_slots: int, *, eviction_ms: int = MIN_EVICTION_MS,
                 rng: random.Random | None = None) -> None:
        self.max_slots = max_slots
        self.eviction_ms = eviction_ms
        self._rng = rng or random.Random()
        self._sessions: dict[int, _Session] = {}
        self.full = 0
        self.incremental = 0
        self.sessionless = 0
        self.errors = 0
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._sessions)

    @property
    def num_partitions(self) -> int:
        """Kafka's NumIncrementalFetchPartitionsCached."""
        return sum(s.cached_size for s in self._sessions.values())

    def session_ids(self) -> list[int]:
        return list(self._sessions)

    def session_size(self, session_id: int) -> int | None:
        s = self._sessions.get(session_id)
        return None if s is None else len(s.partitions)

    def session_epoch(self, session_id: int) -> int | None:
        s = self._sessions.get(session_id)
        return None if s is None else s.epoch

    def new_context(self, req: SessionRequest, now_ms: int) -> FetchContext:
        if req.epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if req.session_id != INVALID_SESSION_ID:
                self._sessions.pop(req.session_id, None)
            if req.epoch == FINAL_EPOCH:
                self.sessionless += 1
                return FetchContext(ContextKind.SESSIONLESS, list(req.partitions))
            self.full += 1
            return FetchContext(ContextKind.FULL, list(req.partitions),
                                privileged=req.privileged, uses_topic_ids=req.uses_topic_ids,
                                _cache=self if self.max_slots > 0 else None)
        session = self._sessions.get(req.session_id)
        error = ErrorCode.none
        if session is None:
            error = ErrorCode.fetch_session_id_not_found
        elif session.epoch != req.epoch:
            error = ErrorCode.invalid_fetch_session_epoch
        elif session.uses_topic_ids != req.uses_topic_ids:
            error = ErrorCode.fetch_session_topic_id_error
        if session is None or error is not ErrorCode.none:
            self.errors += 1
            return FetchContext(ContextKind.ERROR, [], error=error)
        for key, data in req.partitions:
            cached = session.partitions.get(key)
            if cached is None:
                session.partitions[key] = SessionPartition(data)
            else:
                cached.data = data
        for key in req.forgotten:
            session.partitions.pop(key, None)
        if not session.partitions:
            del self._sessions[session.id]
            self.sessionless += 1
            return FetchContext(ContextKind.SESSIONLESS, [])
        self._touch(session, now_ms)
        session.epoch = next_epoch(session.epoch)
        self.incremental += 1
        return FetchContext(
            ContextKind.INCREMENTAL, [(k, c.data) for k, c in session.partitions.items()],
            session_id=session.id, privileged=session.privileged,
            uses_topic_ids=session.uses_topic_ids, _session=session)

    def maybe_create(self, now_ms: int, *, privileged: bool, uses_topic_ids: bool,
                     partitions: dict[Key, SessionPartition]) -> int:
        """A new session's id, or INVALID_SESSION_ID when there is no slot for it."""
        if len(self._sessions) >= self.max_slots and not self._try_evict(
                privileged, len(partitions), now_ms):
            return INVALID_SESSION_ID
        session_id = self._new_id()
        session = _Session(session_id, privileged, uses_topic_ids, partitions,
                           created_ms=now_ms, last_used_ms=now_ms)
        self._sessions[session_id] = session
        self._touch(session, now_ms)
        return session_id

    def _new_id(self) -> int:
        while True:
            candidate = self._rng.randint(1, _MAX_EPOCH)
            if candidate not in self._sessions:
                return candidate

    def _touch(self, session: _Session, now_ms: int) -> None:
        session.last_used_ms = now_ms
        session.cached_size = len(session.partitions)
        old = now_ms - session.created_ms > self.eviction_ms
        session.evictable_by_privileged = (not session.privileged) or old
        session.evictable_by_all = old

    def _try_evict(self, privileged: bool, size: int, now_ms: int) -> bool:
        if not self._sessions:
            return False
        lru = min(self._sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now_ms - lru.last_used_ms > self.eviction_ms:
            self._evict(lru)
            return True
        candidates = [s for s in self._sessions.values()
                      if (s.evictable_by_privileged if privileged else s.evictable_by_all)]
        if not candidates:
            return False
        cheapest = min(candidates, key=_Session.key)
        if (privileged, size, 0) < cheapest.key():
            return False
        self._evict(cheapest)
        return True

    def _evict(self, session: _Session) -> None:
        del self._sessions[session.id]
        self.evictions += 1


class FetchSessionHandler:
    """The fetching side of one session with one broker (a follower's, per leader)."""

    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self._partitions: dict[Key, PartitionData] = {}
        self._pending: tuple[dict[Key, PartitionData], bool] | None = None
        self.full_requests = 0
        self.incremental_requests = 0

    def build(self, wanted: Iterable[tuple[Key, PartitionData]],
              ) -> tuple[int, int, list[tuple[Key, PartitionData]], list[Key]]:
        """(session_id, epoch, partitions to send, forgotten) for the next request."""
        now = dict(wanted)
        full = self.epoch == INITIAL_EPOCH
        self._pending = (now, full)
        if full:
            self.full_requests += 1
            return self.session_id, self.epoch, list(now.items()), []
        self.incremental_requests += 1
        send = [(k, d) for k, d in now.items() if self._partitions.get(k) != d]
        forgotten = [k for k in self._partitions if k not in now]
        return self.session_id, self.epoch, send, forgotten

    def handle_response(self, error: ErrorCode, session_id: int) -> None:
        pending, self._pending = self._pending, None
        if error is not ErrorCode.none:
            if error is ErrorCode.fetch_session_id_not_found:
                self.session_id = INVALID_SESSION_ID
            self.epoch = INITIAL_EPOCH  # a full fetch next, closing the old session if any
            return
        if pending is None:
            return
        wanted, _ = pending
        if session_id == INVALID_SESSION_ID:
            self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH
            self._partitions = {}
            return
        if session_id != self.session_id:  # a new session (answer to a full fetch)
            self.session_id = session_id
        self.epoch = next_epoch(self.epoch)
        self._partitions = wanted

    def handle_error(self) -> None:
        """The request failed (connection, timeout): the session's state is unknown."""
        self._pending = None
        self.epoch = INITIAL_EPOCH
