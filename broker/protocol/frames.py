"""Response bodies made of bytes and file slices, and the zero-copy writer that sends them.

A handler may answer with `ResponseChunks` instead of a kio entity: the response body as a
sequence of `bytes` and `FileSlice`s, written in order. File slices go out with `os.sendfile`
straight from the segment file to the socket, after the transport's buffered bytes have drained.

Why not `loop.sendfile`: under uvloop it is not implemented, and asyncio's version moves the
file descriptor's position (lseek) and pauses/resumes reading on the transport, which would
fight the connection's backpressure. Instead the socket's fd is duplicated once per connection,
and `os.sendfile` runs on the duplicate, waiting for writability with `loop.add_writer` on it
(the original fd belongs to the transport and cannot be watched directly). This works the same
on asyncio's selector loop and on uvloop, and never changes a file position.

An answer of OFFLOAD_MIN bytes or more goes instead to the server's native sender threads
(SenderPool, broker/protocol/_sendpool.c; `num.network.threads` of them): one loop sent the
answers of every connection one after another, and those sends were most of its time in a
fetch (docs/benchmarks.md, "Fetch answers sent by native threads").
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import socket
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from typing import ClassVar, Protocol


class HasFileno(Protocol):
    def fileno(self) -> int: ...


class FileSlice(Protocol):
    """`length` bytes of `file` at `position` (the log engine's FileSlice matches this)."""

    @property
    def file(self) -> HasFileno | int | None:
        """None only for an empty slice."""

    @property
    def position(self) -> int: ...

    @property
    def length(self) -> int: ...

    def read_bytes(self) -> bytes: ...


Chunk = bytes | bytearray | memoryview | FileSlice

# isinstance against a runtime-checkable Protocol costs ~30 us; chunks are told apart by
# checking for the byte types instead: anything else is a FileSlice.
_BYTES = (bytes, bytearray, memoryview)


def is_file_slice(chunk: Chunk) -> bool:
    return not isinstance(chunk, _BYTES)


def chunk_length(chunk: Chunk) -> int:
    if isinstance(chunk, bytes | bytearray):
        return len(chunk)
    if isinstance(chunk, memoryview):
        return chunk.nbytes
    return chunk.length


class ResponseChunks:
    """A response body as bytes and file slices, in wire order; `size` is its total length.
    `throttle_ms`: the throttle time the body carries, for the server to mute the
    connection that long after sending it (KIP-219)."""

    __slots__ = ("_file_slices", "_parts", "size", "throttle_ms")

    def __init__(self, parts: Iterable[Chunk] = (), throttle_ms: int = 0) -> None:
        self._parts: list[Chunk] = []
        self.size = 0
        self.throttle_ms = throttle_ms
        self._file_slices = 0
        for p in parts:
            self.append(p)

    @classmethod
    def of_bytes(cls, body: bytes, throttle_ms: int = 0) -> ResponseChunks:
        """A body of one byte string (an answer encoded whole): what
        `ResponseChunks([body], throttle_ms)` builds, without its per-part checks (this
        module runs interpreted, where that loop cost ~2 us, once per Produce answer)."""
        self = cls.__new__(cls)
        self._parts = [body] if body else []
        self.size = len(body)
        self.throttle_ms = throttle_ms
        self._file_slices = 0
        return self

    def append(self, part: Chunk) -> None:
        n = chunk_length(part)
        if n < 0:
            raise ValueError("negative chunk length")
        if n == 0:
            return
        if isinstance(part, _BYTES):
            # Adjacent byte strings are merged so the writer makes fewer calls.
            if self._parts:
                last = self._parts[-1]
                if isinstance(last, bytearray):
                    last += part
                    self.size += n
                    return
                if isinstance(last, bytes):
                    self._parts[-1] = bytearray(last) + part
                    self.size += n
                    return
            self._parts.append(bytes(part))
        else:
            self._parts.append(part)
            self._file_slices += 1
        self.size += n

    @property
    def parts(self) -> Sequence[Chunk]:
        return tuple(self._parts)

    def __iter__(self) -> Iterator[Chunk]:
        return iter(self._parts)

    def __len__(self) -> int:
        return len(self._parts)

    def has_file_slices(self) -> bool:
        return self._file_slices > 0

    def to_bytes(self) -> bytes:
        """The body as one bytes object (copies file slices): tests and non-socket paths."""
        out = bytearray()
        for p in self._parts:
            if not isinstance(p, _BYTES):
                data = p.read_bytes()
                if len(data) != p.length:
                    raise OSError(f"file slice read {len(data)} of {p.length} bytes")
                out += data
            else:
                out += p
        return bytes(out)


def _fileno(f: HasFileno | int | None) -> int:
    if f is None:
        raise OSError("file slice without a file")
    return f if isinstance(f, int) else f.fileno()


# An answer with file slices, of at least this many bytes in all, goes to the native sender
# threads (SenderPool) when the server has them; a smaller one costs less sent from the loop
# itself than handed over (a wake-up of a thread and one of the loop).
OFFLOAD_MIN = 256 * 1024

# A part of an answer for the sender threads: bytes, or a file slice as (fd, offset, length).
SendPart = bytes | bytearray | memoryview | tuple[int, int, int]


def native_senders_missing() -> str | None:
    """Why this install has no native sender threads (None: it has them)."""
    try:
        from broker.protocol import _sendpool  # noqa: F401
    except ImportError as exc:
        return f"broker/protocol/_sendpool.c is not built ({exc}; setup.py builds it " \
               "with a C compiler and Python's headers)"
    return None


class SenderPool:
    """An event loop's native sender threads (broker/protocol/_sendpool.c). `send` hands
    them an answer's parts for one socket and returns a future of (errno or 0, bytes sent);
    the loop learns of ended jobs through an eventfd it watches."""

    def __init__(self, loop: asyncio.AbstractEventLoop, threads: int) -> None:
        from broker.protocol import _sendpool

        self.threads = threads
        self._pool = _sendpool.Pool(threads)
        self._loop = loop
        self._futures: dict[int, asyncio.Future[tuple[int, int]]] = {}
        self._next_token = 0
        self.jobs = 0  # answers (and remainders of answers) handed to the threads
        self._fd = self._pool.fileno()
        loop.add_reader(self._fd, self._on_ended)

    def send(self, socket_fd: int, parts: list[SendPart]) -> asyncio.Future[tuple[int, int]]:
        token = self._next_token
        self._next_token += 1
        fut: asyncio.Future[tuple[int, int]] = self._loop.create_future()
        self._pool.submit(token, socket_fd, parts)
        self._futures[token] = fut
        self.jobs += 1
        return fut

    def _on_ended(self) -> None:
        for token, err, sent in self._pool.collect():
            fut = self._futures.pop(token, None)
            if fut is not None and not fut.done():  # done: its connection gave up on it
                fut.set_result((err, sent))

    def close(self) -> None:
        """Stops the threads (pending jobs end with ECANCELED) and settles every future."""
        self._loop.remove_reader(self._fd)
        self._pool.close()
        self._on_ended()

    # One pool per event loop, shared by its servers (a node's controller and client
    # listeners): closed when the last of them lets go.
    _shared: ClassVar[dict[asyncio.AbstractEventLoop, tuple[SenderPool, int]]] = {}

    @classmethod
    def acquire(cls, threads: int) -> SenderPool:
        loop = asyncio.get_running_loop()
        held = cls._shared.get(loop)
        pool, users = held if held is not None else (cls(loop, threads), 0)
        cls._shared[loop] = (pool, users + 1)
        return pool

    @property
    def users(self) -> int:
        """How many servers hold this pool (SenderPool.acquire)."""
        held = self._shared.get(self._loop)
        return held[1] if held is not None and held[0] is self else 0

    def release(self) -> None:
        pool, users = self._shared[self._loop]
        if users > 1:
            self._shared[self._loop] = (pool, users - 1)
            return
        del self._shared[self._loop]
        self.close()


_SHORT_OF_RESOURCES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM})


