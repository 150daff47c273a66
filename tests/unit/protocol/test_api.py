"""The API table, kio schema resolution and request/response header framing."""

from __future__ import annotations

import contextlib
import io
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.request_header.v1 import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2 import RequestHeader as RequestHeaderV2
from kio.schema.response_header.v0 import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1 import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_writer
from kio.static.primitive import i16, i32

from broker.protocol import api
from broker.protocol.api import BROKER_APIS, CONTROLLER_APIS, ApiTable, ApiVersionRange
from broker.protocol.headers import (
    FrameError,
    parse_request,
    peek_api,
    response_header_bytes,
)


def test_every_advertised_version_has_kio_classes() -> None:
    for table in (BROKER_APIS, CONTROLLER_APIS):
        for r in table:
            for v in range(r.min_version, r.max_version + 1):
                assert api.request_schema(r.api_key, v).__version__ == v
                assert api.response_schema(r.api_key, v).__api_key__ == r.api_key


LEGACY = {0: (0, 1, 2), 1: (0, 1, 2, 3), 2: (0,), 8: (0, 1), 9: (0,), 19: (0, 1), 20: (0,),
          32: (0,), 35: (0,), 23: (0, 1)}


def test_versions_kafka4_removed_come_from_kio_050() -> None:
    for key, versions in LEGACY.items():
        for v in versions:
            assert not api.has_current_kio_schema(key, v)
            assert api.has_legacy_schema(key, v)
            req, resp = api.request_schema(key, v), api.response_schema(key, v)
            assert req.__module__.startswith("broker.protocol._kio_legacy.")
            assert (req.__api_key__, req.__version__) == (key, v)
            assert (resp.__api_key__, resp.__version__) == (key, v)
            assert not req.__flexible__
            assert api.response_header_schema(key, v) is ResponseHeaderV0
            assert BROKER_APIS.supports(key, v)
        # the next version up comes from installed kio
        assert api.has_current_kio_schema(key, max(versions) + 1)
    assert not api.has_kio_schema(1, 99)


def test_floors_table_kafka4_raises_to_kip896_floors() -> None:
    assert api.floors_table(BROKER_APIS, "kafka3") == BROKER_APIS
    k4 = api.floors_table(BROKER_APIS, "kafka4")
    for key, versions in LEGACY.items():
        r = k4.get(key)
        assert r is not None and r.min_version == max(versions) + 1
        assert r.max_version == BROKER_APIS.get(key).max_version  # type: ignore[union-attr]
    assert k4.get(3) == BROKER_APIS.get(3)  # Metadata keeps v0 in Kafka 4
    with pytest.raises(ValueError, match=r"skiff\.min\.api\.versions"):
        api.floors_table(BROKER_APIS, "kafka2")


def test_header_versions_follow_flexibility() -> None:
    assert api.request_header_schema(3, 8) is RequestHeaderV1
    assert api.request_header_schema(3, 9) is RequestHeaderV2
    assert api.response_header_schema(3, 8) is ResponseHeaderV0
    assert api.response_header_schema(3, 9) is ResponseHeaderV1
    assert api.request_header_schema(18, 3) is RequestHeaderV2
    # ApiVersions answers always carry header v0.
    assert api.response_header_schema(18, 3) is ResponseHeaderV0
    assert api.response_header_schema(18, 4) is ResponseHeaderV0
    assert api.is_flexible(1, 12) and not api.is_flexible(1, 11)


@pytest.mark.parametrize("key_version", [(3, 8), (3, 9), (18, 3), (1, 12), (0, 9)])
def test_response_header_bytes_match_kio(key_version: tuple[int, int]) -> None:
    key, version = key_version
    header_cls = api.response_header_schema(key, version)
    buf = io.BytesIO()
    entity_writer(header_cls)(buf, header_cls(correlation_id=i32(-123456)))
    assert response_header_bytes(key, version, -123456) == buf.getvalue()


