"""kio 0.5.0's classes for the versions Kafka 4 removed, run on kio 0.6's serial runtime: each
decodes a frame built by hand from the protocol guide's grammar and re-encodes it byte for
byte; the generated package carries its licence and banners."""

from __future__ import annotations

import io
import struct
from pathlib import Path
from typing import Any

import pytest
from kio.serial import entity_reader, entity_writer

from broker.protocol import api, kio_legacy_gen


def s(text: str) -> bytes:
    return struct.pack(">h", len(text)) + text.encode()


def b(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


def arr(*items: bytes) -> bytes:
    return struct.pack(">i", len(items)) + b"".join(items)


MESSAGE_SET = struct.pack(">qi", 0, 14) + bytes(14)  # shape only: bytes are opaque to kio

# (api key, version, request?, hand-built body, checks on the decoded entity)
FRAMES: list[tuple[int, int, bool, bytes, dict[str, Any]]] = [
    # Produce v0: acks timeout [topic [partition record_set]]
    (0, 0, True, struct.pack(">hi", -1, 1500) + arr(s("t") + arr(
        struct.pack(">i", 3) + b(MESSAGE_SET))), {"acks": -1}),
    # Produce v2 response: [topic [partition error base_offset log_append_time]] throttle
    (0, 2, False, arr(s("t") + arr(struct.pack(">ihqq", 3, 0, 42, -1))) + struct.pack(">i", 7),
     {}),
    # Fetch v0 request: replica_id max_wait min_bytes [topic [partition offset max_bytes]]
    (1, 0, True, struct.pack(">iii", -1, 100, 1) + arr(s("t") + arr(
        struct.pack(">iqi", 0, 5, 1 << 20))), {"min_bytes": 1}),
    # Fetch v3 request adds max_bytes after min_bytes
    (1, 3, True, struct.pack(">iiii", -1, 100, 1, 1 << 20) + arr(s("t") + arr(
        struct.pack(">iqi", 0, 5, 1 << 20))), {"max_bytes": 1 << 20}),
    # Fetch v0 response: [topic [partition error high_watermark record_set]]
    (1, 0, False, arr(s("t") + arr(struct.pack(">ihq", 0, 0, 9) + b(MESSAGE_SET))), {}),
    # Fetch v1 response: throttle first
    (1, 1, False, struct.pack(">i", 0) + arr(s("t") + arr(
        struct.pack(">ihq", 0, 1, -1) + b(b""))), {}),
    # ListOffsets v0 request: replica_id [topic [partition timestamp max_num_offsets]]
    (2, 0, True, struct.pack(">i", -1) + arr(s("t") + arr(struct.pack(">iqi", 0, -1, 3))), {}),
    # ListOffsets v0 response: [topic [partition error [offset]]]
    (2, 0, False, arr(s("t") + arr(struct.pack(">ih", 0, 0) + arr(
        struct.pack(">q", 9), struct.pack(">q", 0)))), {}),
    # OffsetCommit v0: group [topic [partition offset metadata]]
    (8, 0, True, s("g") + arr(s("t") + arr(struct.pack(">iq", 0, 7) + s("m"))),
     {"group_id": "g"}),
    # OffsetCommit v1: group generation member [topic [partition offset timestamp metadata]]
    (8, 1, True, s("g") + struct.pack(">i", 4) + s("m-1") + arr(s("t") + arr(
        struct.pack(">iqq", 0, 7, 1_600_000_000_000) + s(""))), {"member_id": "m-1"}),
    # OffsetFetch v0: group [topic [partition]]
    (9, 0, True, s("g") + arr(s("t") + arr(struct.pack(">i", 0))), {}),
    # CreateTopics v0: [topic partitions rf [assignments] [configs]] timeout
    (19, 0, True, arr(s("t") + struct.pack(">ih", 3, 1) + arr() + arr(s("k") + s("v")))
     + struct.pack(">i", 1000), {}),
    # DeleteTopics v0: [name] timeout
    (20, 0, True, arr(s("t")) + struct.pack(">i", 1000), {}),
    # OffsetForLeaderEpoch v0 response: [topic [error partition end_offset]]
    (23, 0, False, arr(s("t") + arr(struct.pack(">hiq", 0, 0, 12))), {}),
    # DescribeConfigs v0 response: throttle [error message type name [name value ro default
    # sensitive]]
    (32, 0, False, struct.pack(">i", 0) + arr(struct.pack(">h", 0) + struct.pack(">h", -1)
     + struct.pack(">b", 2) + s("t") + arr(s("k") + s("v") + bytes([0, 1, 0]))), {}),
    # DescribeLogDirs v0 request: [topic [partition]] (null: every topic)
    (35, 0, True, struct.pack(">i", -1), {"topics": None}),
]


@pytest.mark.parametrize("key,version,is_request,body,checks", FRAMES)
def test_hand_built_frames_round_trip(key: int, version: int, is_request: bool, body: bytes,
                                      checks: dict[str, Any]) -> None:
    schema = (api.request_schema if is_request else api.response_schema)(key, version)
    assert schema.__module__.startswith("broker.protocol._kio_legacy.")
    entity, used = entity_reader(schema)(body, 0)
    assert used == len(body)
    for name, value in checks.items():
        assert getattr(entity, name) == value
    buf = io.BytesIO()
    entity_writer(schema)(buf, entity)
    assert buf.getvalue() == body


def test_generated_package_is_marked_and_licensed() -> None:
    root = Path(kio_legacy_gen.OUT_DIR)
    assert "Apache License" in (root / "LICENSE").read_text()
    assert "Aiven" in (root / "NOTICE").read_text()
    modules = sorted(root.glob("*/v*/*.py"))
    expected = sum(len(v) for v in kio_legacy_gen.LEGACY_VERSIONS.values()) * 3
    assert len(modules) == expected
    for m in modules:
        assert m.read_text().startswith("# Generated by broker/protocol/kio_legacy_gen.py")
