"""KIP-219 in the server: a throttled answer is sent at once, then the connection is muted
(nothing read, nothing written) for its throttle time; a request_percentage quota measures
the handler's time on the loop and puts the larger throttle time in a kio response."""

from __future__ import annotations

import asyncio
import datetime
import time
from typing import Any

from kio.schema.describe_client_quotas.v0.request import DescribeClientQuotasRequest
from kio.schema.describe_client_quotas.v0.response import DescribeClientQuotasResponse
from kio.schema.errors import ErrorCode

from broker.handlers import api_versions
from broker.protocol.api import BROKER_APIS
from broker.protocol.durations import to_ms
from broker.server import Dispatcher, ListenerSpec, Server
from broker.server.context import RequestContext
from broker.testing.wire import arecv_frame, decode_response, encode_request
from tests.support.timings import note
from tests.unit.server.harness import run


def _answer(throttle_ms: int) -> Any:
    return DescribeClientQuotasResponse(
        throttle_time=datetime.timedelta(milliseconds=throttle_ms),
        error_code=ErrorCode.none, error_message=None, entries=())


class _BusyQuota:
    """Applies to every request; owes 250 ms whenever the handler was busy at all."""

    def __init__(self) -> None:
        self.busy: list[float] = []

    def applies(self, ctx: RequestContext) -> bool:
        return ctx.api_key == 48

    def record(self, ctx: RequestContext, busy_s: float) -> int:
        self.busy.append(busy_s)
        return 250 if busy_s > 0 else 0


async def _serve(handler: Any, quota: Any = None) -> tuple[Server, int]:
    d = Dispatcher()
    d.register(18, api_versions.handle)
    d.register(48, handler)
    server = Server([ListenerSpec("PLAINTEXT", "127.0.0.1", 0, BROKER_APIS, d.bind(None))],
                    request_quota=quota)
    await server.start()
    return server, server.address("PLAINTEXT")[1]


THROTTLE_MS = 1000


def test_throttled_answer_is_sent_then_the_connection_is_muted() -> None:
    async def handle(node: Any, ctx: RequestContext, request: Any) -> Any:
        return _answer(THROTTLE_MS if ctx.correlation_id == 1 else 0)

    async def main() -> None:
        server, port = await _serve(handle)
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            req = DescribeClientQuotasRequest(components=(), strict=False)
            t0 = time.monotonic()
            writer.write(encode_request(req, 1) + encode_request(req, 2))
            corr, first = decode_response(48, 0, await arecv_frame(reader))
            t1 = time.monotonic() - t0
            assert corr == 1 and to_ms(first.throttle_time) == THROTTLE_MS
            corr, _ = decode_response(48, 0, await arecv_frame(reader))
            t2 = time.monotonic() - t0
            assert corr == 2
            # the throttled answer is out before the mute ends, the next one after it
            assert t1 < THROTTLE_MS / 1000 - 0.01 <= t2
            note("server_quotas: throttled answer sent", t1, 0.35)
            writer.close()
        finally:
            await server.stop()

    run(main)


def test_request_quota_measures_busy_time_and_sets_throttle_time() -> None:
    async def handle(node: Any, ctx: RequestContext, request: Any) -> Any:
        deadline = time.perf_counter() + 0.02
        while time.perf_counter() < deadline:  # 20 ms on the loop
            pass
        await asyncio.sleep(0.2)  # waiting is not counted
        return _answer(0)

    async def main() -> None:
        quota = _BusyQuota()
        server, port = await _serve(handle, quota)
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(encode_request(DescribeClientQuotasRequest(components=(), strict=False),
                                        1))
            _, resp = decode_response(48, 0, await arecv_frame(reader))
            assert to_ms(resp.throttle_time) == 250
            [busy] = quota.busy
            # 20 ms of work; the 0.2 s wait, had it been counted, would put it past 0.2 s
            assert 0.015 <= busy < 0.2
            writer.close()
        finally:
            await server.stop()

    run(main)
