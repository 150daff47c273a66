"""The controller's IO shell: runs the pure Controller on the Raft leader.

Operations run one at a time, each against an image that already holds the previous
operation's records, so the pure controller never has to reason about uncommitted
state. An operation answers only once its records are committed and applied here.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, Protocol, TypeVar

import structlog
from kio.schema.errors import ErrorCode

from broker.controller.acl_control import AclDeletionResult
from broker.controller.api import ControllerApi
from broker.controller.controller import Controller
from broker.controller.delegation_token_control import (
    CreateTokenReply,
    DelegationTokenControlManager,
    TokenTimeReply,
)
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
    ControllerResult,
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
from broker.errors import KafkaError
from broker.metadata import records as rec
from broker.metadata.image import MetadataImage
from broker.metadata.publisher import MetadataPublisher
from broker.metrics.stats import Histogram
from broker.quotas.core import entity_text
from broker.security.authorizer import AclBinding, AclFilter
from broker.security.delegation_token import DelegationTokenSettings

log = structlog.get_logger(__name__)
R = TypeVar("R")

class MetadataQuorum(Protocol):
    """What the controller needs of the Raft driver."""

    @property
    def is_leader(self) -> bool: ...

    async def append(self, records: list[bytes]) -> int:
        """Append one atomic batch; returns the offset of its last record."""
        ...

def _all_or_nothing(result: ControllerResult[list[Any]]) -> ControllerResult[list[Any]]:
    """Nothing written if any item of `result` is refused; every item's result answered."""
    if any(r.error is not ErrorCode.none for r in result.response):
        return ControllerResult([], result.response)
    return result


