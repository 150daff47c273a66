"""The Kafka client connection on asyncio, and a minimal server.

`KafkaConnection` is a client that pipelines requests on one connection and matches
responses by correlation id; `serve` is a minimal server for the standalone node runner
(the broker's own server carries the same RPCs). Headers and frames are written and read by
broker/protocol/headers.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl as ssl_module
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from broker.protocol.frame_reader import FrameError, FrameReader
from broker.protocol.headers import (
    decode_request,
    encode_request,
    encode_response,
    parse_response,
)
from broker.util.tasks import ServiceTasks

MAX_FRAME_BYTES = 64 * 1024 * 1024
_I32 = struct.Struct(">i")

Handler = Callable[[int, int, Any], Awaitable[Any]]


async def read_frame(reader: asyncio.StreamReader, max_bytes: int = MAX_FRAME_BYTES) -> bytes:
    head = await reader.readexactly(4)
    (size,) = struct.unpack(">i", head)
    if size < 0 or size > max_bytes:
        raise FrameError(f"frame of {size} bytes (cap {max_bytes})")
    return await reader.readexactly(size)


Exchange = Callable[[int, int, Any, float], Awaitable[Any]]


@dataclass(frozen=True)
class ConnectionSecurity:
    """How to reach a secured listener: `ssl` (TLS; the peer's certificate is checked
    against the host name when the context says so) and `authenticate`, run on each new
    connection before any other request (SASL: it sends SaslHandshake/SaslAuthenticate
    through the exchange it is given and raises ConnectionError when refused)."""

    ssl: ssl_module.SSLContext | None = None
    authenticate: Callable[[Exchange], Awaitable[int]] | None = None
    """Returns the session lifetime in ms the server gave (0: none); the connection
    re-authenticates in band (KIP-368) once 85% of it has passed."""


class KafkaConnection:
    """One client connection to one peer; requests are pipelined."""

    def __init__(self, host: str, port: int, client_id: str = "skiff-raft", *,
                 security: ConnectionSecurity | None = None,
                 close_on_timeout: bool = False) -> None:
        """`security`: TLS and/or SASL, as the peer's listener wants them.
        `close_on_timeout`: a request that times out closes the connection (what Kafka's
        NetworkClient does, and KRaft with it): a peer that stalled or a path that went
        dark leaves no half-dead connection; the next request connects afresh."""
        self.host = host
        self.port = port
        self.client_id = client_id
        self.security = security
        self.close_on_timeout = close_on_timeout
        self._reauth = ServiceTasks("connection_reauth")  # KIP-368 re-authentications
        self._transport: asyncio.Transport | None = None
        self._lost: asyncio.Future[None] | None = None
        self._pending: dict[int, tuple[asyncio.Future[Any], int, int]] = {}
        self._next = 0
        self._lock = asyncio.Lock()

    def _live(self) -> asyncio.Transport | None:
        t = self._transport
        return None if t is None or t.is_closing() else t

    def closed(self) -> asyncio.Future[None] | None:
        """Done once the latest connection has closed (either side, or an error); None
        before the first connection. A caller that got an answer can wait on it to learn
        that the connection that carried it is gone."""
        return self._lost

    async def _connect(self) -> asyncio.Transport:
        async with self._lock:
            transport = self._live()
            if transport is None:
                loop = asyncio.get_running_loop()
                lost: asyncio.Future[None] = loop.create_future()

                def reader() -> FrameReader:
                    proto = FrameReader(self._on_frame,
                                        lambda e: self._on_lost(proto, lost, e),
                                        max_bytes=MAX_FRAME_BYTES)
                    return proto

                tls = None if self.security is None else self.security.ssl
                if tls is None:
                    transport, _ = await loop.create_connection(reader, self.host, self.port)
                else:
                    transport, _ = await loop.create_connection(
                        reader, self.host, self.port, ssl=tls, server_hostname=self.host)
                if self.security is not None and self.security.authenticate is not None:
                    try:
                        lifetime_ms = await self.security.authenticate(
                            lambda k, v, r, t: self._exchange(transport, k, v, r, t))
                    except BaseException:
                        transport.close()
                        raise
                    self._schedule_reauth(transport, lifetime_ms)
                self._transport, self._lost = transport, lost
            return transport

    def _on_frame(self, payload: memoryview | bytes) -> None:
        if len(payload) < 4:
            raise FrameError("response shorter than a header")
        (cid,) = _I32.unpack_from(payload, 0)
        entry = self._pending.pop(cid, None)
        if entry is None:
            return
        fut, api_key, version = entry
        try:
            response = parse_response(payload, api_key, version)
        except Exception as e:
            # The request this answers fails now, not at its timeout; the connection closes.
            if not fut.done():
                fut.set_exception(e)
            raise
        if not fut.done():
            fut.set_result(response)

    def _on_lost(self, proto: FrameReader, lost: asyncio.Future[None],
                 error: BaseException | None) -> None:
        if self._transport is not None and self._transport is proto.transport:
            self._transport = None
        pending = list(self._pending.values())
        self._pending.clear()
        for fut, _k, _v in pending:
            if not fut.done():
                fut.set_exception(ConnectionResetError(str(error or "connection closed")))
        if not lost.done():
            lost.set_result(None)

    def _schedule_reauth(self, transport: asyncio.Transport, lifetime_ms: int) -> None:
        if lifetime_ms <= 0 or self.security is None or self.security.authenticate is None:
            return
        authenticate = self.security.authenticate
        loop = asyncio.get_running_loop()

        async def reauth() -> None:
            try:
                again = await authenticate(
                    lambda k, v, r, t: self._exchange(transport, k, v, r, t))
            except Exception:  # the server closes the connection; requests reconnect
                transport.close()
                return
            if not transport.is_closing():
                self._schedule_reauth(transport, again)

        def start() -> None:
            if not transport.is_closing():
                self._reauth.start_soon(reauth, name="connection_reauth")

        loop.call_later(lifetime_ms * 0.85 / 1000, start)

    async def _exchange(self, transport: asyncio.Transport, api_key: int, version: int,
                        request: Any, timeout_s: float) -> Any:
        """One request on a connection that is not yet handed out (authentication)."""
        self._next = (self._next + 1) & 0x7FFFFFFF
        cid = self._next
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[cid] = (fut, api_key, version)
        try:
            transport.write(encode_request(api_key, version, cid, self.client_id, request))
            return await asyncio.wait_for(fut, timeout_s)
        finally:
            self._pending.pop(cid, None)

    async def request(self, api_key: int, version: int, request: Any,
                      timeout_s: float) -> Any:
        transport = self._live()
        if transport is None:
            transport = await asyncio.wait_for(self._connect(), timeout_s)
        self._next = (self._next + 1) & 0x7FFFFFFF
        cid = self._next
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[cid] = (fut, api_key, version)
        try:
            transport.write(encode_request(api_key, version, cid, self.client_id, request))
            return await asyncio.wait_for(fut, timeout_s)
        except TimeoutError:
            self._timed_out(transport)
            raise
        finally:
            self._pending.pop(cid, None)

    def _timed_out(self, transport: asyncio.Transport) -> None:
        if self.close_on_timeout and self._transport is transport:
            transport.close()  # connection_lost fails the other pending requests

    def start_request(self, api_key: int, version: int, request: Any,
                      timeout_s: float) -> asyncio.Future[Any]:
        """`request` without a coroutine hop: on a live connection the frame is written
        before this returns, and the future holds the answer (TimeoutError after
        `timeout_s`). Otherwise it connects first, in a task, as `request` does."""
        transport = self._live()
        if transport is None:
            return asyncio.ensure_future(self.request(api_key, version, request, timeout_s))
        loop = asyncio.get_running_loop()
        self._next = (self._next + 1) & 0x7FFFFFFF
        cid = self._next
        fut: asyncio.Future[Any] = loop.create_future()
        self._pending[cid] = (fut, api_key, version)

        def expire() -> None:
            if not fut.done():
                fut.set_exception(TimeoutError(f"no answer to api {api_key} in {timeout_s}s"))
                self._timed_out(transport)

        timer = loop.call_later(timeout_s, expire)

        def done(_f: asyncio.Future[Any]) -> None:
            timer.cancel()
            self._pending.pop(cid, None)

        fut.add_done_callback(done)
        transport.write(encode_request(api_key, version, cid, self.client_id, request))
        return fut

    async def close(self) -> None:
        await self._reauth.close()
        transport, lost = self._transport, self._lost
        self._transport = None
        if transport is not None:
            transport.close()
        if lost is not None and not lost.done():
            # connection_lost fails what is still pending; it runs on the next loop turn.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(lost), 1.0)


async def serve(handler: Handler, host: str, port: int,
                error_response: Callable[[int, int, BaseException], Any] | None = None,
                ) -> asyncio.Server:
    """Answer Kafka-framed requests with `handler(api_key, version, request)`.
    Requests on one connection run concurrently and may be answered out of
    order (clients here match by correlation id).  A malformed frame closes
    that connection only."""

    async def on_conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        tasks: set[asyncio.Task[None]] = set()

        async def run(api_key: int, version: int, cid: int, req: Any) -> None:
            try:
                resp = await handler(api_key, version, req)
            except Exception as e:  # the handler's bug must not kill the connection
                if error_response is None:
                    writer.close()
                    return
                resp = error_response(api_key, version, e)
            if not writer.is_closing():
                writer.write(encode_response(resp, cid, api=(api_key, version)))

        try:
            while True:
                payload = await read_frame(reader)
                try:
                    api_key, version, cid, req = decode_request(payload)
                except Exception:
                    break
                t = asyncio.create_task(run(api_key, version, cid, req))
                tasks.add(t)
                t.add_done_callback(tasks.discard)
        except (OSError, asyncio.IncompleteReadError, FrameError):
            pass
        finally:
            for t in tasks:
                t.cancel()
            writer.close()

    return await asyncio.start_server(on_conn, host, port)
