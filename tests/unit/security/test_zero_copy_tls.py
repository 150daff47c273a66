"""Under TLS the Fetch path copies: file slices go through the transport (which encrypts),
never os.sendfile on the raw socket."""

from __future__ import annotations

import asyncio
import os
import tempfile
from dataclasses import dataclass
from typing import Any

from broker.protocol.frames import ResponseChunks, ZeroCopyWriter


@dataclass
class _Slice:
    file: Any
    position: int
    length: int

    def read_bytes(self) -> bytes:
        return os.pread(self.file.fileno(), self.length, self.position)


class _Transport:
    """Records writes; has no socket, so a sendfile attempt would fail loudly."""

    def __init__(self) -> None:
        self.written = bytearray()

    def writelines(self, parts: Any) -> None:
        for p in parts:
            self.written += p

    def get_extra_info(self, name: str) -> Any:
        raise AssertionError(f"the copying writer must not look for the raw {name}")

    def is_closing(self) -> bool:
        return False


def test_copy_mode_writes_file_slices_through_the_transport() -> None:
    with tempfile.TemporaryFile() as f:
        f.write(b"0123456789" * 1000)
        f.flush()
        chunks = ResponseChunks([b"head", _Slice(f, 5, 200), b"mid", _Slice(f, 9000, 1000),
                                 b"tail"])
        t = _Transport()

        async def drain() -> None:
            return None

        writer = ZeroCopyWriter(t, drain, copy=True)  # type: ignore[arg-type]
        asyncio.run(writer.write(b"PFX", chunks))
        data = (b"0123456789" * 1000)
        assert bytes(t.written) == b"PFX" + b"head" + data[5:205] + b"mid" + \
            data[9000:10000] + b"tail"
