"""The channel between the workers of one broker (broker/node/shards.py): calls and events
over a Unix socket in a directory only this user can enter.

A frame is its body's length (u32), a call id (u64), a kind (u8), the pickle's length and
the count of out-of-band buffers (u32 each), then the body: each buffer's length (u32), a
pickle (protocol 5) of plain values, and the buffers. Pickle is safe here because both
ends are processes of one broker, started by it from the same code, and no one else can
reach the socket (its directory is mode 0700). A call is answered by a REPLY or a FAIL
with its id, in any order: a call that waits goes on as a task of its own, so a long poll
never holds up the calls behind it. The calls of one connection start in the order they
were sent, each running until its first wait before the next starts, which keeps a
partition's appends in the order a client's connection sent them. EVENTs go one way, in
order: the node's metadata, streamed to each worker.

Under load a worker hands many partitions over per turn of its event loop: what it sends
in one turn goes out in one write at the end of the turn, and an op whose answer is ready
without waiting (an append with acks=1) is answered in the same turn without a task, so
each hand-over does not cost its own system calls and wake-ups (docs/benchmarks.md, "One
broker, two workers").

A body longer than the frame cap closes the connection before anything is allocated; the
process on the other side is then treated as gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import pickle
import struct
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, cast

import structlog

from broker.server.server import _first_step

log = structlog.get_logger(__name__)

# body size, call id, kind, pickle size, out-of-band buffers; then each buffer's size
_HEADER = struct.Struct(">IQBII")
_SCRATCH = 256 * 1024
_MAX_BUFFERS = 4096
CALL, REPLY, FAIL, EVENT = 1, 2, 3, 4
DEFAULT_MAX_FRAME = 512 * 1024 * 1024
Op = Callable[..., Awaitable[Any]]


class ShardCallFailed(Exception):
    """The other worker raised while answering a call (its message says what)."""


class ChannelClosed(ConnectionError):
    """The connection to the other worker is gone (it stopped or died)."""


class _Endpoint(asyncio.BufferedProtocol):
    """One connected end: frames out, buffered to the end of the loop's turn, and frames
    in, handed to `on_frame(call id, kind, value)` as they complete.

    A frame's large byte strings (the records of an append: `pickle.PickleBuffer`s) travel
    out of band, after the pickle, and a frame too big for the scratch buffer is read into
    a buffer of its own, which the values read from it then refer to: the records are
    copied once into the turn's write, and by the socket."""

    def __init__(self, max_frame: int) -> None:
        self.max_frame = max_frame
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.on_frame: Callable[[int, int, Any], None] = lambda call_id, kind, obj: None
        self.on_lost: Callable[[], None] = lambda: None
        self._scratch = bytearray(_SCRATCH)
        self._view = memoryview(self._scratch)
        self._have = 0  # bytes in the scratch buffer
        self._frame: tuple[int, int, int, int] | None = None  # a large frame being read
        self._body = bytearray()
        self._filled = 0
        self._out: list[bytes | memoryview] = []
        self._flush_scheduled = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._out.clear()
        self.on_lost()

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._frame is not None:
            return memoryview(self._body)[self._filled:]
        return self._view[self._have:]

    def buffer_updated(self, nbytes: int) -> None:
        try:
            if self._frame is not None:
                self._filled += nbytes
                if self._filled == len(self._body):
                    frame, self._frame = self._frame, None
                    body, self._body = self._body, bytearray()
                    self._deliver(frame, memoryview(body))
                return
            self._have += nbytes
            self._parse()
        except Exception as exc:
            log.error("worker_channel_frame_refused", error=str(exc))
            self.close()

    def _parse(self) -> None:
        view, pos, have = self._view, 0, self._have
        while have - pos >= _HEADER.size and not self.closed:
            size, call_id, kind, pickled, nbufs = _HEADER.unpack_from(view, pos)
            if size > self.max_frame or nbufs > _MAX_BUFFERS or 4 * nbufs + pickled > size:
                raise ValueError(f"worker channel frame of {size} bytes ({nbufs} buffers) "
                                 f"over the cap {self.max_frame} or malformed")
            if kind not in (CALL, REPLY, FAIL, EVENT):
                raise ValueError(f"worker channel frame of unknown kind {kind}")
            start = pos + _HEADER.size
            frame = (call_id, kind, pickled, nbufs)
            if have - start >= size:
                # a small frame, whole in the scratch buffer: its own copy, as the scratch
                # buffer is reused
                pos = start + size
                self._deliver(frame, memoryview(bytes(view[start:pos])))
                continue
            if _HEADER.size + size > _SCRATCH:
                # a large one: the rest of it goes straight into its own buffer
                self._body = bytearray(size)
                got = have - start
                self._body[:got] = view[start:have]
                self._filled = got
                self._frame = frame
                pos = have
            break
        rest = have - pos
        if rest and pos:
            view[:rest] = view[pos:have]
        self._have = rest

    def _deliver(self, frame: tuple[int, int, int, int], body: memoryview) -> None:
        call_id, kind, pickled, nbufs = frame
        lens = struct.unpack_from(f">{nbufs}I", body, 0) if nbufs else ()
        at = 4 * nbufs
        meta = body[at:at + pickled]
        at += pickled
        buffers = []
        for n in lens:
            buffers.append(body[at:at + n])
            at += n
        if at != len(body):
            raise ValueError("worker channel frame whose parts do not add up to its size")
        self.on_frame(call_id, kind, pickle.loads(meta, buffers=buffers))

    def send(self, call_id: int, kind: int, obj: Any) -> None:
        if self.closed or self.transport is None or self.transport.is_closing():
            raise ChannelClosed("worker channel closed")
        oob: list[pickle.PickleBuffer] = []
        meta = pickle.dumps(obj, protocol=5, buffer_callback=oob.append)
        raws = [b.raw() for b in oob]
        lens = [r.nbytes for r in raws]
        size = 4 * len(raws) + len(meta) + sum(lens)
        if size > self.max_frame or len(raws) > _MAX_BUFFERS:
            raise ValueError(f"worker channel frame of {size} bytes ({len(raws)} buffers) "
                             f"over the cap {self.max_frame}")
        out = self._out
        out.append(_HEADER.pack(size, call_id, kind, len(meta), len(raws)))
        if raws:
            out.append(struct.pack(f">{len(raws)}I", *lens))
        out.append(meta)
        out.extend(raws)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        out, self._out = self._out, []
        if out and not self.closed and self.transport is not None:
            # one write: uvloop's writelines tries a system call per part
            self.transport.write(b"".join(out))

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class ShardPeer:
    """A worker connected to this one's channel server: it may be sent events."""

    def __init__(self, endpoint: _Endpoint) -> None:
        self._endpoint = endpoint
        self.name = ""

    def send_event(self, obj: Any) -> None:
        self._endpoint.send(0, EVENT, obj)


