"""Size-prefixed Kafka frames read from a transport with as few copies as possible.

`FrameReader` is an asyncio BufferedProtocol. Frames that fit in its 64 KiB scratch
buffer are received into it, several per receive. A larger frame gets a buffer of its own
size once its length has passed the checks, and the rest of it is received straight into
that buffer. asyncio's StreamReader instead copied every frame three times (the loop's
bytes, its own buffer, readexactly) before the caller saw it.

The owner decides what happens around the frames through callbacks:
- `on_frame(frame)`: a complete frame (without its length). A frame from the scratch
  buffer is a read-only view valid only during the call unless `copy_small` is set, in
  which case it is bytes the owner may keep; a large frame is a read-only view of its own
  buffer, which nothing else reuses.
- `admit(size)`: asked when a frame's length is known, before anything is allocated for
  it. False holds the reader: it stops parsing and pauses the transport until `release()`.
- `on_error(exc)`: a length outside min_bytes..max_bytes, or an exception from `on_frame`;
  the reader stops for good. The default closes the transport.
- `on_eof(partial)`: the peer closed its side; `partial` when it left part of a frame.
  Return True to keep the transport open for writing.
- `on_lost(exc)`: the connection is gone; `exc` is the first error seen, if any.

It also keeps write flow control (`drain()` waits while the transport's buffer is above its
high-water mark), so a server can write through the transport directly.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable
from typing import Final

_I32: Final = struct.Struct(">i")


class FrameError(ValueError):
    """A frame that cannot be read or parsed: the connection that sent it is closed."""


HTTP2_PREFACE: Final = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


class Http2PrefaceError(FrameError):
    """The connection began with HTTP/2's connection preface: an HTTP/2 (gRPC) client, e.g.
    `skiff` given a Kafka port as its admin address, not a Kafka client."""


class FrameReader(asyncio.BufferedProtocol):
    SCRATCH_BYTES = 64 * 1024

    def __init__(
        self,
        on_frame: Callable[[memoryview | bytes], None],
        on_lost: Callable[[BaseException | None], None],
        *,
        max_bytes: int,
        min_bytes: int = 0,
        admit: Callable[[int], bool] | None = None,
        on_error: Callable[[BaseException], None] | None = None,
        on_eof: Callable[[bool], bool] | None = None,
        on_connected: Callable[[asyncio.Transport], None] | None = None,
        copy_small: bool = False,
    ) -> None:
        self._on_frame = on_frame
        self._on_lost = on_lost
        self._max_bytes = max_bytes
        self._min_bytes = min_bytes
        self._admit = admit
        self._on_error = on_error
        self._on_eof = on_eof
        self._on_connected = on_connected
        self._copy_small = copy_small
        self._scratch = bytearray(self.SCRATCH_BYTES)
        self._start = 0  # unparsed bytes are scratch[start:end]
        self._end = 0
        self._big: bytearray | None = None  # a frame larger than the scratch, being read
        self._big_got = 0
        self._held = False
        self._first = True  # nothing parsed yet: the first bytes may be another protocol's
        self._stopped = False
        self._error: BaseException | None = None
        self._lost = False
        self._writable = asyncio.Event()
        self._writable.set()
        self.transport: asyncio.Transport | None = None

    # ---- asyncio protocol callbacks ----

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        if self._on_connected is not None:
            self._on_connected(self.transport)  # type: ignore[arg-type]

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._big is not None:
            return memoryview(self._big)[self._big_got:]
        if self._end == len(self._scratch):
            # Only reachable after a hold left a full buffer and the transport read on
            # anyway; the bytes wait, so ask for at most one more.
            self._compact()
        return memoryview(self._scratch)[self._end:]

    def buffer_updated(self, nbytes: int) -> None:
        try:
            if self._big is not None:
                self._big_got += nbytes
                if self._big_got == len(self._big):
                    # Nothing waits in the scratch buffer: it was emptied when this began.
                    frame, self._big = self._big, None
                    self._on_frame(memoryview(frame).toreadonly())
                return
            self._end += nbytes
            if not self._held and not self._stopped:
                self._parse()
        except Exception as e:
            self._fail(e)

    def eof_received(self) -> bool | None:
        partial = self._big is not None or self._end > self._start
        self._stopped = True
        if self._on_eof is not None:
            return self._on_eof(partial)
        return None  # close

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        self._big = None
        self._writable.set()  # wake drain() so it sees the loss
        self._on_lost(self._error or exc)

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    # ---- for the owner ----

    async def drain(self) -> None:
        if not self._writable.is_set():
            await self._writable.wait()
        if self._lost or self.transport is None or self.transport.is_closing():
            raise ConnectionResetError("connection lost")

    def stop(self) -> None:
        """Read nothing more (the owner is closing after its answers are written)."""
        self._stopped = True
        if self.transport is not None and not self.transport.is_closing():
            self.transport.pause_reading()

    def release(self) -> None:
        """Parse on after `admit` held the reader."""
        if not self._held or self._stopped:
            return
        self._held = False
        try:
            self._parse()
        except Exception as e:
            self._fail(e)
            return
        if not self._held and not self._stopped and self.transport is not None \
                and not self.transport.is_closing():
            self.transport.resume_reading()

    # ---- parsing ----

    def _parse(self) -> None:
        buf = self._scratch
        view = memoryview(buf).toreadonly()
        try:
            while self._end - self._start >= 4 and not self._stopped:
                if self._first:
                    head = bytes(view[self._start:min(self._end, self._start + 24)])
                    if head[:4] == b"PRI " and HTTP2_PREFACE.startswith(head):
                        raise Http2PrefaceError(
                            "the connection began with the HTTP/2 preface \"PRI * HTTP/2.0\"")
                    self._first = False
                (size,) = _I32.unpack_from(buf, self._start)
                if size < self._min_bytes or size > self._max_bytes:
                    raise FrameError(
                        f"frame size {size} outside {self._min_bytes}..{self._max_bytes}")
                if self._admit is not None and not self._admit(size):
                    self._hold()
                    return
                body = self._start + 4
                have = self._end - body
                if have >= size:
                    self._start = body + size
                    frame = view[body:body + size]
                    self._on_frame(frame.tobytes() if self._copy_small else frame)
                    continue
                if size + 4 > len(buf):
                    big = bytearray(size)
                    big[:have] = view[body:self._end]
                    self._big, self._big_got = big, have
                    self._start = self._end = 0
                    return
                break
        finally:
            view.release()
        self._compact()

    def _compact(self) -> None:
        if self._start == self._end:
            self._start = self._end = 0
        elif self._start > 0:
            left = self._end - self._start
            self._scratch[:left] = self._scratch[self._start:self._end]
            self._start, self._end = 0, left

    def _hold(self) -> None:
        self._held = True
        if self.transport is not None and not self.transport.is_closing():
            self.transport.pause_reading()

    def _fail(self, error: BaseException) -> None:
        if self._error is None:
            self._error = error
        self._stopped = True
        if self._on_error is not None:
            self._on_error(error)
        elif self.transport is not None:
            self.transport.close()
