"""tests/support/apiversions_shim.py: an ApiVersions v3 answer loses its top-level tagged
fields and nothing else, and one whose tagged fields run past its end is refused."""

from __future__ import annotations

import datetime
import io
import struct

import pytest
from kio.schema.api_versions.v3.response import (
    ApiVersion,
    ApiVersionsResponse,
    FinalizedFeatureKey,
    SupportedFeatureKey,
)
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32Timedelta, i64

from broker.protocol.headers import FrameError
from tests.support.apiversions_shim import strip_top_level_tags

CORRELATION_ID = 7


def answer(**tags: object) -> ApiVersionsResponse:
    return ApiVersionsResponse(
        error_code=ErrorCode.none,
        api_keys=tuple(ApiVersion(api_key=i16(k), min_version=i16(0), max_version=i16(v))
                       for k, v in ((0, 11), (1, 17), (18, 4))),
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
        **tags)  # type: ignore[arg-type]


def payload(response: ApiVersionsResponse) -> bytes:
    out = io.BytesIO()
    entity_writer(ApiVersionsResponse)(out, response)
    return struct.pack(">i", CORRELATION_ID) + out.getvalue()


def test_the_top_level_tagged_fields_are_dropped_and_the_rest_kept() -> None:
    tagged = answer(
        supported_features=(SupportedFeatureKey(name="metadata.version", min_version=i16(1),
                                                max_version=i16(27)),),
        finalized_features_epoch=i64(5),
        finalized_features=(FinalizedFeatureKey(name="metadata.version",
                                                max_version_level=i16(27),
                                                min_version_level=i16(27)),))
    stripped = strip_top_level_tags(payload(tagged))
    assert stripped == payload(answer())
    assert len(stripped) < len(payload(tagged))
    decoded, size = entity_reader(ApiVersionsResponse)(memoryview(stripped), 4)
    assert size == len(stripped) - 4
    assert decoded.api_keys == tagged.api_keys
    assert decoded.supported_features == ()


def test_an_answer_without_tagged_fields_passes_unchanged() -> None:
    assert strip_top_level_tags(payload(answer())) == payload(answer())


def test_tagged_fields_that_run_past_the_end_are_refused() -> None:
    whole = payload(answer())
    # the first api key's tagged fields claim one field of 100 bytes
    first_tags = 4 + 2 + 1 + 6
    broken = whole[:first_tags] + b"\x01\x00\x64" + whole[first_tags + 1:]
    with pytest.raises(FrameError):
        strip_top_level_tags(broken)
