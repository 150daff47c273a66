"""The write path every pure coordinator core shares (groups, transactions, share-group
state): what a core gathers for the runtime (replies to waiting requests, writes to append)
and what each write does once the runtime reports its append replicated or failed.

A core registers a write with the callback that applies it (`_emit`); the runtime appends it
with acks=all and calls `write_completed`; losing the partition fails every write still in
flight (`_fail_writes`). Nothing here does IO or reads a clock.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from kio.schema.errors import ErrorCode

Token = Hashable  # identifies a waiting request to the runtime; opaque to the core
WriteDone = Callable[[ErrorCode, int], None]  # (error, now_ms): the append's outcome


@dataclass(frozen=True, slots=True)
class Reply:
    token: Token
    result: Any


class Outbox(Protocol):
    """A core's effects: at least its replies and its writes (each with its `write_id`)."""

    replies: list[Reply]
    writes: list[Any]


FX = TypeVar("FX", bound=Outbox)


class CoordinatorCore(Generic[FX]):
    """The replies and writes a pure core gathers, and the callbacks of its writes in
    flight, by write id."""

    def __init__(self, new_effects: Callable[[], FX]) -> None:
        self._new_effects = new_effects
        self._fx = new_effects()
        self._writes: dict[int, WriteDone] = {}
        self._next_write_id = 1

    def _take(self) -> FX:
        fx, self._fx = self._fx, self._new_effects()
        return fx

    def _reply(self, token: Token | None, result: object) -> None:
        if token is not None:
            self._fx.replies.append(Reply(token, result))

    def _emit(self, write: Callable[[int], Any], done: WriteDone) -> int:
        """Adds `write(write_id)` to the writes; `done` hears how its append ends."""
        write_id = self._next_write_id
        self._next_write_id += 1
        self._writes[write_id] = done
        self._fx.writes.append(write(write_id))
        return write_id

    def _finish_write(self, write_id: int, error: ErrorCode, now_ms: int) -> None:
        done = self._writes.pop(write_id, None)
        if done is not None:
            done(error, now_ms)

    def write_completed(self, write_id: int, error: ErrorCode, now_ms: int) -> FX:
        self._finish_write(write_id, error, now_ms)
        return self._take()

    def pending_writes(self) -> int:
        return len(self._writes)

    def _fail_writes(self, error: ErrorCode, now_ms: int) -> None:
        """Every write in flight ends with `error` (the partition was unloaded)."""
        pending, self._writes = self._writes, {}
        for done in pending.values():
            done(error, now_ms)
