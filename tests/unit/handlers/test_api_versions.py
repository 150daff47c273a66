"""ApiVersions: exact bytes for v0-v4, the too-high answer, no default-valued tagged fields."""

from __future__ import annotations

import asyncio
import struct
from io import BytesIO

import pytest
from kafka.protocol.old.api_versions import (
    ApiVersionsResponse_v0,
    ApiVersionsResponse_v1,
    ApiVersionsResponse_v2,
    ApiVersionsResponse_v3,
    ApiVersionsResponse_v4,
)
from kio.schema.api_versions.v3.request import ApiVersionsRequest as ApiVersionsRequestV3
from kio.schema.errors import ErrorCode

from broker.handlers import api_versions
from broker.metadata.image import MetadataImage
from broker.protocol.api import BROKER_APIS, ApiTable
from broker.protocol.headers import encode_body, encode_response
from broker.server.context import RequestContext

KAFKA_PYTHON = {
    0: ApiVersionsResponse_v0,
    1: ApiVersionsResponse_v1,
    2: ApiVersionsResponse_v2,
    3: ApiVersionsResponse_v3,
    4: ApiVersionsResponse_v4,
}

TABLE = ApiTable.of((0, 0, 9), (1, 4, 12), (18, 0, 4))


def _ctx(version: int, apis: ApiTable = TABLE) -> RequestContext:
    return RequestContext(
        api_key=18, api_version=version, correlation_id=77, client_id="c",
        listener_name="PLAINTEXT", peer_host="127.0.0.1", peer_port=1, received_ms=0, apis=apis,
    )


def _expected_body(version: int, table: ApiTable, error: int = 0) -> bytes:
    """Written from the protocol spec, not from kio."""
    flexible = version >= 3
    out = struct.pack(">h", error)
    entries = list(table)
    out += bytes([len(entries) + 1]) if flexible else struct.pack(">i", len(entries))
    for r in entries:
        out += struct.pack(">hhh", r.api_key, r.min_version, r.max_version)
        if flexible:
            out += b"\x00"  # no tagged fields in the entry
    if version >= 1:
        out += struct.pack(">i", 0)  # throttle_time_ms
    if flexible:
        out += b"\x00"  # no tagged fields: supported/finalized features left at defaults
    return out


@pytest.mark.parametrize("version", range(5))
def test_bytes_of_every_version(version: int) -> None:
    from kio.index import load_request_schema

    req_cls = load_request_schema(18, version)
    req = (req_cls(client_software_name="x", client_software_version="1")  # type: ignore[call-arg]
           if version >= 3 else req_cls())
    resp = asyncio.run(api_versions.handle(None, _ctx(version), req))
    body = encode_body(resp)
    assert body == _expected_body(version, TABLE)
    # The response header is v0 (correlation id only) even for flexible versions.
    frame = encode_response(resp, 77)
    assert frame == struct.pack(">ii", 4 + len(body), 77) + body
    # kafka-python parses it.
    parsed = KAFKA_PYTHON[version].decode(BytesIO(body))
    assert parsed.error_code == 0
    assert [tuple(k) for k in parsed.api_keys][:3] == [(0, 0, 9), (1, 4, 12), (18, 0, 4)]


def test_full_broker_table_v3_bytes_have_no_tagged_fields() -> None:
    req = ApiVersionsRequestV3(client_software_name="librdkafka", client_software_version="2.0.2")
    resp = asyncio.run(api_versions.handle(None, _ctx(3, BROKER_APIS), req))
    body = encode_body(resp)
    assert body == _expected_body(3, BROKER_APIS)
    assert body.endswith(struct.pack(">i", 0) + b"\x00")  # throttle 0, zero tagged fields


def test_too_high_version_answer_is_v0_with_our_ranges() -> None:
    resp = api_versions.unsupported_version_response(TABLE)
    assert resp.__version__ == 0
    body = encode_body(resp)
    assert body == _expected_body(0, TABLE, error=int(ErrorCode.unsupported_version))
    assert encode_response(resp, 5)[4:8] == struct.pack(">i", 5)
    parsed = ApiVersionsResponse_v0.decode(BytesIO(body))
    assert parsed.error_code == 35


