"""The Kafka APIs Skiff advertises, per listener, and the kio classes for each (api_key, version).

An `ApiTable` is what one listener answers: the client listener serves `BROKER_APIS`, the
controller listener serves `CONTROLLER_APIS` (the KRaft RPCs). Tables are immutable; more APIs
are added with `ApiTable.with_api` (groups, transactions, ...), and the server advertises only the
APIs that also have a registered handler (`ApiTable.restricted_to`).

The versions Kafka 4.0 removed (KIP-896) but Kafka 3.9 served have no class in kio 0.6; their
classes come from kio 0.5.0, extracted into broker/protocol/_kio_legacy/ by
broker/protocol/kio_legacy_gen.py, and `request_schema`/`response_schema` fall back to them.
The Kafka 4.4 versions newer than kio 0.6.5's schemas have classes generated from Kafka 4.4's
JSON by broker/protocol/kio_next_gen.py into broker/protocol/_kio_next/; the same fallback
finds them. `MIN_API_VERSIONS` (config `skiff.min.api.versions`) chooses between Kafka 3.9's
floors (v0, the default) and Kafka 4's (`floors_table`).
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Final

from kio.index import KioIndexError, load_request_schema, load_response_schema
from kio.schema.index import api_key_map, schema_name_map
from kio.static.constants import EntityType
from kio.static.protocol import Entity, RequestPayload, ResponsePayload

PRODUCE: Final = 0
FETCH: Final = 1
LIST_OFFSETS: Final = 2
METADATA: Final = 3
OFFSET_COMMIT: Final = 8
OFFSET_FETCH: Final = 9
FIND_COORDINATOR: Final = 10
JOIN_GROUP: Final = 11
HEARTBEAT: Final = 12
LEAVE_GROUP: Final = 13
SYNC_GROUP: Final = 14
DESCRIBE_GROUPS: Final = 15
LIST_GROUPS: Final = 16
DELETE_GROUPS: Final = 42
OFFSET_DELETE: Final = 47
CONSUMER_GROUP_HEARTBEAT: Final = 68
CONSUMER_GROUP_DESCRIBE: Final = 69
API_VERSIONS: Final = 18
CREATE_TOPICS: Final = 19
DELETE_TOPICS: Final = 20
DELETE_RECORDS: Final = 21
INIT_PRODUCER_ID: Final = 22
OFFSET_FOR_LEADER_EPOCH: Final = 23
DESCRIBE_CONFIGS: Final = 32
ALTER_CONFIGS: Final = 33
ALTER_REPLICA_LOG_DIRS: Final = 34
DESCRIBE_LOG_DIRS: Final = 35
CREATE_PARTITIONS: Final = 37
INCREMENTAL_ALTER_CONFIGS: Final = 44
ELECT_LEADERS: Final = 43
ALTER_PARTITION_REASSIGNMENTS: Final = 45
LIST_PARTITION_REASSIGNMENTS: Final = 46
DESCRIBE_CLIENT_QUOTAS: Final = 48
VOTE: Final = 52
BEGIN_QUORUM_EPOCH: Final = 53
END_QUORUM_EPOCH: Final = 54
DESCRIBE_QUORUM: Final = 55
FETCH_SNAPSHOT: Final = 59
DESCRIBE_CLUSTER: Final = 60
WRITE_TXN_MARKERS: Final = 27
DESCRIBE_PRODUCERS: Final = 61
GET_TELEMETRY_SUBSCRIPTIONS: Final = 71
PUSH_TELEMETRY: Final = 72
ADD_PARTITIONS_TO_TXN: Final = 24
ADD_OFFSETS_TO_TXN: Final = 25
END_TXN: Final = 26
TXN_OFFSET_COMMIT: Final = 28
DESCRIBE_TRANSACTIONS: Final = 65
LIST_TRANSACTIONS: Final = 66
UNREGISTER_BROKER: Final = 64
DESCRIBE_TOPIC_PARTITIONS: Final = 75
SHARE_GROUP_HEARTBEAT: Final = 76
SHARE_GROUP_DESCRIBE: Final = 77
SHARE_FETCH: Final = 78
SHARE_ACKNOWLEDGE: Final = 79
INITIALIZE_SHARE_GROUP_STATE: Final = 83
READ_SHARE_GROUP_STATE: Final = 84
WRITE_SHARE_GROUP_STATE: Final = 85
DELETE_SHARE_GROUP_STATE: Final = 86
READ_SHARE_GROUP_STATE_SUMMARY: Final = 87
STREAMS_GROUP_HEARTBEAT: Final = 88
STREAMS_GROUP_DESCRIBE: Final = 89
DESCRIBE_SHARE_GROUP_OFFSETS: Final = 90
ALTER_SHARE_GROUP_OFFSETS: Final = 91
DELETE_SHARE_GROUP_OFFSETS: Final = 92
STREAMS_GROUP_TOPOLOGY_DESCRIPTION_UPDATE: Final = 93
LIST_CONFIG_RESOURCES: Final = 74

# Kafka 4.4 APIs newer than kio 0.6.5's index, whose classes are all in _kio_next
NEXT_API_NAMES: Final[Mapping[int, str]] = MappingProxyType({
    STREAMS_GROUP_TOPOLOGY_DESCRIPTION_UPDATE: "streams_group_topology_description_update",
})


def _module_name(api_key: int) -> str | None:
    return api_key_map.get(api_key) or NEXT_API_NAMES.get(api_key)


def api_name(api_key: int) -> str:
    """Kafka's snake_case name of an API key (``"unknown"`` for keys Skiff does not know)."""
    return _module_name(api_key) or "unknown"


