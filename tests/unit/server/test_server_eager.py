"""Produce and Fetch handlers start at once (no task until their first wait), and answers
ready one after another leave in one write: order, errors, cancellation and the
request metrics' remote time stay as with a task per request."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.produce.v9.request import ProduceRequest
from kio.schema.produce.v9.response import ProduceResponse
from kio.static.primitive import i16, i32Timedelta

from broker.errors import KafkaError
from broker.metrics.stats import ServerStats, mark_remote_wait
from broker.protocol.api import BROKER_APIS
from broker.server import Dispatcher, ListenerSpec, RequestContext, Server
from broker.testing.wire import arecv_frame, decode_response, encode_request
from tests.unit.server.harness import run, running_server

PRODUCE = 0


def _produce(acks: int = 1) -> ProduceRequest:
    return ProduceRequest(transactional_id=None, acks=i16(acks),
                          timeout=i32Timedelta.parse(timedelta(seconds=5)), topic_data=())


def _answer(ctx: RequestContext) -> ProduceResponse:
    # The throttle time carries the correlation id: the client sees which handler answered.
    return ProduceResponse(responses=(),
                           throttle_time=i32Timedelta.parse(timedelta(milliseconds=0)))


def _dispatcher(handle: Any, error_response: Any = None) -> Dispatcher:
    d = Dispatcher()
    d.register(PRODUCE, handle, error_response=error_response)
    return d


async def _send(port: int, count: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"".join(encode_request(_produce(), i) for i in range(count)))
    return reader, writer


async def _correlations(reader: asyncio.StreamReader, count: int) -> list[int]:
    return [decode_response(PRODUCE, 9, await arecv_frame(reader))[0] for _ in range(count)]


def test_handlers_that_never_wait_run_before_the_next_frame_and_answer_in_order() -> None:
    events: list[tuple[str, int]] = []
    in_task: list[bool] = []

    async def handle(node: object, ctx: RequestContext, request: Any) -> Any:
        events.append(("start", ctx.correlation_id))
        in_task.append(asyncio.current_task() is not None)
        if ctx.correlation_id % 3 == 0:
            await asyncio.sleep(0.02 if ctx.correlation_id % 2 else 0.05)
        events.append(("end", ctx.correlation_id))
        return _answer(ctx)

    async def main() -> None:
        async with running_server(_dispatcher(handle)) as (_s, port):
            reader, writer = await _send(port, 30)
            got = await _correlations(reader, 30)
            writer.close()
        assert got == list(range(30))
        assert [c for kind, c in events if kind == "start"] == list(range(30))
        # one that never waits ends before the next request starts
        for c in range(30):
            if c % 3:
                i = events.index(("start", c))
                assert events[i + 1] == ("end", c), events[i:i + 3]
        assert in_task.count(False) == 30  # the first step runs in no task

    run(main)


def test_errors_raised_before_the_first_wait_are_answered_as_before() -> None:
    def error_response(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
        assert code is ErrorCode.not_leader_or_follower
        return _answer(ctx)

    async def handle(node: object, ctx: RequestContext, request: Any) -> Any:
        if ctx.correlation_id == 1:
            raise KafkaError(ErrorCode.not_leader_or_follower, "moved")
        if ctx.correlation_id == 3:
            raise RuntimeError("a bug in the handler")
        return _answer(ctx)

    async def main() -> None:
        async with running_server(_dispatcher(handle, error_response)) as (_s, port):
            reader, writer = await _send(port, 5)
            # 0, 1 (its error response), 2; the bug in 3 closes the connection after them
            assert await _correlations(reader, 3) == [0, 1, 2]
            assert await reader.read() == b""
            writer.close()

    run(main)


def test_a_handler_waiting_after_its_first_step_is_cancelled_when_its_connection_closes(
) -> None:
    cancelled = asyncio.Event()
    waiting = asyncio.Event()

    async def handle(node: object, ctx: RequestContext, request: Any) -> Any:
        waiting.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return _answer(ctx)

    async def main() -> None:
        async with running_server(_dispatcher(handle)) as (server, port):
            _reader, writer = await _send(port, 1)
            await asyncio.wait_for(waiting.wait(), 5)
            for conn in list(server._connections):
                conn.abort("test")
            await asyncio.wait_for(cancelled.wait(), 5)
            writer.close()

    run(main)


def test_remote_time_starts_at_a_wait_marked_in_the_first_step() -> None:
    """mark_remote_wait in the eager first step (acks=all waiting for the ISR) reaches
    the request's metrics although no task is running it then."""
    # read from the histograms: the stats may be compiled (broker/native.py), and a compiled
    # class takes no interpreted subclass
    stats = ServerStats()

    async def handle(node: object, ctx: RequestContext, request: Any) -> Any:
        mark_remote_wait()
        await asyncio.sleep(0.05)
        return _answer(ctx)

    async def main() -> None:
        server = Server([ListenerSpec("PLAINTEXT", "127.0.0.1", 0, BROKER_APIS,
                                      _dispatcher(handle).bind(None))], stats=stats)
        await server.start()
        try:
            reader, writer = await _send(server.address("PLAINTEXT")[1], 1)
            await _correlations(reader, 1)
            writer.close()
        finally:
            await server.stop()

    run(main)
    [(total, _rqueue, local, remote, _squeue, _write)] = stats._timers.values()
    assert sum(total.counts) == sum(local.counts) == sum(remote.counts) == 1
    # the 50 ms sleep after the marked wait is remote time; local time ends at the mark
    assert remote.sum >= 40 and local.sum < remote.sum


