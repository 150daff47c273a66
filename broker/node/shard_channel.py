"""The channel between the workers of one broker (broker/node/shards.py): calls and events
over a Unix socket in a directory only this user can enter.

A frame is its body's length (u32), a call id (u64) and a kind (u8), then the body: a
pickle (protocol 5) of plain values. Pickle is safe here because both ends are processes
of one broker, started by it from the same code, and no one else can reach the socket
(its directory is mode 0700). A call is answered by a REPLY or a FAIL with its id, in any
order: a worker answers each call as its own task, so a long poll never holds up the
calls behind it. The calls of one connection start in the order they were sent, each
running until its first wait before the next starts, which keeps a partition's appends in
the order a client's connection sent them. EVENTs go one way, in order: the node's
metadata, streamed to each worker.

A body longer than the frame cap closes the connection before anything is allocated; the
process on the other side is then treated as gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import pickle
import struct
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import structlog

log = structlog.get_logger(__name__)

_HEADER = struct.Struct(">IQB")
CALL, REPLY, FAIL, EVENT = 1, 2, 3, 4
DEFAULT_MAX_FRAME = 512 * 1024 * 1024


class ShardCallFailed(Exception):
    """The other worker raised while answering a call (its message says what)."""


class ChannelClosed(ConnectionError):
    """The connection to the other worker is gone (it stopped or died)."""


def _dump(obj: Any) -> bytes:
    return pickle.dumps(obj, protocol=5)


class _Endpoint:
    """One connected end: reads frames, writes frames."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 max_frame: int) -> None:
        self.reader, self.writer, self.max_frame = reader, writer, max_frame
        self.closed = False

    def send(self, call_id: int, kind: int, obj: Any) -> None:
        if self.closed or self.writer.is_closing():
            raise ChannelClosed("worker channel closed")
        body = _dump(obj)
        if len(body) > self.max_frame:
            raise ValueError(f"worker channel frame of {len(body)} bytes over the cap "
                             f"{self.max_frame}")
        self.writer.writelines((_HEADER.pack(len(body), call_id, kind), body))

    async def read(self) -> tuple[int, int, Any]:
        header = await self.reader.readexactly(_HEADER.size)
        size, call_id, kind = _HEADER.unpack(header)
        if size > self.max_frame:
            raise ValueError(f"worker channel frame of {size} bytes over the cap "
                             f"{self.max_frame}")
        if kind not in (CALL, REPLY, FAIL, EVENT):
            raise ValueError(f"worker channel frame of unknown kind {kind}")
        return call_id, kind, pickle.loads(await self.reader.readexactly(size))

    def close(self) -> None:
        self.closed = True
        with contextlib.suppress(Exception):
            self.writer.close()


Op = Callable[..., Awaitable[Any]]


class ShardPeer:
    """A worker connected to this one's channel server: it may be sent events."""

    def __init__(self, endpoint: _Endpoint) -> None:
        self._endpoint = endpoint
        self.name = ""

    def send_event(self, obj: Any) -> None:
        self._endpoint.send(0, EVENT, obj)

    @property
    def closed(self) -> bool:
        return self._endpoint.closed


class ShardChannelServer:
    """Answers calls: `ops[name](peer, *args)`; `on_closed(peer)` when a peer goes."""

    def __init__(self, path: str, ops: Mapping[str, Op], *,
                 on_closed: Callable[[ShardPeer], None] = lambda peer: None,
                 max_frame: int = DEFAULT_MAX_FRAME) -> None:
        self.path, self.ops, self.on_closed, self.max_frame = path, ops, on_closed, max_frame
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._endpoints: set[_Endpoint] = set()
        self._stopped = False

    async def start(self) -> None:
        self._server = await asyncio.start_unix_server(self._serve, self.path)

    async def stop(self) -> None:
        self._stopped = True  # a connection accepted but not yet served is closed at once
        if self._server is not None:
            self._server.close()
        for ep in list(self._endpoints):
            ep.close()
        for task in list(self._tasks):
            task.cancel()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        endpoint = _Endpoint(reader, writer, self.max_frame)
        if self._stopped:
            endpoint.close()
            return
        self._endpoints.add(endpoint)
        peer = ShardPeer(endpoint)
        try:
            while True:
                call_id, kind, obj = await endpoint.read()
                if kind != CALL:
                    raise ValueError(f"a worker sent frame kind {kind} where a call belongs")
                name, args = obj
                op = self.ops.get(name)
                if op is None:
                    endpoint.send(call_id, FAIL, f"no worker channel op {name!r}")
                    continue
                task = asyncio.ensure_future(self._answer(endpoint, call_id, op, peer, args))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        except Exception as exc:
            log.error("worker_channel_frame_refused", error=str(exc))
        finally:
            endpoint.close()
            self._endpoints.discard(endpoint)
            self.on_closed(peer)

    async def _answer(self, endpoint: _Endpoint, call_id: int, op: Op, peer: ShardPeer,
                      args: tuple[Any, ...]) -> None:
        try:
            result = await op(peer, *args)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("worker_channel_op_failed", op=getattr(op, "__name__", "?"))
            with contextlib.suppress(ConnectionError):
                endpoint.send(call_id, FAIL, f"{type(exc).__name__}: {exc}")
            return
        with contextlib.suppress(ConnectionError):
            endpoint.send(call_id, REPLY, result)


class ShardChannelClient:
    """Calls another worker's ops; its events go to `on_event`, in order."""

    def __init__(self, endpoint: _Endpoint, on_event: Callable[[Any], None]) -> None:
        self._endpoint = endpoint
        self._on_event = on_event
        self._next_id = 1
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._reader = asyncio.ensure_future(self._read_loop())
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    @classmethod
    async def connect(cls, path: str, *, on_event: Callable[[Any], None] = lambda e: None,
                      max_frame: int = DEFAULT_MAX_FRAME) -> ShardChannelClient:
        reader, writer = await asyncio.open_unix_connection(path)
        return cls(_Endpoint(reader, writer, max_frame), on_event)

    def call(self, name: str, *args: Any) -> asyncio.Future[Any]:
        """Sends the call at once (so calls go out in the order they are made) and returns
        the future of its answer; ChannelClosed when the other worker is gone."""
        call_id = self._next_id
        self._next_id += 1
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if self.closed.done():
            future.set_exception(ChannelClosed("worker channel closed"))
            return future
        self._pending[call_id] = future
        try:
            self._endpoint.send(call_id, CALL, (name, args))
        except Exception:
            del self._pending[call_id]
            raise
        return future

    def forget(self, future: asyncio.Future[Any]) -> None:
        """An answer no one will wait for (an abandoned long poll): dropped on arrival."""
        if not future.done():
            future.cancel()

    async def _read_loop(self) -> None:
        try:
            while True:
                call_id, kind, obj = await self._endpoint.read()
                if kind == EVENT:
                    self._on_event(obj)
                    continue
                future = self._pending.pop(call_id, None)
                if future is None or future.done():
                    continue
                if kind == REPLY:
                    future.set_result(obj)
                elif kind == FAIL:
                    future.set_exception(ShardCallFailed(str(obj)))
                else:
                    raise ValueError(f"frame kind {kind} where an answer belongs")
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        except Exception as exc:
            log.error("worker_channel_frame_refused", error=str(exc))
        finally:
            self._endpoint.close()
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(ChannelClosed("worker channel closed"))
            self._pending.clear()
            if not self.closed.done():
                self.closed.set_result(None)

    async def close(self) -> None:
        self._endpoint.close()
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._reader