@dataclass(frozen=True, slots=True)
class ApiVersionRange:
    api_key: int
    min_version: int
    max_version: int

    def __post_init__(self) -> None:
        if not 0 <= self.min_version <= self.max_version:
            raise ValueError(f"bad version range {self.min_version}..{self.max_version}")

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.min_version <= version <= self.max_version


def has_current_kio_schema(api_key: int, version: int) -> bool:
    """Does installed kio (Kafka 4.x schemas) have this version?"""
    name = api_key_map.get(api_key)
    if name is None:
        return False
    versions = schema_name_map.get(name, {})
    entry = versions.get(version)
    return entry is not None and EntityType.request in entry and EntityType.response in entry


# kio 0.5.0's classes for versions Kafka 4.0 removed; generated classes for Kafka 4.4 versions
# newer than kio 0.6.5's schemas (ApiVersions v5, TxnOffsetCommit v6, DeleteGroups v3,
# StreamsGroupHeartbeat and StreamsGroupDescribe v1, StreamsGroupTopologyDescriptionUpdate v0)
_EXTRA_PACKAGES: Final = ("_kio_legacy", "_kio_next")
_HERE: Final = Path(__file__).parent


@functools.cache
def _legacy_module(api_key: int, version: int, kind: str) -> object | None:
    name = _module_name(api_key)
    if name is None:
        return None
    for package in _EXTRA_PACKAGES:
        try:
            return importlib.import_module(f"broker.protocol.{package}.{name}.v{version}.{kind}")
        except ModuleNotFoundError:
            continue
    return None


def _legacy_class(api_key: int, version: int, kind: str) -> type | None:
    module = _legacy_module(api_key, version, kind)
    if module is None:
        return None
    suffix = "Request" if kind == "request" else "Response"
    for value in vars(module).values():
        if (isinstance(value, type) and value.__name__.endswith(suffix)
                and value.__module__ == getattr(module, "__name__", None)
                and getattr(value, "__type__", None) is getattr(EntityType, kind)):
            return value
    return None


def has_legacy_schema(api_key: int, version: int) -> bool:
    """A version Kafka 4.0 removed, with its class from kio 0.5.0 (broker/protocol/_kio_legacy),
    or a Kafka 4.4 version kio 0.6.5 lacks (broker/protocol/_kio_next)."""
    return (_legacy_class(api_key, version, "request") is not None
            and _legacy_class(api_key, version, "response") is not None)


def has_kio_schema(api_key: int, version: int) -> bool:
    return has_current_kio_schema(api_key, version) or has_legacy_schema(api_key, version)


@functools.cache
def _schema_present(api_key: int, version: int) -> bool:
    """Whether a version has its classes, without importing the extra packages' modules: a
    node's tables name ~50 such versions, whose classes cost ~15% of a node's import time
    and load on the first request of that version instead (tests/unit/protocol/test_api.py
    loads every one)."""
    if has_current_kio_schema(api_key, version):
        return True
    name = _module_name(api_key)
    if name is None:
        return False
    for package in _EXTRA_PACKAGES:
        directory = _HERE / package / name / f"v{version}"
        if all((directory / f"{kind}.py").is_file() for kind in ("request", "response")):
            return True
    return False


@functools.cache
def kafka4_min_version(api_key: int) -> int | None:
    """Kafka 4's lowest version of an API: the lowest installed kio (Kafka 4.x schemas) has.
    Cached: the server asks it for every request (OldVersionLog), and the scan of an API's
    schema versions cost ~10 us a Produce or Fetch; the installed schemas do not change."""
    name = api_key_map.get(api_key)
    versions = schema_name_map.get(name, {}) if name is not None else {}
    present = [v for v in versions if has_current_kio_schema(api_key, v)]
    return min(present) if present else None


