"""The request header's client id, read by hand (broker/protocol/headers.py), against
kio's RequestHeader v1 reader: the same client id and body offset for every header kio
reads, and a FrameError for every header kio refuses."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.schema.request_header.v1 import RequestHeader as RequestHeaderV1
from kio.serial import entity_reader

from broker.protocol.headers import (
    FrameError,
    parse_request,
    parse_request_header,
    skip_tagged_fields,
)

_kio_header = entity_reader(RequestHeaderV1)


def _frame(length: int, client_id: bytes, rest: bytes = b"") -> bytes:
    return struct.pack(">hhih", 0, 9, 7, length) + client_id + rest


def _kio(frame: bytes) -> tuple[str | None, int] | None:
    try:
        header, consumed = _kio_header(frame, 0)
    except Exception:
        return None
    return header.client_id, consumed


@given(st.one_of(st.none(), st.text(max_size=40)), st.binary(max_size=8))
def test_client_ids_read_as_kio_reads_them(client_id: str | None, rest: bytes) -> None:
    raw = b"" if client_id is None else client_id.encode()
    frame = _frame(-1 if client_id is None else len(raw), raw, rest)
    assert parse_request_header(frame, False) == _kio(frame) == (client_id, 10 + len(raw))
    assert parse_request_header(memoryview(frame), False) == (client_id, 10 + len(raw))


@given(st.integers(-(2 ** 15), 2 ** 15 - 1), st.binary(max_size=12))
def test_headers_kio_refuses_are_refused(length: int, raw: bytes) -> None:
    frame = _frame(length, raw)
    expected = _kio(frame)
    if expected is None:
        with pytest.raises(FrameError):
            parse_request_header(frame, False)
    else:
        assert parse_request_header(frame, False) == expected


def test_short_and_broken_headers_are_frame_errors() -> None:
    for frame in (b"", b"\x00" * 9, _frame(5, b"abc"), _frame(2, b"\xff\xfe"), _frame(-2, b"")):
        with pytest.raises(FrameError):
            parse_request_header(frame, False)


def test_a_flexible_header_skips_its_tagged_fields_after_the_client_id() -> None:
    body = b"\x04abc\x041.0\x00"  # ApiVersions v3: client software name and version
    frame = _frame(3, b"cli", b"\x01\x05\x02xy" + body)
    assert parse_request_header(frame, True) == ("cli", 18)
    p = parse_request(struct.pack(">hhih", 18, 3, 42, 3) + b"cli\x01\x05\x02xy" + body)
    assert (p.client_id, p.correlation_id, p.body.client_software_name) == ("cli", 42, "abc")


@given(st.binary(max_size=12))
def test_tagged_fields_are_skipped_as_kio_reads_them(tail: bytes) -> None:
    """A header's tagged fields after the client id: none (one zero byte), or any bytes,
    skipped or refused whatever the first byte."""
    from kio.schema.request_header.v2 import RequestHeader as RequestHeaderV2

    frame = _frame(3, b"cli", tail)
    try:
        _, consumed = entity_reader(RequestHeaderV2)(frame, 0)
    except Exception:
        consumed = None
    if consumed is None:
        with pytest.raises(FrameError):
            parse_request_header(frame, True)
    else:
        assert parse_request_header(frame, True) == ("cli", consumed)


def test_a_tagged_field_section_is_skipped_to_its_end_or_refused() -> None:
    two_fields = b"\x02\x00\x01a\x05\x02bc"
    assert skip_tagged_fields(b"xx" + two_fields + b"rest", 2) == 2 + len(two_fields)
    assert skip_tagged_fields(b"\x00", 0) == 1
    with pytest.raises(FrameError, match="more than 64"):
        skip_tagged_fields(b"\x41" + b"\x00\x00" * 65, 0)
    with pytest.raises(FrameError, match="past the end"):
        skip_tagged_fields(b"\x01\x00\x05ab", 0)
    with pytest.raises(FrameError, match="unparseable"):
        skip_tagged_fields(b"\x01\x00", 0)
