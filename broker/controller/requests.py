"""Version-independent controller requests and results.

Handlers convert kio requests of any version into these, and results back into
kio responses. A `ControllerResult` carries the records to append (as one
atomic batch) and the response to send once that batch is committed.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from kio.schema.errors import ErrorCode

R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class ControllerResult(Generic[R]):
    records: list[Any]  # MetadataRecord envelopes, to append atomically in this order
    response: R


@dataclass(frozen=True, slots=True)
class ApiError:
    error: ErrorCode = ErrorCode.none
    message: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is ErrorCode.none


OK = ApiError()


# -- topics ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CreatableTopic:
    name: str
    num_partitions: int = -1          # -1: num.partitions (or the manual assignment)
    replication_factor: int = -1      # -1: default.replication.factor
    assignments: Mapping[int, Sequence[int]] | None = None  # partition -> broker ids
    configs: Mapping[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CreateTopicResult:
    name: str
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    topic_id: uuid.UUID | None = None
    num_partitions: int = -1
    replication_factor: int = -1
    configs: Mapping[str, str] = field(default_factory=dict)  # the topic's explicit configs


@dataclass(frozen=True, slots=True)
class DeleteTopicResult:
    name: str | None
    topic_id: uuid.UUID | None
    error: ErrorCode = ErrorCode.none
    message: str | None = None


@dataclass(frozen=True, slots=True)
class CreatePartitionsTopic:
    name: str
    count: int                                      # the new total
    assignments: Sequence[Sequence[int]] | None = None  # one list per new partition


@dataclass(frozen=True, slots=True)
class CreatePartitionsResult:
    name: str
    error: ErrorCode = ErrorCode.none
    message: str | None = None


# -- configs --------------------------------------------------------------------


class AlterConfigOp(enum.IntEnum):
    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@dataclass(frozen=True, slots=True)
class ConfigResource:
    resource_type: int   # records.RESOURCE_TOPIC (2) or RESOURCE_BROKER (4)
    resource_name: str   # topic name; broker id as a string, or "" for the cluster default


@dataclass(frozen=True, slots=True)
class AlterConfigsResource:
    """Legacy AlterConfigs: the given configs replace every dynamic config of the resource."""

    resource: ConfigResource
    configs: Mapping[str, str | None]


@dataclass(frozen=True, slots=True)
class IncrementalAlterConfigsResource:
    resource: ConfigResource
    ops: Sequence[tuple[str, AlterConfigOp, str | None]]  # (name, op, value)


@dataclass(frozen=True, slots=True)
class AlterConfigsResult:
    resource: ConfigResource
    error: ErrorCode = ErrorCode.none
    message: str | None = None


# -- brokers --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BrokerRegistrationRequest:
    broker_id: int
    cluster_id: str
    incarnation_id: uuid.UUID
    listeners: Sequence[tuple[str, str, int, str]]  # (name, host, port, security protocol)
    features: Sequence[tuple[str, int, int]] = ()   # (name, min, max) supported
    rack: str | None = None
    log_dirs: Sequence[uuid.UUID] = ()
    previous_broker_epoch: int = -1


@dataclass(frozen=True, slots=True)
class ControllerRegistrationRequest:
    """KIP-919: a controller's listeners and supported feature ranges."""

    controller_id: int
    incarnation_id: uuid.UUID
    listeners: Sequence[tuple[str, str, int, str]]  # (name, host, port, security protocol)
    features: Sequence[tuple[str, int, int]] = ()   # (name, min, max) supported


@dataclass(frozen=True, slots=True)
class BrokerRegistrationReply:
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    broker_epoch: int = -1


@dataclass(frozen=True, slots=True)
class BrokerHeartbeatRequest:
    broker_id: int
    broker_epoch: int
    current_metadata_offset: int
    want_fence: bool = False
    want_shut_down: bool = False
    offline_log_dirs: Sequence[uuid.UUID] = ()  # KIP-858: directory ids that failed
    # KIP-1066: the directories cordoned now; None before the broker has caught up
    cordoned_log_dirs: Sequence[uuid.UUID] | None = None


@dataclass(frozen=True, slots=True)
class BrokerHeartbeatReply:
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    is_caught_up: bool = False
    is_fenced: bool = True
    should_shut_down: bool = False


@dataclass(frozen=True, slots=True)
class AssignReplicasToDirsRequest:
    """KIP-858: where a broker placed its replicas: (directory id, topic id, partition)."""

    broker_id: int
    broker_epoch: int
    assignments: Sequence[tuple[uuid.UUID, uuid.UUID, int]]


@dataclass(frozen=True, slots=True)
class AssignReplicasToDirsReply:
    error: ErrorCode = ErrorCode.none
    # (directory id, topic id, partition, error), one per assignment asked
    results: Sequence[tuple[uuid.UUID, uuid.UUID, int, ErrorCode]] = ()


@dataclass(frozen=True, slots=True)
class AllocateProducerIdsReply:
    error: ErrorCode = ErrorCode.none
    producer_id_start: int = -1
    producer_id_len: int = 0


# -- partition state (AlterPartition, ElectLeaders) -------------------------------------


@dataclass(frozen=True, slots=True)
class AlterPartitionItem:
    partition_index: int
    leader_epoch: int
    partition_epoch: int
    new_isr: Sequence[tuple[int, int]]  # (broker id, broker epoch or -1)
    leader_recovery_state: int = 0      # 0 RECOVERED, 1 RECOVERING


@dataclass(frozen=True, slots=True)
class AlterPartitionRequest:
    broker_id: int
    broker_epoch: int
    topics: Sequence[tuple[uuid.UUID, Sequence[AlterPartitionItem]]]


@dataclass(frozen=True, slots=True)
class AlterPartitionItemResult:
    partition_index: int
    error: ErrorCode = ErrorCode.none
    leader_id: int = -1
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    partition_epoch: int = -1
    leader_recovery_state: int = 0


@dataclass(frozen=True, slots=True)
class AlterPartitionReply:
    error: ErrorCode = ErrorCode.none
    topics: Sequence[tuple[uuid.UUID, Sequence[AlterPartitionItemResult]]] = ()


class ElectionType(enum.IntEnum):
    PREFERRED = 0
    UNCLEAN = 1


@dataclass(frozen=True, slots=True)
class ElectLeadersResult:
    topic: str
    partition: int
    error: ErrorCode = ErrorCode.none
    message: str | None = None


# -- reassignments (KIP-455) ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReassignmentResult:
    topic: str
    partition: int
    error: ErrorCode = ErrorCode.none
    message: str | None = None


@dataclass(frozen=True, slots=True)
class OngoingReassignment:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]