MIN_API_VERSIONS_CHOICES: Final = ("kafka3", "kafka4")


def floors_table(table: ApiTable, min_api_versions: str) -> ApiTable:
    """`table` with each API's lowest version raised to Kafka 4's floor (KIP-896) when
    `min_api_versions` is ``kafka4``; unchanged for ``kafka3`` (Kafka 3.9: from v0)."""
    if min_api_versions == "kafka3":
        return table
    if min_api_versions != "kafka4":
        raise ValueError(f"skiff.min.api.versions must be one of "
                         f"{', '.join(MIN_API_VERSIONS_CHOICES)}, not {min_api_versions!r}")
    ranges = []
    for r in table:
        floor = kafka4_min_version(r.api_key)
        lo = r.min_version if floor is None else max(r.min_version, floor)
        if lo <= r.max_version:
            ranges.append(ApiVersionRange(r.api_key, lo, r.max_version))
    return ApiTable(ranges)


class ApiTable:
    """The API version ranges one listener supports, ordered by api key."""

    __slots__ = ("_ranges",)

    def __init__(self, ranges: Iterable[ApiVersionRange]) -> None:
        by_key: dict[int, ApiVersionRange] = {}
        for r in ranges:
            if r.api_key in by_key:
                raise ValueError(f"api key {r.api_key} listed twice")
            for v in range(r.min_version, r.max_version + 1):
                if not _schema_present(r.api_key, v):
                    raise ValueError(f"no kio schema for {api_name(r.api_key)} v{v}")
            by_key[r.api_key] = r
        self._ranges: Mapping[int, ApiVersionRange] = MappingProxyType(dict(sorted(by_key.items())))

    @classmethod
    def of(cls, *ranges: tuple[int, int, int]) -> ApiTable:
        return cls(ApiVersionRange(k, lo, hi) for k, lo, hi in ranges)

    def __iter__(self) -> Iterator[ApiVersionRange]:
        return iter(self._ranges.values())

    def __len__(self) -> int:
        return len(self._ranges)

    def __contains__(self, api_key: object) -> bool:
        return api_key in self._ranges

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ApiTable) and dict(self._ranges) == dict(other._ranges)

    def __hash__(self) -> int:
        return hash(tuple(self._ranges.values()))

    def __repr__(self) -> str:
        inner = ", ".join(
            f"{api_name(r.api_key)}={r.min_version}-{r.max_version}" for r in self._ranges.values()
        )
        return f"ApiTable({inner})"

    def get(self, api_key: int) -> ApiVersionRange | None:
        return self._ranges.get(api_key)

    def supports(self, api_key: int, version: int) -> bool:
        r = self._ranges.get(api_key)
        return r is not None and r.min_version <= version <= r.max_version

    def with_api(self, api_key: int, min_version: int, max_version: int) -> ApiTable:
        """A copy with `api_key` added or its range replaced."""
        others = [r for r in self._ranges.values() if r.api_key != api_key]
        return ApiTable([*others, ApiVersionRange(api_key, min_version, max_version)])

    def without_api(self, api_key: int) -> ApiTable:
        return ApiTable(r for r in self._ranges.values() if r.api_key != api_key)

    def restricted_to(self, api_keys: Iterable[int]) -> ApiTable:
        """Only the APIs in `api_keys` (those with a handler): advertise what is implemented."""
        keep = set(api_keys)
        return ApiTable(r for r in self._ranges.values() if r.api_key in keep)


