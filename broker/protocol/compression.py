"""Record-batch compression codecs as Kafka writes them.

gzip is a gzip member, snappy is either a raw block or the xerial stream framing the
Java client writes (magic, version, then length-prefixed raw blocks), lz4 is the LZ4
frame format (KafkaLZ4BlockOutputStream), zstd is a zstd frame. Every decompressor
stops at `max_size` output bytes so a small hostile payload cannot exhaust memory.
"""

from __future__ import annotations

import enum
import struct
import zlib

import cramjam
import lz4.frame
import zstandard
from kio.schema.errors import ErrorCode

from broker.errors import KafkaError

# Decompressed size cap when the caller gives none: well above max.message.bytes
# defaults, far below what a 2-core broker can afford per request.
DEFAULT_MAX_DECOMPRESSED = 256 * 1024 * 1024

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")
_XERIAL_BLOCK = 32 * 1024  # block size snappy-java uses by default
_LEN = struct.Struct(">i")


class Compression(enum.IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


def codec_from_attributes(attributes: int) -> Compression:
    code = attributes & 0x07
    try:
        return Compression(code)
    except ValueError:
        raise KafkaError(
            ErrorCode.unsupported_compression_type, f"compression codec {code}"
        ) from None


def codec_by_name(name: str) -> Compression | None:
    """Topic config `compression.type` value -> codec; None means `producer` (keep as sent)."""
    lowered = name.strip().lower()
    if lowered == "producer":
        return None
    if lowered == "uncompressed":
        return Compression.NONE
    try:
        return Compression[lowered.upper()]
    except KeyError:
        raise ValueError(f"unknown compression.type {name!r}") from None


def compress(codec: Compression, data: bytes | memoryview, *, level: int | None = None) -> bytes:
    if codec == Compression.NONE:
        return bytes(data)
    if codec == Compression.GZIP:
        co = zlib.compressobj(6 if level is None else level, zlib.DEFLATED, 31)
        return co.compress(data) + co.flush()
    if codec == Compression.SNAPPY:
        return xerial_snappy_compress(data)
    if codec == Compression.LZ4:
        return bytes(
            lz4.frame.compress(
                bytes(data),
                block_size=lz4.frame.BLOCKSIZE_MAX64KB,
                content_checksum=False,
                block_linked=False,
                compression_level=0 if level is None else level,
            )
        )
    if codec == Compression.ZSTD:
        return zstandard.ZstdCompressor(level=3 if level is None else level).compress(data)
    raise KafkaError(ErrorCode.unsupported_compression_type, f"codec {codec}")


def decompress(
    codec: Compression, data: bytes | memoryview, max_size: int = DEFAULT_MAX_DECOMPRESSED
) -> bytes:
    """Decompress `data`; raise CORRUPT_MESSAGE if it is malformed or inflates past `max_size`."""
    try:
        if codec == Compression.NONE:
            return bytes(data)
        if codec == Compression.GZIP:
            return _gunzip(data, max_size)
        if codec == Compression.SNAPPY:
            return snappy_decompress(data, max_size)
        if codec == Compression.LZ4:
            return _lz4_decompress(data, max_size)
        if codec == Compression.ZSTD:
            return _zstd_decompress(data, max_size)
    except KafkaError:
        raise
    except Exception as exc:  # codec libraries raise their own types on garbage input
        raise KafkaError(ErrorCode.corrupt_message, f"{codec.name} data: {exc}") from exc
    raise KafkaError(ErrorCode.unsupported_compression_type, f"codec {codec}")


def _too_big(max_size: int) -> KafkaError:
    return KafkaError(ErrorCode.corrupt_message, f"decompressed size exceeds {max_size} bytes")


def _gunzip(data: bytes | memoryview, max_size: int) -> bytes:
    d = zlib.decompressobj(47)  # gzip or zlib header, auto-detected
    out = d.decompress(data, max_size + 1)
    if len(out) > max_size:
        raise _too_big(max_size)
    if not d.eof:
        raise KafkaError(ErrorCode.corrupt_message, "truncated gzip stream")
    return out


def _raw_snappy(block: bytes | memoryview, budget: int) -> bytes:
    # The uncompressed length is a varint preamble: check it before allocating.
    if int(cramjam.snappy.decompress_raw_len(bytes(block[:10]))) > budget:
        raise _too_big(budget)
    return bytes(cramjam.snappy.decompress_raw(bytes(block)))


def snappy_decompress(data: bytes | memoryview, max_size: int = DEFAULT_MAX_DECOMPRESSED) -> bytes:
    mv = memoryview(data)
    if len(mv) >= 16 and bytes(mv[:8]) == XERIAL_MAGIC:
        pos = 16
        parts: list[bytes] = []
        total = 0
        while pos < len(mv):
            if pos + 4 > len(mv):
                raise KafkaError(ErrorCode.corrupt_message, "truncated xerial block length")
            (n,) = _LEN.unpack_from(mv, pos)
            pos += 4
            if n < 0 or pos + n > len(mv):
                raise KafkaError(ErrorCode.corrupt_message, f"xerial block length {n}")
            block = _raw_snappy(mv[pos : pos + n], max_size - total)
            total += len(block)
            parts.append(block)
            pos += n
        return b"".join(parts)
    return _raw_snappy(mv, max_size)


def xerial_snappy_compress(data: bytes | memoryview) -> bytes:
    mv = memoryview(data)
    out = [_XERIAL_HEADER.pack(XERIAL_MAGIC, 1, 1)]
    for start in range(0, len(mv), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(bytes(mv[start : start + _XERIAL_BLOCK])))
        out.append(_LEN.pack(len(block)))
        out.append(block)
    return b"".join(out)


def _lz4_decompress(data: bytes | memoryview, max_size: int) -> bytes:
    d = lz4.frame.LZ4FrameDecompressor()
    out = bytes(d.decompress(bytes(data), max_length=max_size + 1))
    if len(out) > max_size:
        raise _too_big(max_size)
    if not d.eof:
        raise KafkaError(ErrorCode.corrupt_message, "truncated lz4 frame")
    return out


def _zstd_decompress(data: bytes | memoryview, max_size: int) -> bytes:
    dobj = zstandard.ZstdDecompressor(max_window_size=1 << 27)
    chunks: list[bytes] = []
    total = 0
    with dobj.stream_reader(bytes(data), read_across_frames=True) as reader:
        while total <= max_size:
            chunk = reader.read(max_size + 1 - total)
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    if total > max_size:
        raise _too_big(max_size)
    return b"".join(chunks)