def test_answers_ready_together_leave_in_one_write(monkeypatch: pytest.MonkeyPatch) -> None:
    # counted at the transport (asyncio's, in this test): the server may be compiled
    # (broker/native.py), so its own methods cannot be wrapped
    from asyncio import selector_events

    batches: list[int] = []
    transport_class: Any = selector_events._SelectorSocketTransport
    original = transport_class.writelines

    def counting(self: Any, list_of_data: Any) -> None:
        pieces = list(list_of_data)
        batches.append(len(pieces))
        original(self, pieces)

    monkeypatch.setattr(transport_class, "writelines", counting)

    async def handle(node: object, ctx: RequestContext, request: Any) -> Any:
        return _answer(ctx)

    async def main() -> None:
        async with running_server(_dispatcher(handle)) as (_s, port):
            reader, writer = await _send(port, 20)  # one write: one segment on loopback
            assert await _correlations(reader, 20) == list(range(20))
            writer.close()

    run(main)
    assert sum(batches) == 20  # every answer is one held piece (a kio answer's bytes)
    assert max(batches) > 1, batches


def _pending() -> Any:
    from broker.server.server import _Pending

    ctx = RequestContext(api_key=PRODUCE, api_version=9, correlation_id=1, client_id="c",
                         listener_name="PLAINTEXT", peer_host="127.0.0.1", peer_port=1,
                         received_ms=0, apis=BROKER_APIS)
    return _Pending(ctx, None, None, None, 0)


def test_a_first_step_hands_its_value_over_as_a_step_not_as_stop_iteration() -> None:
    """The eager wrapper ends by yielding `_Finished(value)`: a handler that never waits
    is answered from an `_Answered` (no future, no StopIteration caught); one that waits
    goes on in a task whose result is the value; an error is kept for the write loop."""
    from broker.server.server import _Answered, _Finished, _start_eagerly

    async def wrapper(wait: bool, value: Any, error: BaseException | None = None) -> None:
        if wait:
            await asyncio.sleep(0.01)
        if error is not None:
            raise error
        await _Finished(value)

    async def main() -> None:
        now = _start_eagerly(wrapper(False, "now"), _pending())
        assert isinstance(now, _Answered) and now.done() and now.outcome() == "now"

        later = _start_eagerly(wrapper(True, "later"), _pending())
        assert isinstance(later, asyncio.Future) and not later.done()
        assert await later == "later"

        failed = _start_eagerly(wrapper(False, None, KafkaError(ErrorCode.not_leader_or_follower,
                                                                "moved")), _pending())
        assert isinstance(failed, _Answered)
        with pytest.raises(KafkaError):
            failed.outcome()

        failed_later = _start_eagerly(wrapper(True, None, RuntimeError("bug")), _pending())
        with pytest.raises(RuntimeError):
            await failed_later

        cancelled = _start_eagerly(wrapper(False, None, asyncio.CancelledError()), _pending())
        assert isinstance(cancelled, _Answered)
        with pytest.raises(asyncio.CancelledError):
            cancelled.outcome()

    asyncio.run(main())