# What the client listener of a broker advertises (issue 4): every version from Kafka 3.9's
# floor, v0 (issue 23); `floors_table` raises them to Kafka 4's.
BROKER_APIS: Final = ApiTable.of(
    # Produce v10 and Fetch v16 carry the new leader on NOT_LEADER_OR_FOLLOWER (KIP-951);
    # Produce v11: TRANSACTION_ABORTABLE, v12: transactions V2 (KIP-890), v13: topic ids
    (PRODUCE, 0, 13),
    # Fetch v17 (a follower's directory id) and v18 (a follower's high watermark, KIP-1166)
    (FETCH, 0, 18),
    # v8-v10: earliest-local and latest-tiered offsets (no tiered storage), a timeout
    (LIST_OFFSETS, 0, 11),
    # v13: a top-level error code (KIP-1102)
    (METADATA, 0, 13),
    # v5: the client's ClusterId/NodeId checked (KIP-1242; class from _kio_next)
    (API_VERSIONS, 0, 5),
    (CREATE_TOPICS, 0, 7),  # v6: KIP-599 throttling; v7: topic ids in the answer
    (DELETE_TOPICS, 0, 6),  # v5: error messages, KIP-599 throttling; v6: by name or id
    (DELETE_RECORDS, 0, 2),
    # v5: TRANSACTION_ABORTABLE (KIP-890); v6: KIP-939's 2PC fields, refused (no 2PC)
    (INIT_PRODUCER_ID, 0, 6),
    (OFFSET_FOR_LEADER_EPOCH, 0, 4),
    # consumer groups (issue 6): the classic protocol and KIP-848
    # v10: topics by id
    (OFFSET_COMMIT, 0, 10),
    (OFFSET_FETCH, 0, 10),
    # v5: may answer TRANSACTION_ABORTABLE (KIP-890); v6: share-coordinator keys (KIP-932)
    (FIND_COORDINATOR, 0, 6),
    (JOIN_GROUP, 0, 9),
    (HEARTBEAT, 0, 4),
    (LEAVE_GROUP, 0, 5),
    (SYNC_GROUP, 0, 5),
    (DESCRIBE_GROUPS, 0, 6),  # v6: GROUP_ID_NOT_FOUND with a message (KIP-1043)
    (LIST_GROUPS, 0, 5),
    (DELETE_GROUPS, 0, 3),  # v3: a per-group ErrorMessage (class from _kio_next)
    (OFFSET_DELETE, 0, 0),
    (CONSUMER_GROUP_HEARTBEAT, 0, 1),
    (CONSUMER_GROUP_DESCRIBE, 0, 1),
    # streams groups (KIP-1071, broker/group/streams.py); v1: KIP-1331's topology
    # descriptions (classes from _kio_next, as StreamsGroupTopologyDescriptionUpdate's)
    (STREAMS_GROUP_HEARTBEAT, 0, 1),
    (STREAMS_GROUP_DESCRIBE, 0, 1),
    (STREAMS_GROUP_TOPOLOGY_DESCRIPTION_UPDATE, 0, 0),
    # share groups (KIP-932, broker/share), Kafka 4.4's versions: ShareFetch and
    # ShareAcknowledge v2 carry RENEW (KIP-1222) and the acquire mode (KIP-1206)
    (SHARE_GROUP_HEARTBEAT, 1, 1),
    (SHARE_GROUP_DESCRIBE, 1, 1),
    (SHARE_FETCH, 1, 2),
    (SHARE_ACKNOWLEDGE, 1, 2),
    (DESCRIBE_SHARE_GROUP_OFFSETS, 0, 1),  # v1: Lag (KIP-1226)
    (ALTER_SHARE_GROUP_OFFSETS, 0, 0),
    (DELETE_SHARE_GROUP_OFFSETS, 0, 0),
    # the share coordinator's state APIs (inter-broker; v1: DeliveryCompleteCount, KIP-1226)
    (INITIALIZE_SHARE_GROUP_STATE, 0, 0),
    (READ_SHARE_GROUP_STATE, 0, 0),
    (WRITE_SHARE_GROUP_STATE, 0, 1),
    (DELETE_SHARE_GROUP_STATE, 0, 0),
    (READ_SHARE_GROUP_STATE_SUMMARY, 0, 1),
    # transactions (issue 22): the coordinator's side. AddPartitionsToTxn v4+ is the batched
    # form brokers send (KIP-890 verification); v4 of AddOffsetsToTxn/EndTxn/TxnOffsetCommit
    # may answer TRANSACTION_ABORTABLE; AddPartitionsToTxn v5, EndTxn v5 and TxnOffsetCommit
    # v5 are transactions V2 (gated by the finalized transaction.version, broker/txn/version.py)
    (ADD_PARTITIONS_TO_TXN, 0, 5),
    (ADD_OFFSETS_TO_TXN, 0, 4),
    (END_TXN, 0, 5),
    # v6: topics by id (KIP-1319; class from _kio_next)
    (TXN_OFFSET_COMMIT, 0, 6),
    (DESCRIBE_TRANSACTIONS, 0, 0),
    (LIST_TRANSACTIONS, 0, 2),
    (DESCRIBE_CONFIGS, 0, 4),
    (ALTER_CONFIGS, 0, 2),
    # JBOD (KIP-113, KIP-858); AlterReplicaLogDirs v0 (dropped by Kafka 4.0) from _kio_legacy
    (ALTER_REPLICA_LOG_DIRS, 0, 2),
    (DESCRIBE_LOG_DIRS, 0, 5),
    (CREATE_PARTITIONS, 0, 3),
    (INCREMENTAL_ALTER_CONFIGS, 0, 1),
    (DESCRIBE_CLIENT_QUOTAS, 0, 1),
    (49, 0, 1),  # AlterClientQuotas, sent on to the active controller
    (DESCRIBE_CLUSTER, 0, 2),  # v2: fenced brokers on request (KIP-1073)
    (DESCRIBE_QUORUM, 0, 2),  # sent on to the metadata quorum leader, as Kafka's brokers do
    # sent on to the active controller (KIP-460, KIP-455)
    (ELECT_LEADERS, 0, 2),
    (ALTER_PARTITION_REASSIGNMENTS, 0, 1),
    (LIST_PARTITION_REASSIGNMENTS, 0, 0),
    # client telemetry (KIP-714)
    (GET_TELEMETRY_SUBSCRIPTIONS, 0, 0),
    (PUSH_TELEMETRY, 0, 0),
    # transactions, the log side (issue 22): the coordinator's markers (inter-broker; v0 is
    # Kafka 3.9's, kio has v1-v2) and the producers of a partition
    (WRITE_TXN_MARKERS, 0, 2),
    (DESCRIBE_PRODUCERS, 0, 0),
    # SCRAM users (broker/security): read from the image / sent on to the controller
    (50, 0, 0),  # DescribeUserScramCredentials
    (51, 0, 0),  # AlterUserScramCredentials
    # delegation tokens (KIP-48): v0 was removed in Kafka 4.0 (KIP-896)
    (38, 1, 3),  # CreateDelegationToken, sent on to the active controller
    (39, 1, 2),  # RenewDelegationToken, sent on to the active controller
    (40, 1, 2),  # ExpireDelegationToken, sent on to the active controller
    (41, 1, 3),  # DescribeDelegationToken
    # ACLs (broker/security/authorizer.py); v0 was removed in Kafka 4.0 (KIP-896)
    (29, 0, 3),  # DescribeAcls (v0, dropped by Kafka 4.0: from _kio_legacy)
    (30, 0, 3),  # CreateAcls
    (31, 0, 3),  # DeleteAcls
    (57, 0, 2),  # UpdateFeatures, sent on to the active controller (KIP-584)
    # KIP-966: paginated topic descriptions with the ELR
    (DESCRIBE_TOPIC_PARTITIONS, 0, 0),
    # KIP-631: sent on to the active controller
    (UNREGISTER_BROKER, 0, 0),
    # KIP-1142: v0 is the former ListClientMetricsResources
    (LIST_CONFIG_RESOURCES, 0, 1),
    # KIP-853: sent on to the metadata quorum leader, as Kafka's brokers do
    (80, 0, 1),  # AddRaftVoter
    (81, 0, 0),  # RemoveRaftVoter
)

