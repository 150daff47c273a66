"""Plumbing every admin verb shares: the gRPC client, exit codes, Kafka Uuids in text, JSON
and table output, argument parsing helpers."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, TextIO

from broker.protocol.kafka_uuid import kafka_to_uuid, uuid_to_kafka

DEFAULT_BOOTSTRAP = "127.0.0.1:9094"
ENV_BOOTSTRAP = "SKIFF_ADMIN"

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_UNREACHABLE = 0, 1, 2, 3


class UsageError(Exception):
    """A bad argument found after parsing (exit 2)."""


# ---- plumbing ------------------------------------------------------------------------


class Client:
    """Stubs over one channel; every call has the command's deadline."""

    def __init__(self, address: str, timeout_s: float) -> None:
        import grpc

        from broker.admin import pb

        self.address = address
        self.timeout_s = timeout_s
        self.channel = grpc.insecure_channel(address)
        self.pb = pb
        self.cluster = pb.cluster_grpc.ClusterServiceStub(self.channel)
        self.quorum = pb.cluster_grpc.QuorumServiceStub(self.channel)
        self.topics = pb.topics_grpc.TopicServiceStub(self.channel)
        self.partitions = pb.partitions_grpc.PartitionServiceStub(self.channel)
        self.groups = pb.groups_grpc.GroupServiceStub(self.channel)
        self.configs = pb.configs_grpc.ConfigServiceStub(self.channel)
        self.records = pb.records_grpc.RecordServiceStub(self.channel)
        self.quotas = pb.quotas_grpc.QuotaServiceStub(self.channel)

    def call(self, method: Callable[..., Any], request: Any) -> Any:
        return method(request, timeout=self.timeout_s)

    def close(self) -> None:
        self.channel.close()


def kafka_uuid(raw: bytes) -> str:
    """Kafka's text form of a Uuid: URL-safe base64 without padding ("" for no id)."""
    return uuid_to_kafka(uuid.UUID(bytes=raw)) if raw else ""


def parse_kafka_uuid(text: str) -> bytes:
    try:
        return kafka_to_uuid(text).bytes
    except ValueError:
        raise UsageError(
            f"{text!r} is not a topic id (22 characters of URL-safe base64)") from None


_UUID_FIELDS = {"topic_id", "incarnation_id"}


def _uuids_as_text(value: Any, key: str = "") -> Any:
    if isinstance(value, dict):
        return {k: _uuids_as_text(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_uuids_as_text(v, key) for v in value]
    if key in _UUID_FIELDS and isinstance(value, str):
        return kafka_uuid(base64.b64decode(value))
    return value


def to_json(message: Any) -> Any:
    from google.protobuf.json_format import MessageToDict

    return _uuids_as_text(MessageToDict(message, preserving_proto_field_name=True,
                                        always_print_fields_with_no_presence=True,
                                        unquote_int64_if_possible=True))


def print_json(data: Any, out: TextIO) -> None:
    json.dump(data, out, indent=2, sort_keys=False)
    out.write("\n")


def print_table(headers: Sequence[str], rows: Iterable[Sequence[Any]], out: TextIO) -> None:
    cells = [[str(c) for c in headers], *([_cell(c) for c in r] for r in rows)]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for r in cells:
        out.write("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() + "\n")


def _cell(value: Any) -> str:
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value) or "-"
    if value is None:
        return "-"
    return str(value)


def _kv(items: Sequence[str] | None, what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"{what} {item!r}: expected key=value")
        out[key] = value
    return out


def _ints(text: str, what: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"{what} {text!r}: expected comma-separated integers") from None


def parse_replica_assignment(text: str) -> list[list[int]]:
    """Kafka's --replica-assignment: partitions separated by ',', replicas by ':'
    (`1:2,2:3` is two partitions)."""
    out = []
    for part in text.split(","):
        try:
            out.append([int(b) for b in part.split(":")])
        except ValueError:
            raise UsageError(f"--replica-assignment {text!r}: expected e.g. 1:2,2:3") from None
    return out


def _when(ms: int) -> str:
    if ms < 0:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