class ShardChannelServer:
    """Answers calls: `ops[name](peer, *args)`; `on_closed(peer)` when a peer goes."""

    def __init__(self, path: str, ops: Mapping[str, Op], *,
                 on_closed: Callable[[ShardPeer], None] = lambda peer: None,
                 max_frame: int = DEFAULT_MAX_FRAME) -> None:
        self.path, self.ops, self.on_closed, self.max_frame = path, ops, on_closed, max_frame
        self._server: asyncio.AbstractServer | None = None
        self._endpoints: set[_Endpoint] = set()
        self._running: set[asyncio.Future[Any]] = set()
        self._stopped = False

    async def start(self) -> None:
        self._server = await asyncio.get_running_loop().create_unix_server(
            self._accept, self.path)

    async def stop(self) -> None:
        self._stopped = True
        if self._server is not None:
            self._server.close()
        for ep in list(self._endpoints):
            ep.close()
        for future in list(self._running):
            future.cancel()

    def _accept(self) -> _Endpoint:
        endpoint = _Endpoint(self.max_frame)
        peer = ShardPeer(endpoint)
        self._endpoints.add(endpoint)

        def lost() -> None:
            self._endpoints.discard(endpoint)
            self.on_closed(peer)

        endpoint.on_lost = lost
        endpoint.on_frame = lambda call_id, kind, obj: self._on_call(
            endpoint, peer, call_id, kind, obj)
        if self._stopped:
            asyncio.get_running_loop().call_soon(endpoint.close)
        return endpoint

    def _on_call(self, endpoint: _Endpoint, peer: ShardPeer, call_id: int, kind: int,
                 obj: Any) -> None:
        if kind != CALL:
            raise ValueError(f"a worker sent frame kind {kind} where a call belongs")
        name, args = obj
        op = self.ops.get(name)
        if op is None:
            endpoint.send(call_id, FAIL, f"no worker channel op {name!r}")
            return
        # the op runs to its first wait now, in the order the calls arrived
        future = _first_step(op(peer, *args))
        if future.done():
            self._answer(endpoint, call_id, future)
        else:
            self._running.add(future)

            def done(f: asyncio.Future[Any]) -> None:
                self._running.discard(f)
                self._answer(endpoint, call_id, f)

            future.add_done_callback(done)

    def _answer(self, endpoint: _Endpoint, call_id: int, future: asyncio.Future[Any]) -> None:
        if endpoint.closed or future.cancelled():
            return
        exc = future.exception()
        with contextlib.suppress(ConnectionError):
            if exc is None:
                endpoint.send(call_id, REPLY, future.result())
            else:
                log.error("worker_channel_op_failed", error=repr(exc))
                endpoint.send(call_id, FAIL, f"{type(exc).__name__}: {exc}")


class ShardChannelClient:
    """Calls another worker's ops; its events go to `on_event`, in order."""

    def __init__(self, endpoint: _Endpoint, on_event: Callable[[Any], None]) -> None:
        self._endpoint = endpoint
        self._on_event = on_event
        self._next_id = 1
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        endpoint.on_frame = self._on_frame
        endpoint.on_lost = self._on_lost

    @classmethod
    async def connect(cls, path: str, *, on_event: Callable[[Any], None] = lambda e: None,
                      max_frame: int = DEFAULT_MAX_FRAME) -> ShardChannelClient:
        _, endpoint = await asyncio.get_running_loop().create_unix_connection(
            lambda: _Endpoint(max_frame), path)
        return cls(endpoint, on_event)

    def call(self, name: str, *args: Any) -> asyncio.Future[Any]:
        """Sends the call (in this turn of the loop, so calls go out in the order they are
        made) and returns the future of its answer; ChannelClosed when the other worker is
        gone."""
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

    def _on_frame(self, call_id: int, kind: int, obj: Any) -> None:
        if kind == EVENT:
            self._on_event(obj)
            return
        future = self._pending.pop(call_id, None)
        if future is None or future.done():
            return
        if kind == REPLY:
            future.set_result(obj)
        elif kind == FAIL:
            future.set_exception(ShardCallFailed(str(obj)))
        else:
            raise ValueError(f"frame kind {kind} where an answer belongs")

    def _on_lost(self) -> None:
        for future in self._pending.values():
            if not future.done():
                future.set_exception(ChannelClosed("worker channel closed"))
        self._pending.clear()
        if not self.closed.done():
            self.closed.set_result(None)

    async def close(self) -> None:
        self._endpoint.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.shield(self.closed), 1.0)