@pytest.mark.parametrize(
    ("name", "valid"),
    [("librdkafka", True), ("kafka-python", True), ("a.b-c", True), ("x", True),
     ("", False), ("-x", False), ("x-", False), ("has space", False), ("ü", False)],
)
def test_client_software_name_validation(name: str, valid: bool) -> None:
    req = ApiVersionsRequestV3(client_software_name=name, client_software_version="1.0")
    resp = asyncio.run(api_versions.handle(None, _ctx(3), req))
    if valid:
        assert resp.error_code == ErrorCode.none and len(resp.api_keys) == 3
    else:
        assert resp.error_code == ErrorCode.invalid_request and resp.api_keys == ()


def test_error_response_keeps_the_version() -> None:
    req = ApiVersionsRequestV3(client_software_name="a", client_software_version="1")
    resp = api_versions.error_response(_ctx(3), req, ErrorCode.unknown_server_error)
    assert resp.__version__ == 3 and resp.error_code == ErrorCode.unknown_server_error


class _Features:
    """A node with finalized features: what ApiVersions reads of it."""

    def __init__(self, kraft_version: int = 0) -> None:
        from broker.metadata import records as rec
        from broker.metadata.snapshot import image_from_records

        self.metadata = image_from_records([
            rec.feature_level_record("metadata.version", 25),
            rec.feature_level_record("transaction.version", 2)])
        self.kraft_version = kraft_version
        self.node_id = 1
        self.cluster_id = ""
        self.telemetry = None


@pytest.mark.parametrize("version", [3, 4])
def test_supported_and_finalized_features(version: int) -> None:
    from kio.index import load_request_schema

    req = load_request_schema(18, version)(  # type: ignore[call-arg]
        client_software_name="x", client_software_version="1")
    node = _Features(kraft_version=1)
    resp = asyncio.run(api_versions.handle(node, _ctx(version), req))
    supported = {f.name: (f.min_version, f.max_version) for f in resp.supported_features}
    # KIP-1022: before v4 a range from 0 is left out, as Kafka 4.4 answers a v3 request
    if version < 4:
        assert supported == {"metadata.version": (21, 33)}
    else:
        assert supported == {"group.version": (0, 1), "kraft.version": (0, 1),
                             "metadata.version": (21, 33), "share.version": (0, 2),
                             "streams.version": (0, 1), "transaction.version": (0, 2)}
    assert {f.name: f.max_version_level for f in resp.finalized_features} == {
        "kraft.version": 1, "metadata.version": 25, "transaction.version": 2}
    assert resp.finalized_features_epoch == node.metadata.offset
    body = encode_body(resp)
    parsed = KAFKA_PYTHON[version].decode(BytesIO(body))
    assert parsed.error_code == 0
    # kraft.version 0 (static voters) is not listed as finalized, as Kafka leaves it out
    resp = asyncio.run(api_versions.handle(_Features(), _ctx(version), req))
    assert "kraft.version" not in {f.name for f in resp.finalized_features}
    # before v3 there is nowhere to put them
    old = asyncio.run(api_versions.handle(node, _ctx(2), load_request_schema(18, 2)()))
    assert encode_body(old) == _expected_body(2, TABLE)


class _Node:
    cluster_id = "cluster-a"
    node_id = 1
    metadata = MetadataImage.empty()
    kraft_version = 0
    telemetry = None


@pytest.mark.parametrize(("cluster_id", "node_id", "error"), [
    (None, -1, ErrorCode.none),  # no ids: not checked
    ("cluster-a", 1, ErrorCode.none),  # this node
    ("cluster-b", 1, ErrorCode.rebootstrap_required),  # another cluster (KIP-1242)
    ("cluster-a", 2, ErrorCode.rebootstrap_required),  # another node of this cluster
    (None, 1, ErrorCode.invalid_request),  # a node without its cluster (Kafka's isValid)
])
def test_v5_checks_cluster_and_node(cluster_id: str | None, node_id: int,
                                    error: ErrorCode) -> None:
    from broker.protocol.api import request_schema

    req = request_schema(18, 5)(  # type: ignore[call-arg]
        client_software_name="x", client_software_version="1", cluster_id=cluster_id,
        node_id=node_id)
    resp = asyncio.run(api_versions.handle(_Node(), _ctx(5), req))
    assert resp.error_code == error
    # an error answers no API keys, as Kafka's getErrorResponse does
    assert len(resp.api_keys) == (len(TABLE) if error == ErrorCode.none else 0)
    assert type(resp).__module__ == "broker.protocol._kio_next.api_versions.v5.response"
