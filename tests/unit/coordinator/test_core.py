"""The write path the pure coordinator cores share: write ids, the callback each write's
outcome runs once, and the writes failed together on unload."""

from __future__ import annotations

from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from broker.coordinator.core import CoordinatorCore, Reply


@dataclass(slots=True)
class Fx:
    replies: list[Reply] = field(default_factory=list)
    writes: list[tuple[int, str]] = field(default_factory=list)


class Core(CoordinatorCore[Fx]):
    def __init__(self) -> None:
        super().__init__(Fx)
        self.heard: list[tuple[str, ErrorCode, int]] = []

    def put(self, token: int | None, record: str) -> Fx:
        def done(error: ErrorCode, now_ms: int) -> None:
            self.heard.append((record, error, now_ms))
            self._reply(token, error)

        self._emit(lambda write_id: (write_id, record), done)
        return self._take()


def test_writes_get_increasing_ids_and_their_callbacks_run_once() -> None:
    core = Core()
    assert core.put(1, "a").writes == [(1, "a")]
    assert core.put(2, "b").writes == [(2, "b")]
    assert core.pending_writes() == 2
    fx = core.write_completed(2, ErrorCode.none, 50)
    assert fx.replies == [Reply(2, ErrorCode.none)] and fx.writes == []
    assert core.write_completed(2, ErrorCode.none, 60).replies == []
    assert core.write_completed(99, ErrorCode.none, 60).replies == []
    assert core.heard == [("b", ErrorCode.none, 50)]
    assert core.pending_writes() == 1


def test_failing_the_writes_in_flight_answers_each_once() -> None:
    core = Core()
    core.put(1, "a")
    core.put(None, "b")
    core._fail_writes(ErrorCode.not_coordinator, 7)
    assert core.pending_writes() == 0
    assert core._take().replies == [Reply(1, ErrorCode.not_coordinator)]
    assert core.heard == [("a", ErrorCode.not_coordinator, 7), ("b", ErrorCode.not_coordinator, 7)]
    assert core.write_completed(1, ErrorCode.none, 8).replies == []