# What the controller listener serves: the KRaft RPCs. Fetch on this listener is the Raft fetch
# (KIP-595), which Kafka sends at v13+ (topic ids). The ranges are kio's; the Raft driver narrows
# them with `with_api` to what it implements.
CONTROLLER_APIS: Final = ApiTable.of(
    (FETCH, 13, 16),
    (API_VERSIONS, 0, 4),
    (VOTE, 0, 1),
    (BEGIN_QUORUM_EPOCH, 0, 1),
    (END_QUORUM_EPOCH, 0, 1),
    (DESCRIBE_QUORUM, 0, 1),
    (FETCH_SNAPSHOT, 0, 1),
)


@functools.cache
def request_schema(api_key: int, version: int) -> type[RequestPayload]:
    """kio's request class, or kio 0.5.0's for a version Kafka 4 removed; raises
    kio.index.UnknownAPIKey / UnknownEntity when there is none."""
    try:
        return load_request_schema(api_key, version)
    except KioIndexError:
        legacy = _legacy_class(api_key, version, "request")
        if legacy is None:
            raise
        return legacy


@functools.cache
def response_schema(api_key: int, version: int) -> type[ResponsePayload]:
    try:
        return load_response_schema(api_key, version)
    except KioIndexError:
        legacy = _legacy_class(api_key, version, "response")
        if legacy is None:
            raise
        return legacy


def request_header_schema(api_key: int, version: int) -> type[Entity]:
    """RequestHeader v2 for flexible versions, v1 otherwise (kio records it on the class)."""
    schema: type[Entity] = request_schema(api_key, version).__header_schema__
    return schema


def response_header_schema(api_key: int, version: int) -> type[Entity]:
    """ResponseHeader v1 for flexible versions, v0 otherwise; ApiVersions always v0."""
    schema: type[Entity] = response_schema(api_key, version).__header_schema__
    return schema


def is_flexible(api_key: int, version: int) -> bool:
    return bool(request_schema(api_key, version).__flexible__)
