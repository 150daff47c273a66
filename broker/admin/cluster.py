"""ClusterService and QuorumService."""

from __future__ import annotations

import datetime
import uuid
from typing import TYPE_CHECKING, Any

import grpc
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32, i32Timedelta, u16

from broker.admin.convert import broker_state, registration
from broker.admin.errors import AdminError, S, rpc_errors
from broker.admin.forward import Forwarder, controller_id, forwards_writes
from broker.admin.pb import cluster, cluster_grpc, meta
from broker.admin.quorum import QuorumDescriber, QuorumInfo, ReplicaInfo, describe_at
from broker.admin.services import AdminServices
from broker.errors import KafkaError
from broker.protocol.kafka_uuid import kafka_to_uuid

if TYPE_CHECKING:
    from raft.driver import RaftDriver

LEADER_DESCRIBE_TIMEOUT_S = 5.0


class ClusterService(cluster_grpc.ClusterServiceServicer):  # type: ignore[misc]
    def __init__(self, node: AdminServices) -> None:
        self.node = node

    @rpc_errors
    async def DescribeCluster(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        image = self.node.metadata
        active = controller_id(self.node)
        leaders: dict[int, int] = {}
        hosted: dict[int, int] = {}
        for _, _, p in image.iter_partitions():
            leaders[p.leader] = leaders.get(p.leader, 0) + 1
            for r in p.replicas:
                hosted[r] = hosted.get(r, 0) + 1
        brokers = [
            cluster.BrokerDescription(
                registration=registration(reg), state=broker_state(reg),
                is_controller=bid == active, leader_count=leaders.get(bid, 0),
                replica_count=hosted.get(bid, 0))
            for bid, reg in sorted(image.brokers.items())
        ]
        return cluster.DescribeClusterResponse(
            cluster_id=self.node.cluster_id, controller_id=active, brokers=brokers,
            finalized_features=[meta.FeatureLevel(name=n, feature_level=v)
                                for n, v in sorted(image.features.items())],
            metadata_offset=image.offset, metadata_epoch=image.epoch, node_id=self.node.node_id,
        )


    @rpc_errors
    async def UnregisterBroker(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        # The ControllerChannel reaches the active controller wherever it runs.
        error, message = await self.node.controller.unregister_broker(request.broker_id)
        if error is not ErrorCode.none:
            raise KafkaError(error, message or f"broker {request.broker_id}: {error.name}")
        return cluster.UnregisterBrokerResponse()


def _replica(r: ReplicaInfo, hw: int) -> Any:
    lag = max(0, hw - r.log_end_offset) if r.log_end_offset >= 0 else -1
    return cluster.QuorumReplica(
        replica_id=r.replica_id, log_end_offset=r.log_end_offset, lag=lag,
        last_fetch_timestamp_ms=r.last_fetch_timestamp_ms,
        last_caught_up_timestamp_ms=r.last_caught_up_timestamp_ms, directory_id=r.directory_id)


def quorum_response(cluster_id: str, info: QuorumInfo, now_ms: int) -> Any:
    followers = [v for v in info.voters if v.replica_id != info.leader_id]
    lags = [max(0, info.high_watermark - v.log_end_offset) for v in followers
            if v.log_end_offset >= 0]
    caught = [v.last_caught_up_timestamp_ms for v in followers]
    if not followers:
        lag_time = 0
    elif all(c >= 0 for c in caught):
        lag_time = max(0, now_ms - min(caught))
    else:
        lag_time = -1
    return cluster.DescribeQuorumResponse(
        cluster_id=cluster_id, leader_id=info.leader_id, leader_epoch=info.leader_epoch,
        high_watermark=info.high_watermark,
        voters=[_replica(v, info.high_watermark)
                for v in sorted(info.voters, key=lambda r: r.replica_id)],
        observers=[_replica(o, info.high_watermark)
                   for o in sorted(info.observers, key=lambda r: r.replica_id)],
        max_follower_lag=max(lags, default=0), max_follower_lag_time_ms=lag_time,
    )


_QUORUM = cluster.DESCRIPTOR.services_by_name["QuorumService"]


class QuorumService(cluster_grpc.QuorumServiceServicer):  # type: ignore[misc]
    def __init__(self, node: AdminServices, describe: QuorumDescriber,
                 forwarder: Forwarder | None = None) -> None:
        self.node = node
        self.describe = describe
        self.forwarder = forwarder

    @rpc_errors
    @forwards_writes(_QUORUM, on=ErrorCode.not_leader_or_follower)
    async def DescribeQuorum(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            info = await self.describe()
        except KafkaError as exc:
            if exc.error_code is not ErrorCode.not_leader_or_follower:
                raise
            leader = controller_id(self.node)
            address = None if self.forwarder is None else self.forwarder.address_of(leader)
            voters = self.node.controller.voters
            if leader < 0 or address is not None or leader not in voters:
                raise  # forwarded to the leader's admin listener (or refused) by the decorator
            # the leader is a controller without an admin address here: ask its controller
            # listener, as kafka-metadata-quorum does
            host, port = voters[leader]
            timeout = min(LEADER_DESCRIBE_TIMEOUT_S, context.time_remaining() or 1e9)
            try:
                info = await describe_at(host, port, timeout,
                                         self.node.controller_security)
            except KafkaError as err:
                raise AdminError(S.UNAVAILABLE, f"node {leader}, the metadata quorum leader as "
                                                f"node {self.node.node_id} knows it, answered "
                                                f"{err.error_code.name.upper()}: the "
                                                "leadership is moving; retry") from None
            except (OSError, TimeoutError) as err:
                raise AdminError(S.UNAVAILABLE, f"the metadata quorum leader (node {leader}) "
                                                f"did not answer at {host}:{port}: {err!r}; "
                                                "retry") from None
        return quorum_response(self.node.cluster_id, info, self.node.clock())

    # ---- KIP-853 -----------------------------------------------------------------------

    def _driver(self) -> RaftDriver:
        if self.node.quorum is None:
            raise AdminError(S.UNIMPLEMENTED, "this node runs no metadata quorum driver")
        return self.node.quorum.driver

    async def _voter_change(self, api_key: int, version: int, request: Any,
                            timeout_ms: int, what: str) -> Any:
        driver = self._driver()
        timeout_s = (timeout_ms or VOTER_CHANGE_TIMEOUT_MS) / 1000
        try:
            resp = await driver.request_voter_change(api_key, version, request, timeout_s + 5)
        except (OSError, TimeoutError, ConnectionError) as exc:
            raise AdminError(S.UNAVAILABLE, f"{what}: the metadata quorum leader did not "
                                            f"answer ({exc!r}); retry") from None
        err = ErrorCode(int(resp.error_code))
        if err != ErrorCode.none:
            text = getattr(resp, "error_message", None) or err.name.upper()
            code = _VOTER_ERRORS.get(err, S.INTERNAL)
            raise AdminError(code, f"{what}: {text} ({err.name.upper()})")
        return driver.leader_and_epoch[0]

    @rpc_errors
    async def AddController(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        from kio.schema.add_raft_voter.v1.request import AddRaftVoterRequest, Listener

        if not request.endpoints:
            raise AdminError(S.INVALID_ARGUMENT, "add-controller: the controller's listener "
                                                 "endpoint is required")
        timeout_ms = request.timeout_ms or VOTER_CHANGE_TIMEOUT_MS
        req = AddRaftVoterRequest(
            cluster_id=self.node.cluster_id,
            timeout=i32Timedelta.parse(datetime.timedelta(milliseconds=timeout_ms)),
            voter_id=i32(request.controller_id),
            voter_directory_id=_dir_id(request.directory_id),
            listeners=tuple(Listener(name=e.name, host=e.host, port=u16(e.port))
                            for e in request.endpoints),
            ack_when_committed=True)
        leader = await self._voter_change(80, 1, req, timeout_ms,
                                          f"add controller {request.controller_id}")
        return cluster.AddControllerResponse(leader_id=leader)

    @rpc_errors
    async def RemoveController(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        from kio.schema.remove_raft_voter.v0.request import RemoveRaftVoterRequest

        req = RemoveRaftVoterRequest(cluster_id=self.node.cluster_id,
                                     voter_id=i32(request.controller_id),
                                     voter_directory_id=_dir_id(request.directory_id))
        leader = await self._voter_change(81, 0, req, request.timeout_ms,
                                          f"remove controller {request.controller_id}")
        return cluster.RemoveControllerResponse(leader_id=leader)


VOTER_CHANGE_TIMEOUT_MS = 30_000
_VOTER_ERRORS = {
    ErrorCode.duplicate_voter: S.ALREADY_EXISTS,
    ErrorCode.voter_not_found: S.NOT_FOUND,
    ErrorCode.invalid_request: S.INVALID_ARGUMENT,
    ErrorCode.unsupported_version: S.FAILED_PRECONDITION,
    ErrorCode.not_leader_or_follower: S.UNAVAILABLE,
    ErrorCode.request_timed_out: S.UNAVAILABLE,
    ErrorCode.inconsistent_cluster_id: S.FAILED_PRECONDITION,
}


def _dir_id(text: str) -> uuid.UUID | None:
    if not text:
        return None
    try:
        return kafka_to_uuid(text)
    except ValueError:
        raise AdminError(S.INVALID_ARGUMENT, f"{text!r} is not a directory id") from None
