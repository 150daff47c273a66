"""Plumbing every admin verb shares: the gRPC client, exit codes, Kafka Uuids in text, JSON
and table output, argument parsing helpers."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TextIO

from broker.protocol.kafka_uuid import kafka_to_uuid, uuid_to_kafka

DEFAULT_BOOTSTRAP = "127.0.0.1:9094"
ENV_BOOTSTRAP = "SKIFF_ADMIN"

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_UNREACHABLE = 0, 1, 2, 3


class UsageError(Exception):
    """A bad argument found after parsing (exit 2)."""


# ---- plumbing ------------------------------------------------------------------------


@dataclass(frozen=True)
class AdminCredentials:
    """How the CLI meets the admin plane's TLS and authentication (broker/admin/auth.py):
    PEM files, and SCRAM credentials sent as call metadata."""

    ssl_ca: str | None = None
    ssl_cert: str | None = None
    ssl_key: str | None = None
    username: str | None = None
    password: str | None = None
    mechanism: str = "SCRAM-SHA-512"

    @property
    def tls(self) -> bool:
        return bool(self.ssl_ca or self.ssl_cert)

    @staticmethod
    def from_args(args: Any) -> AdminCredentials:
        """--ssl-ca/--ssl-cert/--ssl-key/--username/--password, over the --command-config
        properties file (keys ssl.ca.location, ssl.certificate.location, ssl.key.location,
        username, password, sasl.mechanism)."""
        props: dict[str, str] = {}
        path = getattr(args, "command_config", None)
        if path:
            from broker.config import parse_properties

            try:
                with open(path, encoding="utf-8") as f:
                    props = parse_properties(f.read())
            except OSError as exc:
                raise UsageError(f"--command-config {path}: {exc.strerror}") from None
            known = {"ssl.ca.location", "ssl.certificate.location", "ssl.key.location",
                     "username", "password", "sasl.mechanism"}
            unknown = sorted(set(props) - known)
            if unknown:
                raise UsageError(f"--command-config {path}: unknown keys {', '.join(unknown)} "
                                 f"(known: {', '.join(sorted(known))})")

        def pick(attr: str, key: str) -> str | None:
            value = getattr(args, attr, None)
            return value if value is not None else props.get(key)

        creds = AdminCredentials(
            pick("ssl_ca", "ssl.ca.location"), pick("ssl_cert", "ssl.certificate.location"),
            pick("ssl_key", "ssl.key.location"), pick("username", "username"),
            pick("password", "password"), props.get("sasl.mechanism", "SCRAM-SHA-512"))
        if bool(creds.ssl_cert) != bool(creds.ssl_key):
            raise UsageError("--ssl-cert and --ssl-key go together")
        if (creds.username is None) != (creds.password is None):
            raise UsageError("--username and --password go together")
        return creds

    def metadata(self) -> tuple[tuple[str, str], ...]:
        if self.username is None or self.password is None:
            return ()
        return (("skiff-user", self.username), ("skiff-password", self.password),
                ("skiff-sasl-mechanism", self.mechanism))


def _loopback(address: str) -> bool:
    import ipaddress

    host = address.rpartition(":")[0].strip("[]") or address
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _read_pem(path: str | None, what: str) -> bytes | None:
    if not path:
        return None
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise UsageError(f"{what} {path}: {exc.strerror}") from None


class Client:
    """Stubs over one channel; every call has the command's deadline (and credentials)."""

    def __init__(self, address: str, timeout_s: float,
                 credentials: AdminCredentials | None = None) -> None:
        import grpc

        from broker.admin import pb

        self.address = address
        self.timeout_s = timeout_s
        creds = credentials or AdminCredentials()
        if creds.password is not None and not creds.tls and not _loopback(address):
            raise UsageError(f"refusing to send a password in clear to {address}: give "
                             "--ssl-ca (the admin listener's CA) to use TLS")
        self.metadata = creds.metadata()
        self.tls = creds.tls
        if creds.tls:
            self.channel = grpc.secure_channel(address, grpc.ssl_channel_credentials(
                root_certificates=_read_pem(creds.ssl_ca, "--ssl-ca"),
                private_key=_read_pem(creds.ssl_key, "--ssl-key"),
                certificate_chain=_read_pem(creds.ssl_cert, "--ssl-cert")))
        else:
            self.channel = grpc.insecure_channel(address)
        self.pb = pb
        self.cluster = pb.cluster_grpc.ClusterServiceStub(self.channel)
        self.quorum = pb.cluster_grpc.QuorumServiceStub(self.channel)
        self.topics = pb.topics_grpc.TopicServiceStub(self.channel)
        self.partitions = pb.partitions_grpc.PartitionServiceStub(self.channel)
        self.groups = pb.groups_grpc.GroupServiceStub(self.channel)
        self.configs = pb.configs_grpc.ConfigServiceStub(self.channel)
        self.records = pb.records_grpc.RecordServiceStub(self.channel)
        self.transactions = pb.transactions_grpc.TransactionServiceStub(self.channel)
        self.acls = pb.acls_grpc.AclServiceStub(self.channel)
        self.quotas = pb.quotas_grpc.QuotaServiceStub(self.channel)
        self.features = pb.features_grpc.FeatureServiceStub(self.channel)

    def call(self, method: Callable[..., Any], request: Any) -> Any:
        return method(request, timeout=self.timeout_s, metadata=self.metadata)

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