class ControllerService(ControllerApi):
    """The ControllerApi of this node's controller, when it is active."""

    def __init__(
        self, controller: Controller, quorum: MetadataQuorum, publisher: MetadataPublisher,
        clock: Callable[[], int], *, commit_timeout_s: float = 30.0,
    ) -> None:
        self.controller = controller
        self.quorum = quorum
        self.publisher = publisher
        self.clock = clock
        self.commit_timeout_s = commit_timeout_s
        self._lock = asyncio.Lock()
        self._last_appended = -1
        # Kafka's ControllerEventManager EventQueueTimeMs / EventQueueProcessingTimeMs
        self.event_queue_time = Histogram()
        self.event_processing_time = Histogram()
        # broker id -> the listener connection its latest heartbeat came on
        self._heartbeat_connections: dict[int, str] = {}
        self.tokens = DelegationTokenControlManager(
            DelegationTokenSettings.from_config(controller.settings.node_config))

    def activate(self, deposed: int = -1) -> None:
        """This node's controller became active (its epoch's LeaderChange is applied, so the
        image holds everything committed before): broker sessions start afresh (an unfenced
        broker that does not heartbeat within the activation grace is fenced), and nothing
        appended in an earlier term is waited for. A batch this node appended as leader
        before may have been truncated since by another leader; its offset, kept, made every
        operation of the new term wait commit_timeout_s for an offset the log might never
        reach (nothing else appends), so the controller answered REQUEST_TIMED_OUT to every
        heartbeat and fenced brokers stayed fenced."""
        self.controller.reset_sessions(self.clock(), deposed)
        self._last_appended = -1

    async def _run(self, op: Callable[[MetadataImage], ControllerResult[R]]) -> R:
        # Shielded: a caller that gives up (client timeout, cancelled request) must not
        # leave an appended batch unaccounted for, or the next operation would run on an
        # image missing it.
        return await asyncio.shield(self._run_serialised(op))

    @contextlib.asynccontextmanager
    async def _timed_lock(self) -> AsyncIterator[None]:
        """The operations' lock, timing the wait for it and the time holding it (metrics)."""
        queued = time.monotonic()
        async with self._lock:
            started = time.monotonic()
            self.event_queue_time.observe((started - queued) * 1000.0)
            try:
                yield
            finally:
                self.event_processing_time.observe((time.monotonic() - started) * 1000.0)

    async def _run_serialised(self, op: Callable[[MetadataImage], ControllerResult[R]]) -> R:
        async with self._timed_lock():
            if not self.quorum.is_leader:
                raise KafkaError(ErrorCode.not_controller, "this node is not the active controller")
            try:
                await self.publisher.wait_for_offset(self._last_appended, self.commit_timeout_s)
            except TimeoutError:
                raise KafkaError(
                    ErrorCode.request_timed_out, "earlier metadata changes are not applied yet"
                ) from None
            result = op(self.publisher.image)
            if result.records:
                try:
                    offset = await self.quorum.append(rec.encode_all(result.records))
                except KafkaError:
                    raise
                except Exception as exc:
                    # The Raft driver refuses appends once leadership is lost.
                    raise KafkaError(ErrorCode.not_controller, str(exc)) from exc
                self._last_appended = offset
                try:
                    await self.publisher.wait_for_offset(offset, self.commit_timeout_s)
                except TimeoutError:
                    raise KafkaError(
                        ErrorCode.request_timed_out, "the metadata change was not committed in time"
                    ) from None
            return result.response

    async def create_topics(
        self, topics: Sequence[CreatableTopic], *, validate_only: bool = False,
    ) -> list[CreateTopicResult]:
        results = await self._run(
            lambda image: self.controller.create_topics(image, topics, validate_only)
        )
        for r in results:
            if r.error is ErrorCode.none and not validate_only:
                log.info("topic_created", topic=r.name, partitions=r.num_partitions,
                         replication_factor=r.replication_factor)
        return results

    async def delete_topics(
        self, names: Sequence[str] = (), topic_ids: Sequence[uuid.UUID] = (),
    ) -> list[DeleteTopicResult]:
        results = await self._run(
            lambda image: self.controller.delete_topics(image, names, topic_ids)
        )
        for r in results:
            if r.error is ErrorCode.none:
                log.info("topic_deleted", topic=r.name, topic_id=str(r.topic_id))
        return results

    async def create_partitions(
        self, topics: Sequence[CreatePartitionsTopic], *, validate_only: bool = False,
    ) -> list[CreatePartitionsResult]:
        return await self._run(
            lambda image: self.controller.create_partitions(image, topics, validate_only)
        )

    async def alter_configs(
        self, resources: Sequence[AlterConfigsResource], *, validate_only: bool = False,
    ) -> list[AlterConfigsResult]:
        return await self._run(
            lambda image: self.controller.alter_configs(image, resources, validate_only)
        )

    async def incremental_alter_configs(
        self, resources: Sequence[IncrementalAlterConfigsResource], *,
        validate_only: bool = False, all_or_nothing: bool = False,
    ) -> list[AlterConfigsResult]:
        def op(image: MetadataImage) -> ControllerResult[list[AlterConfigsResult]]:
            result = self.controller.incremental_alter_configs(image, resources, validate_only)
            return _all_or_nothing(result) if all_or_nothing else result

        return await self._run(op)

    async def alter_user_scram_credentials(
        self, deletions: Sequence[Any], upsertions: Sequence[Any],
    ) -> list[Any]:
        """broker/security/scram_admin.py: UserScramCredential records."""
        from broker.security import scram_admin

        return await self._run(lambda image: scram_admin.alter(image, deletions, upsertions))

    # -- delegation tokens (broker/controller/delegation_token_control.py) ----------------

    async def create_delegation_token(self, requester: str, owner: str | None,
                                      renewers: Sequence[str], max_lifetime_ms: int,
                                      ) -> CreateTokenReply:
        from broker.protocol.kafka_uuid import random_kafka_uuid

        token_id = random_kafka_uuid()  # Kafka's Uuid.randomUuid().toString()
        return await self._run(lambda image: self.tokens.create(
            image, requester, owner, renewers, max_lifetime_ms, self.clock(), token_id))

    async def renew_delegation_token(self, requester: str, hmac: bytes,
                                     renew_period_ms: int) -> TokenTimeReply:
        return await self._run(lambda image: self.tokens.renew(
            image, requester, hmac, renew_period_ms, self.clock()))

    async def expire_delegation_token(self, requester: str, hmac: bytes,
                                      expiry_period_ms: int) -> TokenTimeReply:
        return await self._run(lambda image: self.tokens.expire(
            image, requester, hmac, expiry_period_ms, self.clock()))

    async def create_acls(self, bindings: Sequence[AclBinding]) -> list[ApiError]:
        """AclControlManager: AccessControlEntry records."""
        results = await self._run(lambda image: self.controller.create_acls(image, bindings))
        for b, r in zip(bindings, results, strict=True):
            if r.error is ErrorCode.none:
                log.info("acl_created", acl=str(b))
        return results

    async def delete_acls(self, filters: Sequence[AclFilter]) -> list[AclDeletionResult]:
        """AclControlManager: RemoveAccessControlEntry records."""
        results = await self._run(lambda image: self.controller.delete_acls(image, filters))
        for r in results:
            for b in r.matching:
                log.info("acl_deleted", acl=str(b))
        return results

    async def alter_client_quotas(
        self, alterations: Sequence[Any], validate_only: bool = False,
    ) -> list[Any]:
        """client_quota_control.py: ClientQuota records."""
        results: list[Any] = await self._run(
            lambda image: self.controller.alter_client_quotas(image, alterations, validate_only))
        for r in results:
            if r.error is ErrorCode.none and not validate_only:
                log.info("client_quotas_altered", entity=entity_text(r.entity))
        return results

    @property
    def kraft_version(self) -> int:
        """The metadata quorum's kraft.version (Raft's, not in the image)."""
        return int(getattr(self.quorum, "kraft_version", 0))

    async def update_features(self, updates: Sequence[FeatureUpdate],
                              validate_only: bool = False) -> ApiError:
        """feature_control.py: FeatureLevel records; a kraft.version change goes through
        Raft (KRaftVersion and Voters control records) once the records are committed."""
        node_id = self.controller.settings.node_config.node_id \
            if self.controller.settings.node_config is not None else -1
        outcome = await self._run(lambda image: self.controller.update_features(
            image, updates, validate_only, self.kraft_version, node_id))
        if not outcome.error.ok:
            return outcome.error
        if outcome.kraft_version is not None:
            upgrade = getattr(self.quorum, "upgrade_kraft_version", None)
            if upgrade is None:
                return ApiError(ErrorCode.invalid_update_version,
                                "this metadata quorum cannot change kraft.version")
            err, msg = await upgrade(outcome.kraft_version, validate_only=validate_only)
            if err is not ErrorCode.none:
                return ApiError(err, msg or None)
        if not validate_only:
            log.info("features_updated", updates={u.feature: u.level for u in updates})
        return outcome.error

    async def register_controller(self, req: ControllerRegistrationRequest) -> ApiError:
        """KIP-919: RegisterController records (cluster_control.py)."""
        return await self._run(lambda image: self.controller.register_controller(image, req))

    async def register_broker(self, req: BrokerRegistrationRequest) -> BrokerRegistrationReply:
        return await self._run(
            lambda image: self.controller.register_broker(image, req, self.clock())
        )

    async def broker_heartbeat(self, req: BrokerHeartbeatRequest,
                               connection_id: str = "") -> BrokerHeartbeatReply:
        """`connection_id`: the controller listener connection it came on, if any."""
        if connection_id:
            self._heartbeat_connections[req.broker_id] = connection_id
        if self.quorum.is_leader:
            # its arrival renews the session now, not when its turn comes behind the
            # operations queued before it (ClusterControlManager.heartbeat_received), and
            # while it waits its turn the broker counts as alive (heartbeat_arrived)
            self.controller.heartbeat_received(self.publisher.image, req.broker_id,
                                               req.broker_epoch, self.clock(),
                                               want_shut_down=req.want_shut_down)
        self.controller.heartbeat_arrived(req.broker_id)
        try:
            return await self._run(
                lambda image: self.controller.broker_heartbeat(image, req, self.clock())
            )
        finally:
            self.controller.heartbeat_left(req.broker_id)

    def connection_closed(self, connection_id: str) -> None:
        """A controller listener connection closed: the brokers whose latest heartbeat came
        on it may have died (Controller.broker_disconnected)."""
        for broker_id in [b for b, c in self._heartbeat_connections.items()
                          if c == connection_id]:
            del self._heartbeat_connections[broker_id]
            if self.quorum.is_leader:
                self.controller.broker_disconnected(broker_id, self.clock())

    async def allocate_producer_ids(
        self, broker_id: int, broker_epoch: int,
    ) -> AllocateProducerIdsReply:
        """A block of PRODUCER_ID_BLOCK_SIZE producer ids for a broker, committed to the
        metadata log before it is handed out (Kafka's AllocateProducerIds)."""
        return await self._run(
            lambda image: self.controller.allocate_producer_ids(image, broker_id, broker_epoch)
        )

    async def assign_replicas_to_dirs(self, req: AssignReplicasToDirsRequest
                                      ) -> AssignReplicasToDirsReply:
        """Where a broker keeps its replicas (Kafka's AssignReplicasToDirs, KIP-858)."""
        return await self._run(lambda image: self.controller.assign_replicas_to_dirs(image, req))

    async def alter_partition(self, req: AlterPartitionRequest) -> AlterPartitionReply:
        """A partition leader's ISR change (Kafka's AlterPartition)."""
        return await self._run(lambda image: self.controller.alter_partition(image, req))

    async def unregister_broker(self, broker_id: int) -> tuple[ErrorCode, str | None]:
        """Drop a broker's registration (Kafka's UnregisterBroker, KIP-631)."""
        return await self._run(
            lambda image: self.controller.unregister_broker(image, broker_id))

    async def elect_leaders(
        self, election_type: ElectionType, partitions: Sequence[tuple[str, int]] | None = None,
    ) -> list[ElectLeadersResult]:
        """Preferred or unclean elections; `partitions=None` means every partition."""
        return await self._run(
            lambda image: self.controller.elect_leaders(image, election_type, partitions))

    async def alter_partition_reassignments(
        self, reassignments: Sequence[tuple[str, int, Sequence[int] | None]], *,
        all_or_nothing: bool = False,
    ) -> list[ReassignmentResult]:
        """Start (target replicas) or cancel (None) reassignments, each on its own, or, with
        `all_or_nothing`, none if any is refused."""
        def op(image: MetadataImage) -> ControllerResult[list[ReassignmentResult]]:
            result = self.controller.alter_partition_reassignments(image, reassignments)
            return _all_or_nothing(result) if all_or_nothing else result

        return await self._run(op)

    async def list_partition_reassignments(
        self, partitions: Sequence[tuple[str, int]] | None = None,
    ) -> list[OngoingReassignment]:
        """Ongoing reassignments in the committed image (serialised with the writes, so a
        reassignment this controller just started is listed)."""
        return await self._run(lambda image: ControllerResult(
            [], self.controller.list_partition_reassignments(image, partitions)))

    async def rebalance_leaders(self, imbalance_percentage: int) -> int:
        """auto.leader.rebalance.enable: preferred-replica elections where a broker's share
        of partitions led by someone else exceeds `imbalance_percentage`; returns how many
        partition changes were written."""
        if not self.quorum.is_leader:
            return 0

        def op(image: MetadataImage) -> ControllerResult[int]:
            records = self.controller.rebalance_leaders(image, imbalance_percentage)
            return ControllerResult(records, len(records))

        return await self._run(op)

    async def append_records(self, records: list[Any]) -> None:
        """Bootstrap and periodic records (fencing) that answer no client."""
        await self._run(lambda image: ControllerResult(records, None))

    async def tick(self) -> None:
        """Periodic work of the active controller: fence brokers whose session expired, and
        write a NoOp record every metadata.max.idle.interval.ms (KIP-835)."""
        if self.quorum.is_leader:
            live = {b for b, r in self.publisher.image.brokers.items() if not r.fenced}
            now = self.clock()
            await self._run(lambda image: ControllerResult(
                [*self.controller.tick(image, now), *self.controller.no_op_records(now),
                 *self.tokens.sweep(image, now)], None))
            image = self.publisher.image
            fenced = sorted(b for b in live if (r := image.brokers.get(b)) is not None
                            and r.fenced)
            causes = self.controller.fence_causes
            for b in fenced:
                # tick names its cause; a broker fenced otherwise in the meantime (a
                # controlled shutdown, an unregistration) says so
                log.warning("brokers_fenced", brokers=[b],
                            reason=causes.pop(b, "fenced by another metadata change"))
            causes.clear()