def test_table_operations() -> None:
    t = ApiTable.of((18, 0, 4), (3, 0, 12))
    assert [r.api_key for r in t] == [3, 18]
    assert t.supports(3, 12) and not t.supports(3, 13) and not t.supports(1, 4)
    t2 = t.with_api(1, 4, 12)
    assert t2.supports(1, 4) and not t.supports(1, 4)
    assert t2.with_api(1, 5, 6).get(1) == ApiVersionRange(1, 5, 6)
    assert list(t2.restricted_to({18})) == [ApiVersionRange(18, 0, 4)]
    assert 3 not in t2.without_api(3)
    with pytest.raises(ValueError, match="no kio schema"):
        ApiTable.of((1, 0, 19))  # beyond kio's newest Fetch
    with pytest.raises(ValueError, match="no kio schema"):
        ApiTable.of((0, 0, 14))

    with pytest.raises(ValueError, match="twice"):
        ApiTable.of((18, 0, 1), (18, 2, 3))
    with pytest.raises(ValueError):
        ApiVersionRange(3, 5, 4)


def _request_frame(key: int, version: int, corr: int, client_id: str | None,
                   header_tags: bytes = b"", body: bytes = b"") -> bytes:
    h = RequestHeaderV1(request_api_key=i16(key), request_api_version=i16(version),
                        correlation_id=i32(corr), client_id=client_id)
    buf = io.BytesIO()
    entity_writer(RequestHeaderV1)(buf, h)
    return buf.getvalue() + header_tags + body


def test_parse_request_v2_header_skips_unknown_tagged_fields() -> None:
    # Two tagged fields (tag 0, 3 bytes; tag 7, 0 bytes) then ApiVersions v3's body.
    tags = b"\x02" + b"\x00\x03abc" + b"\x07\x00"
    body = b"\x04abc\x041.0\x00"
    p = parse_request(_request_frame(18, 3, 42, "cli", tags, body))
    assert (p.api_key, p.api_version, p.correlation_id, p.client_id) == (18, 3, 42, "cli")
    assert p.body.client_software_name == "abc"
    assert p.body.client_software_version == "1.0"
    # A tag whose size runs past the frame.
    with pytest.raises(FrameError):
        parse_request(_request_frame(18, 3, 42, "cli", b"\x01\x00\x7f", body))


def test_parse_request_null_client_id_and_trailing_bytes() -> None:
    p = parse_request(_request_frame(18, 1, 1, None, body=b"trailing"))
    assert p.client_id is None and p.api_version == 1


def test_peek_too_short() -> None:
    with pytest.raises(FrameError):
        peek_api(b"\x00\x12\x00")
    assert peek_api(struct.pack(">hhi", 18, 3, -1)).correlation_id == -1


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64), st.sampled_from([(18, 0), (18, 3), (3, 12), (3, 4), (1, 12)]))
def test_parse_request_never_raises_anything_but_frame_error(tail: bytes,
                                                             kv: tuple[int, int]) -> None:
    frame = struct.pack(">hh", *kv) + tail
    with contextlib.suppress(FrameError):
        parse_request(frame)


def test_a_parsed_request_keeps_nothing_of_the_frame_it_was_read_from() -> None:
    """The server hands _accept_frame a view of the frame reader's scratch buffer, which
    the next receive overwrites (copy_small=False): every field of the parsed request must
    be a copy, records and raw bytes included."""
    from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest

    from bench import replay
    from broker.testing.wire import encode_request

    frames = [replay.produce_frame("topic", [0, 1], 3, 20, value=b"v" * 20)[4:],
              encode_request(SaslAuthenticateRequest(auth_bytes=b"\0user\0secret"), 7)[4:]]
    for frame in frames:
        scratch = bytearray(frame)
        view = memoryview(scratch).toreadonly()
        parsed = parse_request(view)
        expected = parse_request(bytes(frame))
        del view
        scratch[:] = b"\xff" * len(scratch)
        assert parsed == expected
