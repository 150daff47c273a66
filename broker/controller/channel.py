"""ControllerChannel: the one way a node asks the active controller for anything.

It implements ControllerApi (api.py), as ControllerService does, so handlers, the admin
services, the group coordinator and the node's broker lifecycle call it the same way whether
the active controller is in this process or not:

  * this node hosts the active controller -> the local ControllerService, no socket;
  * otherwise -> the kio request (broker/controller/rpc/) to the quorum leader's controller
    listener (its address in `controller.quorum.voters`), one KafkaConnection per
    controller, pipelined.

A call that fails (no controller known, NOT_CONTROLLER, a connection error, a timeout) is
tried at once at the next controller in `controller.quorum.voters` not yet tried: the
quorum leader this node knows of may be stale (a broker observes a new leader only once
its fetch from the old one gives up), and the active controller answers wherever it is.
A controller that just timed out or refused a connection goes to the back of the line for
SUSPECT_S seconds.
Once every controller has failed, the call is retried with exponential backoff from
`controller.quorum.retry.backoff.ms` (capped at MAX_BACKOFF_MS), until the call's
deadline; then it raises KafkaError (REQUEST_TIMED_OUT if an attempt ran out of time, else
NOT_CONTROLLER). For registration and heartbeats a remote attempt waits at most
`attempt_timeout_s` and the whole call twice that (a stuck controller must not hold a
broker's liveness hostage); an admin write's attempt may use the whole remaining deadline
(a write that timed out may have been committed: retrying it blindly could do it twice).
A write whose connection broke after it was sent may have been applied too; its retry is
answered as a repeated request is (TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS for a count
already reached, UNKNOWN_TOPIC_OR_PARTITION for a deleted topic, INVALID_UPDATE_VERSION for
an AlterPartition), which is also what a Kafka client retrying on its own would see.

Read your writes: the local service answers once the change is applied to this node's
image. A remote write is answered once committed and applied at the controller; the channel
then asks the controller for its high watermark (DescribeQuorum) and waits, for at most
MAX_CATCH_UP_S within the call's deadline, until this node's image has applied that far,
so a handler that reads the image right after a write (a topic it just created) sees it.
Heartbeats, registrations, AlterPartition and producer-id blocks do not wait.

Unlike the local service, which raises KafkaError for a whole-request failure (e.g.
REQUEST_TIMED_OUT waiting for the commit), a remote answer carries such a failure in its
per-item (or top-level reply) error codes; the callers handle both.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import ModuleType
from typing import Any, TypeVar

import structlog
from kio.schema.describe_quorum.v0 import request as describe_quorum_request
from kio.schema.errors import ErrorCode

from broker.controller.acl_control import AclDeletionResult
from broker.controller.api import ControllerChannelApi
from broker.controller.controller import Controller
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
from broker.controller.rpc import (
    allocate_producer_ids,
    alter_client_quotas,
    alter_configs,
    alter_partition,
    alter_partition_reassignments,
    alter_user_scram_credentials,
    assign_replicas_to_dirs,
    broker_heartbeat,
    broker_registration,
    controller_registration,
    create_acls,
    create_partitions,
    create_topics,
    delete_acls,
    delete_topics,
    elect_leaders,
    envelope,
    incremental_alter_configs,
    list_partition_reassignments,
    unregister_broker,
    update_features,
)
from broker.controller.service import ControllerService
from broker.errors import KafkaError
from broker.protocol.frame_reader import FrameError
from broker.protocol.transport import ConnectionSecurity, KafkaConnection
from broker.security.authorizer import AclBinding, AclFilter
from raft.kafka_messages import METADATA_TOPIC

log = structlog.get_logger(__name__)
R = TypeVar("R")
MAX_BACKOFF_MS = 1000
MAX_CATCH_UP_S = 5.0
SUSPECT_S = 3.0
DESCRIBE_QUORUM = 55


class ControllerChannel(ControllerChannelApi):
    def __init__(
        self, node_id: int, voters: Mapping[int, tuple[str, int]],
        leader_id: Callable[[], int], local: ControllerService | None = None, *,
        retry_backoff_ms: int = 20, attempt_timeout_s: float = 2.0,
        default_timeout_s: float = 30.0,
        wait_applied: Callable[[int, float], Awaitable[None]] | None = None,
        security: ConnectionSecurity | None = None,
    ) -> None:
        """`voters`: controller id -> controller listener (host, port); `leader_id()`: the
        metadata quorum's current leader (-1 when unknown); `local`: this node's controller
        service, None on a broker-only node; `wait_applied(offset, timeout_s)`: returns
        once this node's metadata image includes `offset` (raises TimeoutError)."""
        self.node_id = node_id
        # a dict of static voters, or a live view of the dynamic voter set (KIP-853)
        self.voters = voters
        self.leader_id = leader_id
        self.local = local
        self.retry_backoff_ms = max(1, retry_backoff_ms)
        self.attempt_timeout_s = attempt_timeout_s
        self.default_timeout_s = default_timeout_s
        self.wait_applied = wait_applied
        self.security = security  # how the controller listener is secured
        self._conns: dict[int, KafkaConnection] = {}
        self._suspect_until: dict[int, float] = {}
        self.remote_calls = 0  # requests sent on the wire (tests and logs)
        # Done when the connection that carried the latest answered heartbeat closes; None
        # if that heartbeat was answered in this process or failed (broker_heartbeat).
        self.heartbeat_connection_closed: asyncio.Future[None] | None = None

    # ---- what other parts look at -------------------------------------------------------

    @property
    def quorum(self) -> Any:
        """The local service's quorum (is_leader: this node's controller is active), or None."""
        return None if self.local is None else self.local.quorum

    @property
    def controller(self) -> Controller | None:
        """The pure controller of this node, if it hosts one."""
        return None if self.local is None else self.local.controller

    @property
    def local_active(self) -> bool:
        return self._active_local() is not None

    def _active_local(self) -> ControllerService | None:
        """This node's controller service, if it is the active controller."""
        local = self.local
        return local if local is not None and local.quorum.is_leader else None

    async def close(self) -> None:
        conns, self._conns = list(self._conns.values()), {}
        for conn in conns:
            await conn.close()

    # ---- ControllerApi ------------------------------------------------------------------

    async def create_topics(
        self, topics: Sequence[CreatableTopic], *, validate_only: bool = False,
    ) -> list[CreateTopicResult]:
        deadline = self._deadline(None)
        return await self._call(
            lambda s: s.create_topics(topics, validate_only=validate_only),
            lambda: create_topics.request(topics, validate_only, self._left_ms(deadline)),
            create_topics, create_topics.results_of, deadline, whole=True, sync=True)

    async def delete_topics(
        self, names: Sequence[str] = (), topic_ids: Sequence[uuid.UUID] = (),
    ) -> list[DeleteTopicResult]:
        deadline = self._deadline(None)
        return await self._call(
            lambda s: s.delete_topics(names, topic_ids),
            lambda: delete_topics.request(names, topic_ids, self._left_ms(deadline)),
            delete_topics, delete_topics.results_of, deadline, whole=True, sync=True)

    async def create_partitions(
        self, topics: Sequence[CreatePartitionsTopic], *, validate_only: bool = False,
    ) -> list[CreatePartitionsResult]:
        deadline = self._deadline(None)
        return await self._call(
            lambda s: s.create_partitions(topics, validate_only=validate_only),
            lambda: create_partitions.request(topics, validate_only, self._left_ms(deadline)),
            create_partitions, create_partitions.results_of, deadline, whole=True, sync=True)

    async def alter_configs(
        self, resources: Sequence[AlterConfigsResource], *, validate_only: bool = False,
    ) -> list[AlterConfigsResult]:
        return await self._call(
            lambda s: s.alter_configs(resources, validate_only=validate_only),
            lambda: alter_configs.request(resources, validate_only),
            alter_configs, alter_configs.results_of, self._deadline(None), whole=True, sync=True)

    async def incremental_alter_configs(
        self, resources: Sequence[IncrementalAlterConfigsResource], *,
        validate_only: bool = False, all_or_nothing: bool = False,
    ) -> list[AlterConfigsResult]:
        """`all_or_nothing` in one step on the active local service; at a remote controller
        (IncrementalAlterConfigs answers per resource) every resource is validated first
        and applied only if none is refused (a change between the two is not excluded)."""
        if all_or_nothing and not validate_only:
            local = self._active_local()
            if local is not None:
                return await local.incremental_alter_configs(
                    resources, validate_only=False, all_or_nothing=True)
            checked = await self.incremental_alter_configs(resources, validate_only=True)
            if any(r.error is not ErrorCode.none for r in checked):
                return checked
        return await self._call(
            lambda s: s.incremental_alter_configs(resources, validate_only=validate_only),
            lambda: incremental_alter_configs.request(resources, validate_only),
            incremental_alter_configs, incremental_alter_configs.results_of,
            self._deadline(None), whole=True, sync=True)

    async def alter_user_scram_credentials(
        self, deletions: Sequence[Any], upsertions: Sequence[Any],
    ) -> list[Any]:
        return await self._call(
            lambda s: s.alter_user_scram_credentials(deletions, upsertions),
            lambda: alter_user_scram_credentials.request(deletions, upsertions),
            alter_user_scram_credentials, alter_user_scram_credentials.results_of,
            self._deadline(None), whole=True, sync=True)

    # -- delegation tokens: in an Envelope, as the client's principal (KIP-590) ----------

    async def create_delegation_token(
        self, requester: str, owner: str | None, renewers: Sequence[str],
        max_lifetime_ms: int, *, token_authenticated: bool = False,
    ) -> CreateTokenReply:
        return await self._call(
            lambda s: s.create_delegation_token(requester, owner, renewers, max_lifetime_ms),
            lambda: envelope.request(
                envelope.create_request(owner, list(renewers), max_lifetime_ms), requester,
                token_authenticated),
            envelope, envelope.create_reply_of, self._deadline(None), whole=True, sync=True)

    async def renew_delegation_token(self, requester: str, hmac: bytes,
                                     renew_period_ms: int) -> TokenTimeReply:
        return await self._call(
            lambda s: s.renew_delegation_token(requester, hmac, renew_period_ms),
            lambda: envelope.request(envelope.renew_request(hmac, renew_period_ms),
                                     requester, False),
            envelope, envelope.renew_reply_of, self._deadline(None), whole=True, sync=True)

    async def expire_delegation_token(self, requester: str, hmac: bytes,
                                      expiry_period_ms: int) -> TokenTimeReply:
        return await self._call(
            lambda s: s.expire_delegation_token(requester, hmac, expiry_period_ms),
            lambda: envelope.request(envelope.expire_request(hmac, expiry_period_ms),
                                     requester, False),
            envelope, envelope.expire_reply_of, self._deadline(None), whole=True, sync=True)

    async def create_acls(self, bindings: Sequence[AclBinding]) -> list[ApiError]:
        return await self._call(
            lambda s: s.create_acls(bindings), lambda: create_acls.request(bindings),
            create_acls, create_acls.results_of, self._deadline(None), whole=True, sync=True)

    async def delete_acls(self, filters: Sequence[AclFilter]) -> list[AclDeletionResult]:
        return await self._call(
            lambda s: s.delete_acls(filters), lambda: delete_acls.request(filters),
            delete_acls, delete_acls.results_of, self._deadline(None), whole=True, sync=True)
    async def alter_client_quotas(
        self, alterations: Sequence[Any], validate_only: bool = False,
    ) -> list[Any]:
        return await self._call(
            lambda s: s.alter_client_quotas(alterations, validate_only),
            lambda: alter_client_quotas.request(alterations, validate_only),
            alter_client_quotas, alter_client_quotas.results_of,
            self._deadline(None), whole=True, sync=True)

    async def update_features(self, updates: Sequence[FeatureUpdate],
                              validate_only: bool = False) -> ApiError:
        return await self._call(
            lambda s: s.update_features(updates, validate_only),
            lambda: update_features.request(updates, validate_only),
            update_features, update_features.reply_of,
            self._deadline(None), whole=True, sync=True)

    async def register_controller(self, req: ControllerRegistrationRequest) -> ApiError:
        return await self._call(
            lambda s: s.register_controller(req), lambda: controller_registration.request(req),
            controller_registration, controller_registration.reply_of,
            self._deadline(2 * self.attempt_timeout_s), whole=False)

    async def register_broker(self, req: BrokerRegistrationRequest) -> BrokerRegistrationReply:
        return await self._call(
            lambda s: s.register_broker(req), lambda: broker_registration.request(req),
            broker_registration, broker_registration.reply_of,
            self._deadline(2 * self.attempt_timeout_s), whole=False)

    async def broker_heartbeat(self, req: BrokerHeartbeatRequest) -> BrokerHeartbeatReply:
        """Also sets heartbeat_connection_closed: the active controller fences a broker
        whose heartbeat connection closed and that has not heartbeated since
        (broker.session.disconnect.timeout.ms), so the broker heartbeats again at once
        when that connection closes (Node._broker_lifecycle)."""
        self.heartbeat_connection_closed = None

        def answered(conn: KafkaConnection) -> None:
            self.heartbeat_connection_closed = conn.closed()

        return await self._call(
            lambda s: s.broker_heartbeat(req), lambda: broker_heartbeat.request(req),
            broker_heartbeat, broker_heartbeat.reply_of,
            self._deadline(2 * self.attempt_timeout_s), whole=False, answered=answered)

    async def allocate_producer_ids(
        self, broker_id: int, broker_epoch: int,
    ) -> AllocateProducerIdsReply:
        return await self._call(
            lambda s: s.allocate_producer_ids(broker_id, broker_epoch),
            lambda: allocate_producer_ids.request(broker_id, broker_epoch),
            allocate_producer_ids, allocate_producer_ids.reply_of, self._deadline(None),
            whole=True)

    async def assign_replicas_to_dirs(self, req: AssignReplicasToDirsRequest
                                      ) -> AssignReplicasToDirsReply:
        return await self._call(
            lambda s: s.assign_replicas_to_dirs(req), lambda: assign_replicas_to_dirs.request(req),
            assign_replicas_to_dirs, assign_replicas_to_dirs.reply_of, self._deadline(None),
            whole=True)

    async def alter_partition(self, req: AlterPartitionRequest) -> AlterPartitionReply:
        return await self._call(
            lambda s: s.alter_partition(req), lambda: alter_partition.request(req),
            alter_partition, alter_partition.reply_of, self._deadline(None), whole=True)

    async def describe_quorum(self, request: Any, version: int) -> Any:
        """DescribeQuorum sent on to the metadata quorum's leader, as a broker forwards its
        clients' (Kafka's KafkaApis.handleDescribeQuorumRequest). The leader's answer is
        returned as it is."""
        def not_leader(response: Any) -> bool:
            return ErrorCode.not_leader_or_follower in {
                response.error_code, *(p.error_code for t in response.topics
                                       for p in t.partitions)}

        return await self._to_quorum_leader(DESCRIBE_QUORUM, version, request,
                                            self._deadline(None), self.attempt_timeout_s,
                                            not_leader)

    async def voter_change(self, api_key: int, version: int, request: Any,
                           timeout_s: float) -> Any:
        """AddRaftVoter (80) / RemoveRaftVoter (81) sent on to the metadata quorum's leader
        over its controller listener, as Kafka's brokers forward them (KIP-853).
        `timeout_s` bounds the whole call, and one attempt may take all of it (the leader
        answers once the new voter set commits). The leader's answer is returned as it is."""
        return await self._to_quorum_leader(
            api_key, version, request, time.monotonic() + timeout_s, timeout_s,
            lambda response: response.error_code == ErrorCode.not_leader_or_follower)

    async def _to_quorum_leader(self, api_key: int, version: int, request: Any,
                                deadline: float, attempt_s: float,
                                not_leader: Callable[[Any], bool]) -> Any:
        """Send `request` over the controller listener to the leader this node knows of
        first (its own controller listener included), then the other voters, until one
        answers other than as a non-leader; each attempt takes at most `attempt_s`."""
        leader = self.leader_id()
        order = list(dict.fromkeys(([leader] if leader in self.voters else [])
                                   + sorted(self.voters)))
        error, reason = ErrorCode.not_leader_or_follower, "no controller answered as leader"
        for controller_id in order:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                response = await self._connection(controller_id).request(
                    api_key, version, request, min(left, attempt_s))
            except (TimeoutError, OSError, ConnectionError, FrameError, EOFError) as exc:
                await self._drop(controller_id)
                error, reason = ErrorCode.request_timed_out, f"controller {controller_id}: {exc!r}"
                continue
            if not_leader(response):
                continue
            return response
        raise KafkaError(error, reason)

    async def unregister_broker(self, broker_id: int) -> tuple[ErrorCode, str | None]:
        deadline = self._deadline(None)
        return await self._call(
            lambda s: s.unregister_broker(broker_id),
            lambda: unregister_broker.request(broker_id), unregister_broker,
            unregister_broker.reply_of, deadline, whole=True, sync=True)

    async def elect_leaders(
        self, election_type: ElectionType, partitions: Sequence[tuple[str, int]] | None = None,
    ) -> list[ElectLeadersResult]:
        deadline = self._deadline(None)
        return await self._call(
            lambda s: s.elect_leaders(election_type, partitions),
            lambda: elect_leaders.request(election_type, partitions, self._left_ms(deadline)),
            elect_leaders, elect_leaders.results_of, deadline, whole=True, sync=True)

    async def alter_partition_reassignments(
        self, reassignments: Sequence[tuple[str, int, Sequence[int] | None]], *,
        all_or_nothing: bool = False,
    ) -> list[ReassignmentResult]:
        """`all_or_nothing` holds on the active local service; a remote controller's
        AlterPartitionReassignments answers per partition (the all-or-nothing check needs
        the controller's image), so there each partition is started or refused on its own."""
        if all_or_nothing:
            local = self._active_local()
            if local is not None:
                return await local.alter_partition_reassignments(reassignments,
                                                                 all_or_nothing=True)
        deadline = self._deadline(None)
        return await self._call(
            lambda s: s.alter_partition_reassignments(reassignments),
            lambda: alter_partition_reassignments.request(reassignments,
                                                          self._left_ms(deadline)),
            alter_partition_reassignments, alter_partition_reassignments.results_of, deadline,
            whole=True, sync=True)

    async def list_partition_reassignments(
        self, partitions: Sequence[tuple[str, int]] | None = None,
    ) -> list[OngoingReassignment]:
        deadline = self._deadline(None)
        return await self._call(
            lambda s: s.list_partition_reassignments(partitions),
            lambda: list_partition_reassignments.request(partitions, self._left_ms(deadline)),
            list_partition_reassignments, list_partition_reassignments.results_of, deadline,
            whole=False)

    # ---- the retry loop -----------------------------------------------------------------

    def _deadline(self, timeout_s: float | None) -> float:
        return time.monotonic() + (self.default_timeout_s if timeout_s is None else timeout_s)

    @staticmethod
    def _left_ms(deadline: float) -> int:
        return max(1, int((deadline - time.monotonic()) * 1000))

    def _connection(self, controller_id: int) -> KafkaConnection:
        conn = self._conns.get(controller_id)
        if conn is None:
            host, port = self.voters[controller_id]
            conn = KafkaConnection(host, port, f"skiff-node-{self.node_id}", security=self.security)
            self._conns[controller_id] = conn
        return conn

    def _target(self, skip: set[int]) -> int:
        """Whom to ask next: the quorum leader this node knows of, then the other
        controllers in turn, since this node's view of the leader lags (an observer learns
        of a new leader only when its fetch to the old one gives up). A controller that
        timed out or refused a connection in the last SUSPECT_S seconds is asked only when
        no other is left, so a paused controller does not eat every heartbeat's time.
        -1: nobody left to ask before the next backoff."""
        leader = self.leader_id()
        order = ([leader] if leader in self.voters else []) + sorted(self.voters)
        now = time.monotonic()
        fresh: list[int] = []
        suspect: list[int] = []
        for v in dict.fromkeys(order):
            if v == self.node_id or v in skip:
                continue
            (suspect if self._suspect_until.get(v, 0.0) > now else fresh).append(v)
        return (fresh or suspect or [-1])[0]

    async def _catch_up(self, controller_id: int, deadline: float) -> None:
        if self.wait_applied is None:
            return
        left = min(deadline - time.monotonic(), MAX_CATCH_UP_S)
        if left <= 0:
            return
        q: Any = describe_quorum_request
        request = q.DescribeQuorumRequest(topics=(q.TopicData(
            topic_name=METADATA_TOPIC, partitions=(q.PartitionData(partition_index=0),)),))
        try:
            response = await self._connection(controller_id).request(
                DESCRIBE_QUORUM, 0, request, min(left, self.attempt_timeout_s))
            part = response.topics[0].partitions[0]
            if part.error_code is not ErrorCode.none:
                return
            await self.wait_applied(int(part.high_watermark) - 1,
                                    max(0.001, min(deadline - time.monotonic(),
                                                   MAX_CATCH_UP_S)))
        except (TimeoutError, OSError, ConnectionError, FrameError, EOFError,
                IndexError) as exc:
            # The write itself succeeded; only the local view may lag a little longer.
            log.info("controller_catch_up_incomplete", controller=controller_id,
                     error=repr(exc))

    async def _drop(self, controller_id: int) -> None:
        conn = self._conns.pop(controller_id, None)
        if conn is not None:
            await conn.close()

    async def _call(
        self, local: Callable[[ControllerService], Awaitable[R]], build: Callable[[], Any],
        rpc: ModuleType, decode: Callable[[Any], R], deadline: float, *, whole: bool,
        sync: bool = False, answered: Callable[[KafkaConnection], None] | None = None,
    ) -> R:
        """`whole`: a remote attempt may use all the time left (a non-idempotent write);
        else each attempt is bounded by `attempt_timeout_s`. `sync`: after a remote answer,
        wait for this node's image to catch up with the controller (read your writes).
        `answered`: called with the connection a remote answer came on."""
        attempt = 0
        timed_out = False
        reason = "no active controller is known"
        skip: set[int] = set()  # controllers that failed since the last backoff
        while True:
            target = self._target(skip)
            active = self._active_local()
            if active is not None:
                try:
                    return await local(active)
                except KafkaError as exc:
                    if exc.error_code is not ErrorCode.not_controller:
                        raise
                    reason = exc.message or "the local controller lost leadership"
            elif target >= 0:
                left = deadline - time.monotonic()
                wait = left if whole else min(left, self.attempt_timeout_s)
                conn = self._connection(target)
                try:
                    self.remote_calls += 1
                    response = await conn.request(
                        rpc.API_KEY, rpc.VERSION, build(), max(0.001, wait))
                except TimeoutError:
                    # The connection stays: other requests may be in flight on it (a slow
                    # heartbeat must not fail a CreateTopics that is being committed), and a
                    # late answer to this one is dropped by its correlation id.
                    timed_out = True
                    reason = f"controller {target} did not answer in time"
                    self._suspect_until[target] = time.monotonic() + SUSPECT_S
                except (OSError, ConnectionError, FrameError, EOFError) as exc:
                    reason = f"controller {target}: {exc}"
                    self._suspect_until[target] = time.monotonic() + SUSPECT_S
                    await self._drop(target)
                else:
                    self._suspect_until.pop(target, None)
                    if rpc.error_code_of(response) is not ErrorCode.not_controller:
                        result = decode(response)
                        if answered is not None:
                            answered(conn)
                        if sync:
                            await self._catch_up(target, deadline)
                        return result
                    reason = f"node {target} is not the active controller"
                if whole:
                    # a write that may have been applied is about to be sent again
                    log.info("controller_write_retry", api=rpc.__name__.rsplit(".", 1)[-1],
                             reason=reason)
                skip.add(target)
                if self._target(skip) >= 0 and deadline > time.monotonic():
                    continue  # another controller may be active: ask it at once
            elif self.leader_id() == self.node_id:
                reason = "this node leads the quorum but its controller is not active yet"
            skip.clear()
            left = deadline - time.monotonic()
            if left <= 0:
                code = ErrorCode.request_timed_out if timed_out else ErrorCode.not_controller
                raise KafkaError(code, reason)
            backoff_ms = min(MAX_BACKOFF_MS, self.retry_backoff_ms * (2 ** min(attempt, 10)))
            attempt += 1
            log.debug("controller_call_retry", api=rpc.__name__.rsplit(".", 1)[-1],
                      reason=reason, backoff_ms=backoff_ms)
            await asyncio.sleep(min(left, backoff_ms / 1000))
