"""Nulls in requests, on a real node: every advertised API and version answers.

Kafka's schemas let many fields be null (a Metadata topic list, a transactional id, a rack, a
Produce partition's records, ...). A client may send null wherever the schema allows it, and
the broker must answer with the version's semantics or an error code, never fail inside a
handler. Where the schema does not allow null but an array arrives with length -1, Kafka's
parser refuses the request and closes the connection; Skiff does the same, before any handler
runs, and the node serves the next connection as before.
"""

from __future__ import annotations

import dataclasses
import socket
import struct

import pytest
from kio.index import load_request_schema
from kio.schema.api_versions.v3.response import ApiVersionsResponse

from broker.protocol.api import request_schema, response_schema
from broker.testing.wire import (
    api_versions_request,
    decode_response,
    encode_request,
    is_closed,
    raw_frame,
    recv_frame,
)
from tests.conftest import Broker
from tests.support.probe import null_probe, nullable_paths

pytestmark = pytest.mark.timeout(240)

_FAILURE_MARKS = ("handler failed", "Traceback", "encoding the response failed")


def _connect(bootstrap: str) -> socket.socket:
    host, port = bootstrap.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=10)
    sock.settimeout(15)
    return sock


def _advertised(sock: socket.socket) -> list[tuple[int, int, int]]:
    sock.sendall(encode_request(api_versions_request(3), correlation_id=1))
    _cid, answer = decode_response(18, 3, recv_frame(sock))
    assert isinstance(answer, ApiVersionsResponse)
    assert answer.error_code == 0
    return [(int(k.api_key), int(k.min_version), int(k.max_version)) for k in answer.api_keys]


def _probe(cls: type) -> object:
    request = null_probe(cls)
    if any(f.name == "acks" for f in dataclasses.fields(request)):  # type: ignore[arg-type]
        request = dataclasses.replace(request, acks=1)  # type: ignore[type-var]
    return request


def _node_log(node: Broker) -> str:
    path = getattr(node, "log_path", None)
    if path is None:
        pytest.skip("an external broker's log cannot be read")
    return str(path.read_text(errors="replace"))


# Create/Renew/ExpireDelegationToken: a refusal carries -1 timestamps, as Kafka's does
# (tests/unit/handlers/test_create_delegation_token.py checks such an answer)
NEGATIVE_TIMESTAMP_ANSWERS = {38, 39, 40}


def test_every_advertised_version_answers_a_request_with_every_nullable_field_null(
    own_skiff_node: Broker,
) -> None:
    sock = _connect(own_skiff_node.bootstrap)
    advertised = _advertised(sock)
    assert len(advertised) > 20
    sent = 0
    failures: list[str] = []
    for api_key, low, high in advertised:
        for version in range(low, high + 1):
            try:
                schema = load_request_schema(api_key, version)
            except Exception:
                # Kafka 4.4's versions kio lacks (broker/protocol/_kio_next) are probed too;
                # the legacy ones (Produce v0-v2, ...) have their own tests
                schema = request_schema(api_key, version)
                if not schema.__module__.startswith("broker.protocol._kio_next."):
                    continue
            request = _probe(schema)
            sent += 1
            correlation_id = 1000 + sent
            try:
                sock.sendall(encode_request(request, correlation_id=correlation_id))
                frame = recv_frame(sock)
            except (OSError, ConnectionError) as e:
                failures.append(f"{schema.__name__} v{version}: no answer ({e!r}); null fields: "
                                f"{nullable_paths(schema)}")
                sock.close()
                sock = _connect(own_skiff_node.bootstrap)
                continue
            if api_key in NEGATIVE_TIMESTAMP_ANSWERS:
                # answered as Kafka answers a refused token request: issue/expiry timestamps
                # of -1, which kio's timestamp type refuses to decode
                assert struct.unpack(">i", frame[:4])[0] == correlation_id
                continue
            got_cid, response = decode_response(api_key, version, frame)
            assert got_cid == correlation_id
            assert type(response) is response_schema(api_key, version)
    sock.close()
    assert sent > 100, f"only {sent} api versions probed"
    assert not failures, "\n".join(failures)
    log = _node_log(own_skiff_node)
    assert not any(mark in log for mark in _FAILURE_MARKS), own_skiff_node.log_tail(80)


@pytest.mark.parametrize("version", [3, 9])
def test_a_null_array_the_schema_does_not_allow_closes_only_that_connection(
    own_skiff_node: Broker, version: int
) -> None:
    # Produce: transactional_id null, acks=1, timeout=1000 ms, topic_data = null (-1).
    if version >= 9:  # flexible: compact nullable string 0 = null, compact array 0 = null
        body = struct.pack(">bhi", 0, 1, 1000) + b"\x00" + b"\x00"
    else:
        body = struct.pack(">hhii", -1, 1, 1000, -1)
    sock = _connect(own_skiff_node.bootstrap)
    sock.sendall(raw_frame(0, version, 7, body, flexible=version >= 9))
    assert is_closed(sock), "a Produce with a null topic array must close the connection"
    sock.close()

    again = _connect(own_skiff_node.bootstrap)
    assert _advertised(again), "the node must keep serving other connections"
    again.close()
    log = _node_log(own_skiff_node)
    assert "non-nullable field topic_data" in log
    assert not any(mark in log for mark in _FAILURE_MARKS), own_skiff_node.log_tail(80)
