"""ControllerApi: the controller's operations, as brokers and the admin plane call them.

Two implementations, one interface:

  * ControllerService (service.py): runs each operation on this node's pure Controller, when
    this node's controller is active (a combined node, the tests' in-process nodes);
  * ControllerChannel (channel.py): every node's way to the active controller, through the
    local service when it is active, else over the active controller's controller listener
    (the codecs in rpc/).

Each controller RPC's `serve` (rpc/) takes a ControllerApi: a broker's handler passes its
channel, the controller listener its active service. This module imports neither side, so the
channel, the service and the RPC modules all stand on it without importing each other.

ControllerChannelApi adds what only the channel offers: the controllers' listeners and the
requests a broker sends on to the metadata quorum's leader as they are (DescribeQuorum,
AddRaftVoter, RemoveRaftVoter).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from kio.schema.errors import ErrorCode

    from broker.controller.acl_control import AclDeletionResult
    from broker.controller.delegation_token_control import CreateTokenReply, TokenTimeReply
    from broker.controller.feature_control import FeatureUpdate
    from broker.controller.requests import (
        AllocateProducerIdsReply,
        AlterConfigsResource,
        AlterConfigsResult,
        AlterPartitionReply,
        AlterPartitionRequest,
        ApiError,
        AssignReplicasToDirsReply,
        AssignReplicasToDirsRequest,
        BrokerHeartbeatReply,
        BrokerHeartbeatRequest,
        BrokerRegistrationReply,
        BrokerRegistrationRequest,
        ControllerRegistrationRequest,
        CreatableTopic,
        CreatePartitionsResult,
        CreatePartitionsTopic,
        CreateTopicResult,
        DeleteTopicResult,
        ElectionType,
        ElectLeadersResult,
        IncrementalAlterConfigsResource,
        OngoingReassignment,
        ReassignmentResult,
    )
    from broker.security.authorizer import AclBinding, AclFilter


class ControllerApi(Protocol):
    """Each operation answers once its records are committed and applied (at the active
    controller; the channel also waits, bounded, for this node's image: read your writes).
    A whole-request failure raises KafkaError (NOT_CONTROLLER, REQUEST_TIMED_OUT); a remote
    answer may instead carry it in its per-item error codes."""

    # -- topics, partitions, configs ------------------------------------------------------

    async def create_topics(
        self, topics: Sequence[CreatableTopic], *, validate_only: bool = False,
    ) -> list[CreateTopicResult]: ...

    async def delete_topics(
        self, names: Sequence[str] = (), topic_ids: Sequence[uuid.UUID] = (),
    ) -> list[DeleteTopicResult]: ...

    async def create_partitions(
        self, topics: Sequence[CreatePartitionsTopic], *, validate_only: bool = False,
    ) -> list[CreatePartitionsResult]: ...

    async def alter_configs(
        self, resources: Sequence[AlterConfigsResource], *, validate_only: bool = False,
    ) -> list[AlterConfigsResult]: ...

    async def incremental_alter_configs(
        self, resources: Sequence[IncrementalAlterConfigsResource], *,
        validate_only: bool = False, all_or_nothing: bool = False,
    ) -> list[AlterConfigsResult]:
        """`all_or_nothing` (the admin plane's AlterConfigs): if any resource is refused,
        nothing is written and every result is returned (the refused ones with errors).
        Kafka's IncrementalAlterConfigs answers per resource (False)."""
        ...

    async def elect_leaders(
        self, election_type: ElectionType, partitions: Sequence[tuple[str, int]] | None = None,
    ) -> list[ElectLeadersResult]:
        """Preferred or unclean elections, per partition; `partitions=None`: every one."""
        ...

    async def alter_partition_reassignments(
        self, reassignments: Sequence[tuple[str, int, Sequence[int] | None]], *,
        all_or_nothing: bool = False,
    ) -> list[ReassignmentResult]:
        """Start (target replicas) or cancel (None) reassignments, each on its own; with
        `all_or_nothing` (the admin plane) a refused one leaves every other unwritten."""
        ...

    async def list_partition_reassignments(
        self, partitions: Sequence[tuple[str, int]] | None = None,
    ) -> list[OngoingReassignment]: ...

    # -- security: SCRAM credentials, delegation tokens, ACLs, client quotas -------------

    async def alter_user_scram_credentials(
        self, deletions: Sequence[Any], upsertions: Sequence[Any],
    ) -> list[Any]: ...

    async def create_delegation_token(
        self, requester: str, owner: str | None, renewers: Sequence[str],
        max_lifetime_ms: int,
    ) -> CreateTokenReply: ...

    async def renew_delegation_token(self, requester: str, hmac: bytes,
                                     renew_period_ms: int) -> TokenTimeReply: ...

    async def expire_delegation_token(self, requester: str, hmac: bytes,
                                      expiry_period_ms: int) -> TokenTimeReply: ...

    async def create_acls(self, bindings: Sequence[AclBinding]) -> list[ApiError]: ...

    async def delete_acls(self, filters: Sequence[AclFilter]) -> list[AclDeletionResult]: ...

    async def alter_client_quotas(
        self, alterations: Sequence[Any], validate_only: bool = False,
    ) -> list[Any]: ...

    async def update_features(self, updates: Sequence[FeatureUpdate],
                              validate_only: bool = False) -> ApiError: ...

    # -- the cluster's members: registration, liveness, replicas --------------------------

    async def register_controller(self, req: ControllerRegistrationRequest) -> ApiError: ...

    async def register_broker(
        self, req: BrokerRegistrationRequest) -> BrokerRegistrationReply: ...

    async def broker_heartbeat(self, req: BrokerHeartbeatRequest) -> BrokerHeartbeatReply: ...

    async def unregister_broker(self, broker_id: int) -> tuple[ErrorCode, str | None]: ...

    async def allocate_producer_ids(
        self, broker_id: int, broker_epoch: int,
    ) -> AllocateProducerIdsReply: ...

    async def assign_replicas_to_dirs(
        self, req: AssignReplicasToDirsRequest) -> AssignReplicasToDirsReply: ...

    async def alter_partition(self, req: AlterPartitionRequest) -> AlterPartitionReply: ...


class ControllerChannelApi(ControllerApi, Protocol):
    """The node's way to the active controller as the Kafka handlers and the admin plane use
    it: the operations, the controllers' listeners, and the KRaft requests a broker sends on
    to the metadata quorum's leader."""

    voters: Mapping[int, tuple[str, int]]  # controller id -> its controller listener

    async def describe_quorum(self, request: Any, version: int) -> Any:
        """DescribeQuorum sent on to the quorum's leader; its answer as it is."""
        ...

    async def voter_change(self, api_key: int, version: int, request: Any,
                           timeout_s: float) -> Any:
        """AddRaftVoter / RemoveRaftVoter sent on to the quorum's leader (KIP-853)."""
        ...
