"""A differential harness: the same Kafka requests to two brokers, their answers compared.

- `KafkaWire` is a small Kafka-protocol client over a raw socket: it sends a kio request
  entity at the version its class carries (any version kio, or kio 0.5.0's legacy classes
  in broker/protocol/_kio_legacy, has) and returns the decoded response; `raw` sends bytes
  the caller built (a corrupt batch, an unsupported version) and returns the frame, or None
  when the broker closed the connection.
- `build(cls, **fields)` makes a request entity: the named fields as given (a list of dicts
  for an array of structs, a dict for a struct), every other field its schema default, null
  when nullable, or a zero value.
- `compare(a, b, api_key, version, accepted)` walks two decoded responses (kio dataclass
  trees) field by field. Arrays are matched by their elements' identifying field (name,
  partition index, ...) when they have one, so order does not count. Fields that differ
  between any two brokers by nature (throttle time, node ids, hosts and ports, cluster and
  topic ids, timestamps, session and producer ids, the free text of error messages) are
  normalised: only whether both are set is compared. Every remaining difference is checked
  against the accepted-differences list; `Tally` counts fields compared, differences and
  the accepted ones.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import functools
import re
import socket
import struct
import types
import typing
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kio.static.primitive import Records, TZAware, TZAwareMicros, f64, i32Timedelta, i64Timedelta

from broker.protocol.api import api_name, request_schema
from broker.testing.wire import decode_response, encode_request, raw_frame, recv_frame

_NONE = type(None)


@functools.cache
def _pattern(glob: str) -> re.Pattern[str]:
    """A glob where `*` matches anything (brackets are literal, so `topics[*].name` reads
    as it looks)."""
    return re.compile(re.escape(glob).replace(r"\*", ".*"))


def matches(path: str, glob: str) -> bool:
    return _pattern(glob).fullmatch(path) is not None

# ------------------------------------------------------------------------------ the client


class KafkaWire:
    """One connection to a broker; requests are answered in order (no pipelining). With
    `plain=(user, password)` the connection first authenticates with SASL PLAIN
    (SaslHandshake v1, SaslAuthenticate v2), as a client of a SASL_PLAINTEXT listener does."""

    def __init__(self, bootstrap: str, timeout_s: float = 30.0,
                 plain: tuple[str, str] | None = None) -> None:
        self.bootstrap = bootstrap
        self.timeout_s = timeout_s
        self.plain = plain
        self._cid = 0
        self._sock = self._connect()

    def _connect(self) -> socket.socket:
        host, port = self.bootstrap.rsplit(":", 1)
        sock = socket.create_connection((host, int(port)), timeout=self.timeout_s)
        sock.settimeout(self.timeout_s)
        self._sock = sock
        if self.plain is not None:
            self._authenticate(*self.plain)
        return sock

    def _authenticate(self, user: str, password: str) -> None:
        shake = self.send(request(17, 1, mechanism="PLAIN"))
        if int(shake.error_code) != 0:
            raise AssertionError(f"SaslHandshake refused: {shake}")
        auth = self.send(request(36, 2, auth_bytes=f"\0{user}\0{password}".encode()))
        if int(auth.error_code) != 0:
            raise AssertionError(f"SASL PLAIN as {user} refused: {auth.error_message}")

    def reconnect(self) -> None:
        self._sock.close()
        self._sock = self._connect()

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> KafkaWire:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, request: Any) -> Any:
        """The decoded response to a kio request entity."""
        self._cid += 1
        cid = self._cid
        self._sock.sendall(encode_request(request, correlation_id=cid, client_id="differential"))
        got, response = decode_response(int(request.__api_key__), int(request.__version__),
                                        recv_frame(self._sock))
        if got != cid:
            raise AssertionError(f"correlation id {got}, sent {cid}")
        return response

    def raw(self, api_key: int, version: int, body: bytes, flexible: bool) -> bytes | None:
        """Send a request frame with this body; the response frame (without its size), or
        None when the broker closed the connection (the connection is then reopened)."""
        self._cid += 1
        self._sock.sendall(raw_frame(api_key, version, self._cid, body, flexible=flexible,
                                     client_id="differential"))
        try:
            return recv_frame(self._sock)
        except (ConnectionError, OSError):
            self.reconnect()
            return None


# --------------------------------------------------------------------------- building requests


def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _optional(hint: Any) -> bool:
    union = isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union
    return union and _NONE in typing.get_args(hint)


def _strip_optional(hint: Any) -> Any:
    if _optional(hint):
        rest = [a for a in typing.get_args(hint) if a is not _NONE]
        return rest[0] if len(rest) == 1 else hint
    return hint


def _zero(hint: Any) -> Any:
    if isinstance(hint, type):
        if issubclass(hint, bool):
            return False
        if issubclass(hint, (i32Timedelta, i64Timedelta)):
            return datetime.timedelta(0)
        if issubclass(hint, (TZAware, TZAwareMicros)):
            return datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
        if issubclass(hint, Records):
            return Records(b"")
        if issubclass(hint, f64):
            return f64(0.0)
        if issubclass(hint, enum.Enum):
            return next(iter(hint))
        if issubclass(hint, int):
            return hint(0)
        if issubclass(hint, str):
            return hint("")
        if issubclass(hint, bytes):
            return hint(b"")
        if issubclass(hint, uuid.UUID):
            return uuid.UUID(int=0)
    raise TypeError(f"no zero value for {hint!r}")


def _coerce(hint: Any, value: Any) -> Any:
    """`value` as the schema's type: dicts become structs, lists of dicts arrays of structs,
    ints the schema's int subtype, ms counts timedeltas."""
    if value is None:
        return None
    hint = _strip_optional(hint)
    if typing.get_origin(hint) is tuple:
        element = typing.get_args(hint)[0]
        return tuple(_coerce(element, v) for v in value)
    if dataclasses.is_dataclass(hint):
        return build(typing.cast(type, hint), **value) if isinstance(value, Mapping) else value
    if isinstance(hint, type):
        if issubclass(hint, (i32Timedelta, i64Timedelta)) and isinstance(value, int):
            return datetime.timedelta(milliseconds=value)
        if issubclass(hint, enum.Enum):
            return hint(value)
        if issubclass(hint, bool):
            return bool(value)
        if issubclass(hint, int) and isinstance(value, int):
            return hint(value)
        if issubclass(hint, str) and isinstance(value, str):
            return hint(value)
        if issubclass(hint, Records) and isinstance(value, bytes):
            return Records(value)
    return value


