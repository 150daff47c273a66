"""Under TLS the Fetch path copies: file slices go through the transport (which encrypts),
never os.sendfile on the raw socket."""

from __future__ import annotations

import asyncio
import os
import tempfile
from typing import Any

import pytest

from broker.log.segment import FileSlice
from broker.protocol.frames import COPY_PIECE, ResponseChunks, ZeroCopyWriter


class _Transport:
    """Records writes; has no socket, so a sendfile attempt would fail loudly."""

    def __init__(self) -> None:
        self.written = bytearray()
        self.writes: list[int] = []  # the size of each write/writelines call

    def writelines(self, parts: Any) -> None:
        before = len(self.written)
        for p in parts:
            self.written += p
        self.writes.append(len(self.written) - before)

    def write(self, data: bytes) -> None:
        self.written += data
        self.writes.append(len(data))

    def get_extra_info(self, name: str) -> Any:
        raise AssertionError(f"the copying writer must not look for the raw {name}")

    def is_closing(self) -> bool:
        return False


def test_copy_mode_writes_file_slices_through_the_transport() -> None:
    with tempfile.TemporaryFile() as f:
        f.write(b"0123456789" * 1000)
        f.flush()
        chunks = ResponseChunks([b"head", FileSlice(f, 5, 200), b"mid", FileSlice(f, 9000, 1000),
                                 b"tail"])
        t = _Transport()

        async def drain() -> None:
            return None

        writer = ZeroCopyWriter(t, drain, copy=True)  # type: ignore[arg-type]
        asyncio.run(writer.write(b"PFX", chunks))
        data = (b"0123456789" * 1000)
        assert bytes(t.written) == b"PFX" + b"head" + data[5:205] + b"mid" + \
            data[9000:10000] + b"tail"


def test_a_large_slice_goes_through_in_pieces_with_flow_control_between() -> None:
    """One write of a whole multi-MB slice made OpenSSL's memory BIO grow in steps (realloc,
    copy, cleanse each time): the slice goes out in COPY_PIECE pieces, each a write of its
    own, with the transport's drain awaited between them."""
    data = os.urandom(3 * COPY_PIECE + 1234)
    with tempfile.TemporaryFile() as f:
        f.write(data)
        f.flush()
        t = _Transport()
        drains: list[int] = []

        async def drain() -> None:
            drains.append(len(t.written))

        writer = ZeroCopyWriter(t, drain, copy=True)  # type: ignore[arg-type]
        asyncio.run(writer.write(b"PFX", ResponseChunks([b"head", FileSlice(f, 0, len(data)),
                                                         b"tail"])))
    assert bytes(t.written) == b"PFXhead" + data + b"tail"
    assert t.writes == [7, COPY_PIECE, COPY_PIECE, COPY_PIECE, 1234, 4]
    # drained after each piece but the last (the server drains after the whole answer)
    assert drains == [7 + COPY_PIECE * k for k in (1, 2, 3)]


def test_a_slice_past_the_end_of_its_file_fails_the_write() -> None:
    with tempfile.TemporaryFile() as f:
        f.write(b"x" * 100)
        f.flush()
        t = _Transport()

        async def drain() -> None:
            return None

        writer = ZeroCopyWriter(t, drain, copy=True)  # type: ignore[arg-type]
        with pytest.raises(OSError, match="file ended"):
            asyncio.run(writer.write(b"", ResponseChunks([FileSlice(f, 50, 100)])))
