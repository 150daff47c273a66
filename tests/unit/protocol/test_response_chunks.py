"""ResponseChunks: a body of bytes and file slices in wire order, its size, and whether the
writer must splice files (os.sendfile) or may write it as bytes."""

from __future__ import annotations

import tempfile

from broker.log.segment import FileSlice
from broker.protocol.frames import ResponseChunks


def test_of_bytes_is_the_one_part_body_the_constructor_builds() -> None:
    for body in (b"answer", b""):
        fast, built = ResponseChunks.of_bytes(body, 40), ResponseChunks([body], throttle_ms=40)
        assert fast.parts == built.parts and fast.size == built.size == len(body)
        assert fast.throttle_ms == built.throttle_ms == 40
        assert fast.to_bytes() == body and not fast.has_file_slices()
    grown = ResponseChunks.of_bytes(b"head")
    grown.append(b"-tail")
    assert grown.to_bytes() == b"head-tail" and grown.size == 9


def test_file_slices_are_counted_as_they_are_appended() -> None:
    with tempfile.TemporaryFile() as f:
        f.write(b"0123456789")
        f.flush()
        chunks = ResponseChunks([b"a", b"b"])
        assert not chunks.has_file_slices() and len(chunks) == 1  # adjacent bytes merged
        chunks.append(FileSlice(f, 0, 0))  # empty: not a part
        assert not chunks.has_file_slices()
        chunks.append(FileSlice(f, 2, 3))
        assert chunks.has_file_slices() and chunks.size == 5
        assert chunks.to_bytes() == b"ab234"
        of_bytes = ResponseChunks.of_bytes(b"x")
        of_bytes.append(FileSlice(f, 0, 1))
        assert of_bytes.has_file_slices() and of_bytes.to_bytes() == b"x0"