def build(cls: type, **given: Any) -> Any:
    """An entity of `cls` with the `given` fields (unknown names are dropped, so one script
    serves every version of an API) and defaults for the rest."""
    hints = _hints(cls)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        if f.name in given:
            values[f.name] = _coerce(hint, given[f.name])
        elif f.default is not dataclasses.MISSING:
            values[f.name] = f.default
        elif _optional(hint):
            values[f.name] = None
        elif typing.get_origin(hint) is tuple:
            values[f.name] = ()
        elif dataclasses.is_dataclass(hint):
            values[f.name] = build(typing.cast(type, hint))
        else:
            values[f.name] = _zero(hint)
    return cls(**values)


def request(api_key: int, version: int, **given: Any) -> Any:
    return build(request_schema(api_key, version), **given)


def field_names(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


# ------------------------------------------------------------------------------ comparing

# Fields whose values differ between any two brokers by nature: only whether both are set
# (or both null) is compared.
NORMALISED_FIELDS = frozenset({
    "throttle_time", "throttle_time_ms", "node_id", "leader_id", "controller_id", "broker_id",
    "coordinator_id", "host", "port", "cluster_id", "topic_id", "incarnation_id",
    "session_id", "producer_id", "producer_epoch", "error_message", "member_id",
    "leader_epoch", "generation_id", "member_epoch", "rack", "timestamp", "log_append_time",
    "log_append_time_ms", "log_start_offset", "last_timestamp", "transaction_start_time_ms",
    "last_stable_offset", "replica_nodes", "isr_nodes", "replicas", "isr", "offline_replicas",
    "eligible_leader_replicas", "last_known_elr", "preferred_read_replica", "leader",
    "current_leader", "node_endpoints", "client_instance_id", "subscription_id",
    "push_interval_ms", "epoch", "coordinator_epoch", "client_host", "client_id",
    "last_caught_up_timestamp", "last_fetch_timestamp", "high_watermark", "end_offset",
    "log_end_offset", "path", "log_dir", "total_bytes", "usable_bytes", "size", "partition_size",
    "offset_lag", "authorized_operations", "cluster_authorized_operations",
    "topic_authorized_operations", "finalized_features_epoch", "directory_id",
    "current_voters", "observers", "leader_epoch_start_offset", "transaction_start_time",
})
# Free text: not even whether it is set is compared (Kafka leaves many messages null where
# Skiff explains the error code; the code itself is compared).
FREE_TEXT_FIELDS = frozenset({"error_message"})
# Arrays matched element by element on the first of these fields their elements have.
_IDENTITY_FIELDS = ("api_key", "name", "user", "feature", "topic", "topic_name",
                    "resource_name", "partition_index", "partition", "group_id",
                    "transactional_id", "key", "principal",
                    "config_name", "mechanism", "entity_type", "protocol_type", "topic_id")


@dataclasses.dataclass(frozen=True)
class Accepted:
    """A difference accepted with a reason: `path` is a glob on the field path
    (``topics[*].partitions[*].error_code``); `versions` None means every version; `scenario`
    None means every scenario."""
    api: str
    path: str
    reason: str
    versions: tuple[int, ...] | None = None
    scenario: str | None = None

    def matches(self, api: str, version: int, path: str, scenario: str) -> bool:
        return (self.api in (api, "*")
                and (self.versions is None or version in self.versions)
                and (self.scenario is None or matches(scenario, self.scenario))
                and matches(path, self.path))


@dataclasses.dataclass
class Difference:
    scenario: str
    api: str
    version: int
    path: str
    reference: Any
    skiff: Any
    accepted_by: Accepted | None = None

    def __str__(self) -> str:
        mark = f" (accepted: {self.accepted_by.reason})" if self.accepted_by else ""
        return (f"[{self.scenario}] {self.api} v{self.version} {self.path}: "
                f"Kafka {self.reference!r} / Skiff {self.skiff!r}{mark}")


@dataclasses.dataclass
class Tally:
    compared: int = 0
    differences: list[Difference] = dataclasses.field(default_factory=list)

    @property
    def accepted(self) -> list[Difference]:
        return [d for d in self.differences if d.accepted_by is not None]

    @property
    def unaccepted(self) -> list[Difference]:
        return [d for d in self.differences if d.accepted_by is None]

    def summary(self) -> str:
        return (f"fields compared: {self.compared}, differences: {len(self.differences)} "
                f"(accepted {len(self.accepted)})")

    def add(self, other: Tally) -> None:
        self.compared += other.compared
        self.differences += other.differences


def _plain(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}({value.value})"
    if isinstance(value, datetime.timedelta):
        return int(value.total_seconds() * 1000)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    return value


def _batches(data: bytes) -> list[Any]:
    """The records a client reads from a fetched record set: per batch its base offset,
    attributes and records (offset, timestamp, key, value, headers), without what differs by
    broker (CRC, partition leader epoch, producer id and epoch)."""
    from broker.protocol.records import decode_records, iter_batches

    out: list[Any] = []
    try:
        for header, batch in iter_batches(data):
            out.append((header.base_offset, header.attributes, [
                (r.offset, r.timestamp, r.key, r.value, r.headers)
                for r in decode_records(batch)]))
    except Exception as e:  # a malformed set is a value too: both must be malformed alike
        out.append(f"undecodable: {type(e).__name__}")
    return out


def _identity(element: Any) -> tuple[str, Any] | None:
    if not dataclasses.is_dataclass(element):
        return None
    names = field_names(type(element))
    for name in _IDENTITY_FIELDS:
        if name in names and name not in NORMALISED_FIELDS | {"topic_id"}:
            return name, _plain(getattr(element, name))
    return None


class Comparer:
    def __init__(self, api_key: int, version: int, scenario: str,
                 accepted: Sequence[Accepted], ignore: Iterable[str] = ()) -> None:
        self.api = api_name(api_key)
        self.version = version
        self.scenario = scenario
        self.accepted = accepted
        self.ignore = tuple(ignore)
        self.tally = Tally()

    def _diff(self, path: str, a: Any, b: Any) -> None:
        d = Difference(self.scenario, self.api, self.version, path, a, b)
        d.accepted_by = next((x for x in self.accepted
                              if x.matches(self.api, self.version, path, self.scenario)), None)
        self.tally.differences.append(d)

    def walk(self, path: str, a: Any, b: Any) -> None:
        if any(matches(path, p) for p in self.ignore):
            return
        leaf = path.rsplit(".", 1)[-1].split("[", 1)[0]
        if leaf in NORMALISED_FIELDS:
            self.tally.compared += 1
            if (a is None) != (b is None) and leaf not in FREE_TEXT_FIELDS:
                self._diff(path + " (set?)", a is not None, b is not None)
            return
        if leaf == "records" and isinstance(a, bytes | bytearray | memoryview) \
                and isinstance(b, bytes | bytearray | memoryview):
            self.tally.compared += 1
            ra, rb = _batches(bytes(a)), _batches(bytes(b))
            if ra != rb:
                self._diff(path, ra, rb)
            return
        if dataclasses.is_dataclass(a) and dataclasses.is_dataclass(b):
            if type(a).__name__ != type(b).__name__:
                self.tally.compared += 1
                self._diff(path + " (type)", type(a).__name__, type(b).__name__)
                return
            for f in dataclasses.fields(a):
                sub = f"{path}.{f.name}" if path else f.name
                self.walk(sub, getattr(a, f.name), getattr(b, f.name, None))
            return
        if isinstance(a, tuple) and isinstance(b, tuple):
            self._walk_array(path, a, b)
            return
        self.tally.compared += 1
        pa, pb = _plain(a), _plain(b)
        if pa != pb:
            self._diff(path, pa, pb)

    def _walk_array(self, path: str, a: tuple[Any, ...], b: tuple[Any, ...]) -> None:
        ida = [_identity(x) for x in a]
        idb = [_identity(x) for x in b]
        if (a and b and all(ida) and all(idb) and len(set(map(repr, ida))) == len(a)
                and len(set(map(repr, idb))) == len(b)):
            by_b = {repr(i): x for i, x in zip(idb, b, strict=True)}
            seen = set()
            for i, x in zip(ida, a, strict=True):
                assert i is not None
                key = repr(i)
                label = f"{path}[{i[0]}={i[1]}]"
                if key in by_b:
                    seen.add(key)
                    self.walk(label, x, by_b[key])
                else:
                    self.tally.compared += 1
                    self._diff(label + " (missing in Skiff)", True, False)
            for i in idb:
                assert i is not None
                if repr(i) not in seen:
                    self.tally.compared += 1
                    self._diff(f"{path}[{i[0]}={i[1]}] (only in Skiff)", False, True)
            return
        if not a or not dataclasses.is_dataclass(a[0]):
            # arrays of scalars: compared as sets when order carries no meaning to a client
            self.tally.compared += 1
            pa = sorted(map(repr, map(_plain, a)))
            pb = sorted(map(repr, map(_plain, b)))
            if pa != pb:
                self._diff(path, [_plain(x) for x in a], [_plain(x) for x in b])
            return
        self.tally.compared += 1
        if len(a) != len(b):
            self._diff(path + " (length)", len(a), len(b))
        for n, (x, y) in enumerate(zip(a, b, strict=False)):
            self.walk(f"{path}[{n}]", x, y)


def compare(reference: Any, skiff: Any, api_key: int, version: int, scenario: str,
            accepted: Sequence[Accepted], ignore: Iterable[str] = ()) -> Tally:
    """Field-by-field differences between Kafka's response and Skiff's."""
    c = Comparer(api_key, version, scenario, accepted, ignore)
    c.walk("", reference, skiff)
    return c.tally


def size_prefixed(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body
