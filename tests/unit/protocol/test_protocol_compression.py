import gzip
import os
import struct

import cramjam
import lz4.frame
import pytest
import zstandard
from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.protocol.compression import (
    XERIAL_MAGIC,
    Compression,
    codec_by_name,
    compress,
    decompress,
    snappy_decompress,
)

DATA = b"".join(b"record-%d;" % i for i in range(5000)) + os.urandom(3000)


@pytest.mark.parametrize("codec", list(Compression))
def test_round_trip(codec):
    assert decompress(codec, compress(codec, DATA)) == DATA
    assert decompress(codec, compress(codec, b"")) == b""


def test_reads_what_other_implementations_write():
    # Stand-ins for the Java client: stdlib gzip, a plain lz4 frame, raw snappy, zstd.
    assert decompress(Compression.GZIP, gzip.compress(DATA)) == DATA
    assert decompress(Compression.LZ4, lz4.frame.compress(DATA)) == DATA
    assert decompress(Compression.SNAPPY, bytes(cramjam.snappy.compress_raw(DATA))) == DATA
    assert decompress(Compression.ZSTD, zstandard.ZstdCompressor().compress(DATA)) == DATA


def test_xerial_framing_is_what_snappy_java_writes():
    out = compress(Compression.SNAPPY, DATA)
    magic, version, compat = struct.unpack_from(">8sii", out)
    assert (magic, version, compat) == (XERIAL_MAGIC, 1, 1)
    # Blocks of at most 32 KiB of input, each length-prefixed raw snappy.
    pos, total = 16, b""
    while pos < len(out):
        (n,) = struct.unpack_from(">i", out, pos)
        total += bytes(cramjam.snappy.decompress_raw(out[pos + 4 : pos + 4 + n]))
        pos += 4 + n
    assert total == DATA


@pytest.mark.parametrize(
    "codec", [Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD]
)
def test_decompressed_size_cap(codec):
    bomb = compress(codec, b"\0" * 1_000_000)
    assert len(bomb) < 100_000
    with pytest.raises(KafkaError) as e:
        decompress(codec, bomb, max_size=10_000)
    assert e.value.error_code == ErrorCode.corrupt_message
    assert decompress(codec, bomb, max_size=1_000_000) == b"\0" * 1_000_000


def test_xerial_block_with_lying_length_is_rejected():
    bad = XERIAL_MAGIC + struct.pack(">ii", 1, 1) + struct.pack(">i", 1 << 30) + b"xx"
    with pytest.raises(KafkaError) as e:
        snappy_decompress(bad)
    assert e.value.error_code == ErrorCode.corrupt_message


@pytest.mark.parametrize(
    "codec", [Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD]
)
def test_garbage_is_corrupt_message(codec):
    with pytest.raises(KafkaError) as e:
        decompress(codec, b"\x01\x02garbage that is not compressed" * 3)
    assert e.value.error_code == ErrorCode.corrupt_message


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.LZ4])
def test_truncated_stream_is_corrupt(codec):
    data = compress(codec, DATA)
    with pytest.raises(KafkaError):
        decompress(codec, data[: len(data) // 2])


def test_codec_names():
    assert codec_by_name("producer") is None
    assert codec_by_name("uncompressed") is Compression.NONE
    assert codec_by_name("zstd") is Compression.ZSTD
    with pytest.raises(ValueError):
        codec_by_name("brotli")


def test_zstd_concatenated_frames_and_streams_without_content_size():
    import io

    c = zstandard.ZstdCompressor()
    buf = io.BytesIO()
    with c.stream_writer(buf, closefd=False) as w:  # no content size in the frame header
        w.write(DATA)
    two = buf.getvalue() + c.compress(b"tail")
    assert decompress(Compression.ZSTD, two) == DATA + b"tail"
    with pytest.raises(KafkaError):
        decompress(Compression.ZSTD, two, max_size=len(DATA))