def _after(parts: list[SendPart], sent: int) -> list[SendPart]:
    """`parts` without their first `sent` bytes."""
    out: list[SendPart] = []
    for part in parts:
        n = part[2] if isinstance(part, tuple) else memoryview(part).nbytes
        if sent >= n:
            sent -= n
            continue
        if sent:
            if isinstance(part, tuple):
                part = (part[0], part[1] + sent, part[2] - sent)
            else:
                part = memoryview(part)[sent:]
            sent = 0
        out.append(part)
    return out


# A file slice under TLS goes through the transport in pieces of this size (see _copy_slice).
COPY_PIECE = 256 * 1024


class ZeroCopyWriter:
    """Writes ResponseChunks to a transport, splicing file slices with os.sendfile.

    `drain` waits until the transport's write buffer is below its high-water mark (the
    protocol's flow control)."""

    def __init__(self, transport: asyncio.Transport,
                 drain: Callable[[], Awaitable[None]], *, copy: bool = False,
                 senders: SenderPool | None = None) -> None:
        """`copy`: the transport encrypts (TLS), so file slices are read and written
        through it; sendfile on the raw socket would bypass the encryption. `senders`: the
        native threads that send answers of OFFLOAD_MIN bytes or more (not under `copy`)."""
        self._transport = transport
        self._drain = drain
        self._copy = copy
        self._dup: socket.socket | None = None
        # The duplicate's writability is watched from the first EAGAIN of an answer to its
        # end, not added and removed around each wait: each add and remove made uvloop set up
        # and tear down a poll handle (an ioctl and two epoll_ctl calls), about ten times per
        # megabyte answered with Kafka's 100 KB send buffer.
        self._loop: asyncio.AbstractEventLoop | None = None
        self._watched_fd = -1
        self._waiter: asyncio.Future[None] | None = None
        self._senders = None if copy else senders

    def close(self) -> None:
        self._unwatch()
        if self._dup is not None:
            self._dup.close()
            self._dup = None

    async def write(self, prefix: bytes, chunks: ResponseChunks) -> None:
        if self._copy or not chunks.has_file_slices():
            await self._write(prefix, chunks)
            return
        # A Fetch answer is prefix and partition head, file slice, tail: three sends, each a
        # segment the peer wakes up for. Corked, they leave as one (still zero-copy): on
        # this machine that halved the sender's CPU per small answer (docs/benchmarks.md).
        corked = self._cork(True)
        try:
            if self._senders is not None and chunks.size >= OFFLOAD_MIN:
                await self._write_by_senders(prefix, chunks)
            else:
                await self._write(prefix, chunks)
        finally:
            self._unwatch()
            if corked:
                self._cork(False)

    def _cork(self, on: bool) -> bool:
        """TCP_CORK on the socket (Linux, TCP only); False where it does not apply."""
        if not hasattr(socket, "TCP_CORK"):
            return False
        try:
            self._socket().setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, int(on))
        except (OSError, ConnectionError):
            return False
        return True

    async def _write(self, prefix: bytes, chunks: ResponseChunks) -> None:
        # Bytes go out together with the frame prefix or the bytes before them (writelines:
        # one writev on uvloop, no copy): on loopback every send is a segment the peer may
        # wake up for.
        pending: list[bytes | bytearray | memoryview] = [prefix]
        for part in chunks:
            if isinstance(part, _BYTES):
                pending.append(part)
                continue
            if pending:
                self._transport.writelines(pending)
                pending = []
            if self._copy:
                await self._copy_slice(part)
            else:
                await self._sendfile(part)
        if pending:
            self._transport.writelines(pending)

    async def _write_by_senders(self, prefix: bytes, chunks: ResponseChunks) -> None:
        """The answer sent whole by a sender thread; where the socket stays full for a while
        the thread gives it back, and the rest goes once the socket is writable."""
        senders = self._senders
        if senders is None:
            raise RuntimeError("no sender threads")
        await self._drain_fully()
        out_fd = self._socket_fd()
        parts: list[SendPart] = [prefix]
        for part in chunks:
            if isinstance(part, _BYTES):
                parts.append(part)
            elif part.length:
                parts.append((_fileno(part.file), part.position, part.length))
        first = True
        while True:
            if self._transport.is_closing():
                raise ConnectionError("connection closed")
            try:
                ended = senders.send(out_fd, parts)
            except OSError as exc:
                # Short of descriptors or memory for the threads' copies: the loop, which
                # needs neither, sends an answer not yet begun.
                if not first or exc.errno not in _SHORT_OF_RESOURCES:
                    raise
                await self._write(prefix, chunks)
                return
            first = False
            err, sent = await ended
            if err == 0:
                return
            if err != errno.EAGAIN:
                if err == errno.ENODATA:
                    raise OSError("a file ended before the end of its slice")
                raise OSError(err, os.strerror(err))
            parts = _after(parts, sent)
            await self._writable(out_fd)

    async def _copy_slice(self, s: FileSlice) -> None:
        """A file slice read and written through the (encrypting) transport in pieces of
        COPY_PIECE bytes, each written on its own and waiting for the transport's flow
        control in between. A TLS transport encrypts what it is given at once into an
        in-memory BIO: a whole 10 MB slice in one write made OpenSSL grow that buffer step
        by step (a realloc, a copy and a cleanse each time) and cost the broker ~4x the CPU
        per GB of the piecewise path (docs/benchmarks.md, security). Pieces also keep the
        read bytes in cache between pread and encryption, and memory bounded per
        connection."""
        in_fd = _fileno(s.file)
        offset, remaining = s.position, s.length
        while remaining > 0:
            if self._transport.is_closing():
                raise ConnectionError("connection closed")
            data = os.pread(in_fd, min(COPY_PIECE, remaining), offset)
            if not data:
                raise OSError(f"file ended {remaining} bytes before the end of the slice")
            self._transport.write(data)
            offset += len(data)
            remaining -= len(data)
            if remaining > 0:
                await self._drain()

    async def _drain_fully(self) -> None:
        transport = self._transport
        if transport.get_write_buffer_size() == 0:
            return
        low, high = transport.get_write_buffer_limits()
        transport.set_write_buffer_limits(high=0, low=0)
        try:
            await self._drain()
        finally:
            transport.set_write_buffer_limits(high=high, low=low)
        if transport.get_write_buffer_size() != 0:
            raise ConnectionError("transport did not drain before sendfile")

    def _socket(self) -> socket.socket:
        """The transport's socket, on a descriptor of its own (closed with the writer)."""
        if self._dup is None:
            sock = self._transport.get_extra_info("socket")
            if sock is None:
                raise ConnectionError("transport has no socket")
            fd = os.dup(sock.fileno())
            try:
                self._dup = socket.socket(fileno=fd)
            except OSError:
                with contextlib.suppress(OSError):
                    os.close(fd)
                raise
        return self._dup

    def _socket_fd(self) -> int:
        return self._socket().fileno()

    async def _sendfile(self, s: FileSlice) -> None:
        if self._transport.is_closing():
            raise ConnectionError("connection closed")
        await self._drain_fully()
        out_fd = self._socket_fd()
        in_fd = _fileno(s.file)
        offset, remaining = s.position, s.length
        while remaining > 0:
            try:
                sent = os.sendfile(out_fd, in_fd, offset, remaining)
            except BlockingIOError:
                await self._writable(out_fd)
                continue
            if sent == 0:
                # The file is shorter than the slice: the frame would be short, so the
                # connection must not continue.
                raise OSError(f"file ended {remaining} bytes before the end of the slice")
            offset += sent
            remaining -= sent

    async def _writable(self, fd: int) -> None:
        """Until `fd` is writable; it stays watched until the answer ends (`_unwatch`)."""
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        if self._watched_fd != fd:
            self._unwatch()
            loop.add_writer(fd, self._on_writable)
            self._watched_fd = fd
        fut: asyncio.Future[None] = loop.create_future()
        self._waiter = fut
        try:
            await fut
        finally:
            self._waiter = None

    def _on_writable(self) -> None:
        fut = self._waiter
        if fut is None:
            # Writable with nobody waiting (the answer is past its file slices): stop
            # watching, or the loop would call this at every turn.
            self._unwatch()
        elif not fut.done():
            fut.set_result(None)

    def _unwatch(self) -> None:
        if self._watched_fd >= 0 and self._loop is not None:
            self._loop.remove_writer(self._watched_fd)
        self._watched_fd = -1
