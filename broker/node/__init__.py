"""One Skiff process: logs, the metadata quorum, the controller, metadata, the server.

Startup order: storage check -> log recovery -> Raft (replays the metadata log into the
image) -> listeners -> broker registration and heartbeats. Shutdown reverses it (a broker
first shuts down in a controlled way: its leaderships move before it stops) and ends with
the log manager's clean-shutdown marker, so the next start skips recovery.

Roles (`process.roles`):
  * controller: a Raft voter with a ControllerService and the controller listener; no
    broker listener, partitions, group coordinator or registration;
  * broker: a Raft observer that follows the metadata log; no controller service and no
    controller listener; every controller operation goes through `node.controller`, a
    ControllerChannel to the active controller;
  * both (combined): as the two together; the channel calls the local service while this
    node's controller is active and the remote one otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import random
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import structlog
from kio.schema.errors import ErrorCode

from broker import native
from broker.admin import AdminServer, admin_listeners, describe_raft
from broker.admin.readiness import READY, Readiness, broker_readiness
from broker.config import BROKER_CONFIGS, NodeConfig
from broker.controller import (
    AssignReplicasToDirsRequest,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    Controller,
    ControllerSettings,
)
from broker.controller.channel import ControllerChannel
from broker.controller.requests import (
    AlterPartitionReply,
    AlterPartitionRequest,
    AssignReplicasToDirsReply,
    ControllerRegistrationRequest,
)
from broker.controller.service import ControllerService
from broker.errors import KafkaError
from broker.group.shell import GroupCoordinatorService, on_txn_marker_written
from broker.handlers import BROKER_HANDLERS, broker_dispatcher
from broker.handlers._quotas import RequestTimeQuota
from broker.handlers._quotas import now_ms as quota_clock_ms
from broker.handlers.init_producer_id import node_producer_ids
from broker.log import LogManager
from broker.metadata.features import supported_features
from broker.metadata.image import MetadataImage
from broker.metadata.publisher import MetadataPublisher
from broker.metadata.records import RESOURCE_CLIENT_METRICS
from broker.metadata.snapshot import encode_snapshot
from broker.metadata.storage import ensure_formatted, read_bootstrap
from broker.metrics.stats import NodeStats
from broker.metrics.telemetry import TelemetryStore
from broker.node.quorum import LiveControllers, MetadataQuorumDriver, controller_api_table
from broker.node.shard_channel import ShardChannelClient
from broker.node.shard_routing import ShardOps, ShardRoutes, sharded_dispatcher
from broker.node.shards import ShardLayout
from broker.node.workers import NodeWorkers, share_quota_usage
from broker.protocol.api import BROKER_APIS, ApiTable, floors_table
from broker.quotas.connections import ConnectionQuotas, connection_limits, limits_in_effect
from broker.quotas.core import Quotas
from broker.replication import (
    ClusterView,
    ReplicaFetcherManager,
    ReplicaManager,
    ReplicationSettings,
)
from broker.replication.fetcher import secured_connect
from broker.replication.sync import ReplicaSync, log_config_for
from broker.security.client import controller_security, inter_broker_security
from broker.security.plugins import principal_builder_for
from broker.security.sasl_config import server_sasl_for
from broker.security.scram import ScramCredential, TokenLookup
from broker.security.tls import server_tls_for
from broker.server import ListenerSpec, Server, ServerConfig, advertised_apis
from broker.server.dispatch import BoundDispatcher
from broker.share.coordinator_shell import ShareCoordinatorService
from broker.share.shell import share_service_of
from broker.txn.shell import TransactionCoordinatorService
from broker.util.tasks import ServiceTasks, TaskHandle

if TYPE_CHECKING:
    from broker.controller.rpc._common import ControllerNode
    from broker.handlers._context import (
        ControllerListenerNode,
        CoordinatorsBroker,
        GroupsBroker,
        StreamsBroker,
        TxnOffsetCommitBroker,
    )
    from broker.handlers.api_versions import FeatureSource
    from broker.handlers.init_producer_id import InitProducerIdNode, ProducerIdManager
    from broker.metrics.collectors import ElectionCounter
    from broker.metrics.exporter import MetricsServer
    from broker.protocol.transport import ConnectionSecurity
    from broker.security.delegation_token import TokenCredentials
    from broker.share.shell import ShareNode, ShareService

log = structlog.get_logger(__name__)
CLEAN_SHUTDOWN_FILE = ".skiff_cleanshutdown"
STOP_STEP_TIMEOUT_S = 10.0
# a worker that does not answer a scrape in time is left out of it (skiff_broker_worker_up 0)
WORKER_SCRAPE_TIMEOUT_S = 5.0
# How often the active controller looks for expired broker sessions. A tick that fences
# nothing appends nothing, so it is cheap; it bounds how late a fence can be.
CONTROLLER_TICK_MS = 100
ASSIGN_DIRS_INTERVAL_S = 0.2
ASSIGN_DIRS_MAX_PER_REQUEST = 5000
# answers after which an assignment is not sent again: taken, or about a replica the
# controller no longer has here (the metadata that follows removes it)
_ASSIGNMENT_SETTLED = frozenset({ErrorCode.none, ErrorCode.unknown_topic_id,
                                 ErrorCode.unknown_topic_or_partition,
                                 ErrorCode.not_leader_or_follower})
# A tick this much later than due finds the process was stalled: the next one fences.
CONTROLLER_STALL_S = 0.25


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def controller_channel_timeouts(cfg: NodeConfig) -> dict[str, float]:
    """How long this node waits for the active controller (broker/controller/channel.py).
    A heartbeat or registration attempt must not outlast a good part of the session: a
    paused controller would otherwise hold every heartbeat until the broker is fenced. Any
    other call (AlterPartition, producer id blocks, forwarded admin writes) waits up to
    controller.socket.timeout.ms for its answer, Kafka's request timeout of the broker's
    channel to the controller."""
    return {
        "attempt_timeout_s": min(cfg["controller.quorum.request.timeout.ms"],
                                 cfg["broker.session.timeout.ms"] // 3) / 1000,
        "default_timeout_s": cfg["controller.socket.timeout.ms"] / 1000,
    }


def server_config_for(cfg: NodeConfig) -> ServerConfig:
    """The socket.* and connections.* keys a node's listeners (and its workers') use."""
    return ServerConfig(
        socket_request_max_bytes=cfg["socket.request.max.bytes"],
        connections_max_idle_ms=cfg["connections.max.idle.ms"],
        send_buffer_bytes=cfg["socket.send.buffer.bytes"],
        receive_buffer_bytes=cfg["socket.receive.buffer.bytes"],
        listen_backlog=cfg["socket.listen.backlog.size"],
        network_threads=cfg["num.network.threads"],
    )


def quotas_for(cfg: NodeConfig) -> Quotas:
    """The client quotas' windows (quota.window.* and controller.quota.window.*)."""
    return Quotas(cfg["quota.window.num"], cfg["quota.window.size.seconds"] * 1000,
                  cfg["controller.quota.window.num"],
                  cfg["controller.quota.window.size.seconds"] * 1000)


def dynamic_broker_configs(image: MetadataImage, node_id: int) -> Mapping[str, str]:
    """A broker's dynamic configs over the cluster default (AlterConfigs)."""
    default, own = image.broker_config(), image.broker_config(node_id)
    if not own:
        return default
    return {**default, **own} if default else own


def cordoned_log_dirs(config: NodeConfig, dynamic: Mapping[str, str],
                      log_dirs: Iterable[Path]) -> frozenset[Path]:
    """KIP-1066: the log dirs `cordoned.log.dirs` names now: the broker's dynamic value or
    the cluster default's (kafka-configs --alter --entity-type brokers), else the file's."""
    from broker.config.types import ConfigError
    from broker.log.manager import CORDONED_LOG_DIRS, cordoned_paths

    raw = dynamic.get(CORDONED_LOG_DIRS)
    entries: list[str] = list(config[CORDONED_LOG_DIRS] or [])
    if raw is not None:
        try:
            entries = list(BROKER_CONFIGS[CORDONED_LOG_DIRS].parse(raw) or [])
        except ConfigError:
            log.warning("cordoned_log_dirs_unreadable", value=raw)
    return cordoned_paths(entries, log_dirs)


async def assign_dirs_loop(
    replicas: Callable[[], ReplicaManager | None], node_id: int,
    broker_epoch: Callable[[], int],
    send: Callable[[AssignReplicasToDirsRequest], Awaitable[AssignReplicasToDirsReply]],
) -> None:
    """Tell the controller where replicas live (AssignReplicasToDirs), as they are placed,
    moved, or lost with their dir; a worker's go through its node (`send`)."""
    while True:
        await asyncio.sleep(ASSIGN_DIRS_INTERVAL_S)
        manager = replicas()
        pending = {} if manager is None else dict(manager.pending_assignments)
        if manager is None or not pending or broker_epoch() < 0:
            continue
        batch = dict(list(pending.items())[:ASSIGN_DIRS_MAX_PER_REQUEST])
        by_wire = {(tid, k[1]): k for k, (tid, _d) in batch.items()}
        try:
            reply = await send(AssignReplicasToDirsRequest(
                broker_id=node_id, broker_epoch=broker_epoch(),
                assignments=[(d, tid, k[1]) for k, (tid, d) in batch.items()]))
        except (KafkaError, ConnectionError) as exc:
            log.debug("assign_replicas_to_dirs_failed", error=str(exc))
            continue
        if reply.error is not ErrorCode.none:
            log.debug("assign_replicas_to_dirs_refused", error=reply.error.name)
            continue
        done = {by_wire[(tid, i)]: batch[by_wire[(tid, i)]]
                for _d, tid, i, err in reply.results
                if (tid, i) in by_wire and err in _ASSIGNMENT_SETTLED}
        manager.assignments_sent(done)


class MetadataCredentials:
    """What a listener's SASL reads of the metadata log: SCRAM credentials
    (UserScramCredentialRecord) and live delegation tokens; the node's and its workers'."""

    def __init__(self, config: NodeConfig, metadata: Callable[[], Any]) -> None:
        self.config = config
        self.metadata = metadata
        self._tokens: TokenCredentials | None = None

    def scram(self, mechanism: str, user: str) -> ScramCredential | None:
        creds = getattr(self.metadata(), "scram_credentials", None)
        return None if creds is None else creds.get((mechanism, user))

    def token(self, mechanism: str, token_id: str) -> TokenLookup | None:
        """A live delegation token's SCRAM credential (derived from its HMAC), owner name
        and expiry, for SCRAM with tokenauth=true (broker/security/delegation_token.py)."""
        if self._tokens is None:
            from broker.security.delegation_token import DelegationTokenSettings, TokenCredentials

            self._tokens = TokenCredentials(
                DelegationTokenSettings.from_config(self.config),
                lambda: getattr(self.metadata(), "delegation_tokens", None))
        found = self._tokens.lookup(mechanism, token_id)
        return None if found is None else (found.credential, found.owner_name, found.expiry_ms)

    def listener(self, name: str, host: str, port: int, apis: ApiTable,
                 dispatcher: BoundDispatcher) -> ListenerSpec:
        """A listener of `listeners` with its TLS, SASL and principal builder."""
        return ListenerSpec(name, host, port, apis, dispatcher,
                            tls=server_tls_for(self.config, name),
                            sasl=server_sasl_for(self.config, name, self.scram, self.token),
                            principal_builder=principal_builder_for(self.config, name))


class RegistrationTimedOut(Exception):
    """The broker's first registration did not succeed within
    initial.broker.registration.timeout.ms: the node stops, as Kafka's broker shuts down."""


class Node:
    def __init__(self, config: NodeConfig) -> None:
        self.config = config
        self.node_id = config.node_id
        self.cluster_id = ""
        self.clock = wall_clock_ms
        self.incarnation_id = uuid.uuid4()
        self.broker_epoch = -1
        self.previous_broker_epoch = -1
        self.ready = asyncio.Event()
        # what this broker's latest heartbeat answer said (registered brokers start fenced)
        self.fenced = True
        self.tasks = ServiceTasks("node")
        self._lifecycle: TaskHandle | None = None
        # why start() failed while the lifecycle registered (RegistrationTimedOut)
        self.startup_failure: Exception | None = None
        # made by start(), for every role: read through the properties below once started
        self._logs: LogManager | None = None
        self._replicas: ReplicaManager | None = None
        self._fetchers: ReplicaFetcherManager | None = None
        self._publisher: MetadataPublisher | None = None
        self._quorum: MetadataQuorumDriver | None = None
        self._controller: ControllerChannel | None = None
        self.replica_sync: ReplicaSync | None = None
        self.inter_broker_security: ConnectionSecurity | None = None
        self.controller_security: ConnectionSecurity | None = None
        self.controller_service: ControllerService | None = None
        # delegation tokens' SCRAM credentials, made on first use
        self.credentials = MetadataCredentials(config, lambda: self.metadata)
        self.controlled_shutdown_done = False
        # set when the metadata quorum gets a new leader: the broker heartbeats the new
        # controller at once (its activation grace fences brokers that stay silent)
        self._heartbeat_now = asyncio.Event()
        self._heartbeat_now_leader = -1
        self.controller_server: Server | None = None  # None on a broker-only node
        self.admin: AdminServer | None = None
        # None on a controller-only node (and until a broker is ready)
        self.group_coordinator: GroupCoordinatorService | None = None
        self.txn_coordinator: TransactionCoordinatorService | None = None
        self.share_coordinator: ShareCoordinatorService | None = None
        # share groups (KIP-932) and producer ids: made on first use (share_service_of,
        # node_producer_ids)
        self.share_groups: ShareService | None = None
        self.producer_ids: ProducerIdManager | None = None
        self.broker_server: Server | None = None  # None on a controller-only node
        # skiff.broker.workers: this process is worker 0 of `layout.count`
        self.layout = ShardLayout(config["skiff.broker.workers"], 0)
        self.workers: NodeWorkers | None = None
        self._local_dispatcher: BoundDispatcher | None = None
        self.stats: NodeStats | None = None  # metrics counters (None: metrics.listeners empty)
        self.metrics_server: MetricsServer | None = None
        self.election_counter: ElectionCounter | None = None  # a controller with metrics
        self.quotas = quotas_for(config)
        # One for the node, as Kafka's ConnectionQuotas is one per SocketServer: the
        # controller and broker listeners share max.connections and the per-ip counts.
        self.connection_quotas = ConnectionQuotas(connection_limits(config))
        self.telemetry = TelemetryStore(
            list(config["client.telemetry.metrics"]),
            config["client.telemetry.push.interval.ms"], config["telemetry.max.bytes"],
            resources=lambda: {name: cfg for (rtype, name), cfg in self.metadata.configs.items()
                               if rtype == RESOURCE_CLIENT_METRICS})

    @staticmethod
    def _started(part: str) -> AttributeError:
        # AttributeError, as before the member was declared: start() has not made it yet
        return AttributeError(f"the node's {part} is made by start(), which has not reached it")

    @property
    def logs(self) -> LogManager:
        if self._logs is None:
            raise self._started("logs")
        return self._logs

    @logs.setter
    def logs(self, logs: LogManager) -> None:
        self._logs = logs

    @property
    def replicas(self) -> ReplicaManager:
        if self._replicas is None:
            raise self._started("replica manager")
        return self._replicas

    @replicas.setter
    def replicas(self, replicas: ReplicaManager) -> None:
        self._replicas = replicas

    @property
    def fetchers(self) -> ReplicaFetcherManager:
        if self._fetchers is None:
            raise self._started("replica fetchers")
        return self._fetchers

    @fetchers.setter
    def fetchers(self, fetchers: ReplicaFetcherManager) -> None:
        self._fetchers = fetchers

    @property
    def publisher(self) -> MetadataPublisher:
        if self._publisher is None:
            raise self._started("metadata publisher")
        return self._publisher

    @publisher.setter
    def publisher(self, publisher: MetadataPublisher) -> None:
        self._publisher = publisher

    @property
    def quorum(self) -> MetadataQuorumDriver:
        if self._quorum is None:
            raise self._started("metadata quorum")
        return self._quorum

    @quorum.setter
    def quorum(self, quorum: MetadataQuorumDriver) -> None:
        self._quorum = quorum

    @property
    def controller(self) -> ControllerChannel:
        if self._controller is None:
            raise self._started("controller channel")
        return self._controller

    @controller.setter
    def controller(self, controller: ControllerChannel) -> None:
        self._controller = controller

    @property
    def metadata(self) -> MetadataImage:
        return self.publisher.image

    @property
    def kraft_version(self) -> int:
        """The metadata quorum's kraft.version (0 static voters, 1 voters in the log)."""
        quorum = self._quorum
        return 0 if quorum is None else int(quorum.driver.core.kraft_version)

    # ---- lifecycle ---------------------------------------------------------------

    async def start(self) -> None:
        cfg = self.config
        self.cluster_id = ensure_formatted(cfg)
        self.previous_broker_epoch = self._take_clean_shutdown_epoch()
        log.info("node_starting", node_id=self.node_id, cluster_id=self.cluster_id,
                 roles=sorted(cfg.process_roles), config=cfg.summary(),
                 compiled_modules=native.STATUS.reason)
        self._start_metrics()

        layout = self.layout
        self.logs = LogManager(
            list(cfg.log_dirs), log_config_for(cfg, {}), self.clock,
            retention_check_interval_ms=cfg["log.retention.check.interval.ms"],
            owns=layout.owns if layout.sharded else None,
        )
        self.logs.load()
        self.logs.dir_failure_listeners.append(self._log_dir_failed)
        self.logs.cordoned = self._cordoned_log_dirs
        self.logs.start()
        cluster = ClusterView(lambda: self.metadata, cfg.inter_broker_listener_name)
        self.replicas = ReplicaManager(
            self.node_id, self.logs, self.clock,
            settings=ReplicationSettings.from_config(cfg),
            alter_partition=lambda req: self.controller.alter_partition(req),
            broker_epoch=lambda: self.broker_epoch,
            rack_of=cluster.rack_of, isr_eligible=cluster.isr_eligible,
        )
        if self.stats is not None:
            self.replicas.topic_stats = self.stats.topics
        self.inter_broker_security = inter_broker_security(cfg)
        self.controller_security = controller_security(cfg)
        self.fetchers = ReplicaFetcherManager(self.replicas, address_of=cluster.address_of)
        if self.inter_broker_security is not None:
            self.fetchers.connect = secured_connect(self.inter_broker_security)
        controller_security_ = self.controller_security

        self.publisher = MetadataPublisher(self.cluster_id)
        self.replica_sync = replica_sync = ReplicaSync(
            cfg, self.replicas, owns=layout.owns if layout.sharded else None)
        if cfg.is_broker:
            self.publisher.subscribe(replica_sync)
        self.quorum = MetadataQuorumDriver(cfg, self.cluster_id, self.publisher, self.clock,
                                           security=controller_security_)
        if cfg.is_broker:
            self.quorum.add_leader_listener(self._metadata_leader_changed)
        if cfg.is_controller:
            self.controller_service = ControllerService(
                Controller(ControllerSettings.from_config(cfg, self.cluster_id),
                           rng=random.Random()),
                self.quorum, self.publisher, self.clock,
            )
            self.quorum.on_become_leader(self._on_become_controller)
            if self.stats is not None:
                from broker.metrics.collectors import ElectionCounter

                self.election_counter = counter = ElectionCounter(lambda: self.quorum.is_leader)
                self.publisher.subscribe(counter)
        self.controller = ControllerChannel(
            self.node_id, ({v.node_id: (v.host, v.port) for v in cfg.voters} if cfg.voters
                           else LiveControllers(self.quorum.driver)),
            lambda: int(self.quorum.driver.leader_and_epoch[0]), self.controller_service,
            retry_backoff_ms=cfg["controller.quorum.retry.backoff.ms"],
            **controller_channel_timeouts(cfg),
            wait_applied=self.publisher.wait_for_offset,
            security=controller_security_,
        )
        server_config = server_config_for(cfg)
        # The controller listener serves Raft before anything else can happen; the client
        # listener opens only once this broker is registered and unfenced, so clients never
        # see a node that does not yet know the cluster's metadata. A broker-only node has
        # no controller listener: it follows the metadata log as a Raft observer.
        if self.controller_service is not None:
            self.controller_server = controller_server = Server(
                self._controller_listeners(), server_config,
                on_connection_closed=self.controller_service.connection_closed,
                stats=self.stats.server if self.stats is not None else None,
                connection_quotas=self.connection_quotas,
                client_quotas=lambda: self.metadata.client_quotas,
                dynamic_configs=self._dynamic_broker_configs)
            await controller_server.start()
        await self.quorum.start()
        self.admin = admin = AdminServer(
            self, admin_listeners(cfg),
            describe_quorum=describe_raft(self.quorum.driver.core, self.clock,
                                          self.quorum.driver._now),
            readiness=self.readiness,
        )
        await admin.start()

        if cfg.is_controller:
            self.tasks.start_soon(self._controller_loop, name="controller_loop")
            self.tasks.start_soon(self._register_controller, name="controller_registration")
        if cfg.is_broker:
            self._lifecycle = self.tasks.start_soon(self._broker_lifecycle,
                                                     name="broker_lifecycle")
            self.tasks.start_soon(self._assign_dirs_loop, name="assign_replicas_to_dirs")
            await self._until_ready()
            self.replicas.start()
            self.fetchers.start()
            self.group_coordinator = group_coordinator = GroupCoordinatorService(
                self, share_records_loaded=self._share_service)
            group_coordinator.start()
            # markers reaching __consumer_offsets complete TxnOffsetCommit's pending offsets
            self.replicas.txn_marker_listener = self._txn_marker_written
            self.txn_coordinator = txn_coordinator = TransactionCoordinatorService(
                self, node_producer_ids(self).generate, security=self.inter_broker_security,
                listener_name=cfg.inter_broker_listener_name)
            txn_coordinator.start()
            # KIP-932: the share-partition states in __share_group_state
            self.share_coordinator = share_coordinator = ShareCoordinatorService(self)
            share_coordinator.start()
            broker_listeners = self._broker_listeners()
            if layout.sharded:
                await self._start_workers(broker_listeners)
            self.broker_server = broker_server = Server(
                broker_listeners, server_config,
                stats=self.stats.server if self.stats is not None else None,
                request_quota=RequestTimeQuota(lambda: self.metadata.client_quotas,
                                               self.quotas.request),
                connection_quotas=self.connection_quotas,
                client_quotas=lambda: self.metadata.client_quotas,
                dynamic_configs=self._dynamic_broker_configs)
            if self.workers is not None:
                broker_server.hand_off = self.workers.hand_off
            await broker_server.start()
        else:
            self.ready.set()

    def readiness(self) -> Readiness:
        """What the admin plane's `skiff.readiness` health service reports
        (broker/admin/readiness.py): a broker is ready when unfenced, not shutting down,
        and its replicas are in sync; a controller-only node once started."""
        if not self.ready.is_set():
            return Readiness(False, "starting: not yet registered and unfenced")
        if not self.config.is_broker:
            return READY
        return broker_readiness(self.metadata, self.node_id, self.fenced)

    def _dynamic_broker_configs(self) -> Mapping[str, str]:
        return dynamic_broker_configs(self.metadata, self.node_id)

    def _share_service(self) -> ShareService:
        return share_service_of(self)

    def _txn_marker_written(self, topic: str, partition: int, producer_id: int,
                            committed: bool) -> None:
        on_txn_marker_written(self, topic, partition, producer_id, committed)

    async def stop(self) -> None:
        """Stops whatever `start` got to, in reverse order; the logs are closed last. A
        registered broker first shuts down in a controlled way (bounded)."""
        log.info("node_stopping", node_id=self.node_id)
        if (self.config.is_broker and self.broker_epoch >= 0 and self._controller is not None
                and self.config["controlled.shutdown.enable"]):
            await self.controlled_shutdown(self.config["controlled.shutdown.timeout.ms"] / 1000)
        with anyio.move_on_after(STOP_STEP_TIMEOUT_S):  # a task that hangs is left behind
            await self.tasks.close()
        if self.admin is not None:
            await self._stop_step("admin", self.admin.stop())
        if self.group_coordinator is not None:
            await self._stop_step("group_coordinator", self.group_coordinator.stop())
        if self.txn_coordinator is not None:
            await self._stop_step("txn_coordinator", self.txn_coordinator.stop())
        if self.share_groups is not None:
            await self._stop_step("share_groups", self.share_groups.close())
        if self.share_coordinator is not None:
            await self._stop_step("share_coordinator", self.share_coordinator.stop())
        if self.broker_server is not None:
            await self._stop_step("broker_server", self.broker_server.stop())
        if self.workers is not None:
            await self._stop_step("workers", self.workers.stop())
        if self.controller_server is not None:
            await self._stop_step("controller_server", self.controller_server.stop())
        if self._controller is not None:
            await self._stop_step("controller_channel", self._controller.close())
        if self._quorum is not None:
            await self._stop_step("quorum", self._quorum.stop())
        if self._fetchers is not None:
            await self._stop_step("replica_fetchers", self._fetchers.stop())
        if self._replicas is not None:
            await self._stop_step("isr_check", self._replicas.stop())
        if self.metrics_server is not None:
            await self._stop_step("metrics", self.metrics_server.stop())
        if self.replica_sync is not None:
            await self._stop_step("replica_sync", self.replica_sync.close())
        if self._replicas is not None:
            for part in list(self._replicas.partitions()):
                part.close()
        if self._logs is not None:
            self._logs.stop()
            self._logs.shutdown()
            if self.broker_epoch >= 0:
                self._write_clean_shutdown_epoch()
        log.info("node_stopped", node_id=self.node_id)

    def _start_metrics(self) -> None:
        """The metrics endpoint first, so a taken port fails the start at once and a node
        waiting for its quorum can already be watched."""
        from broker.metrics.exporter import METRICS_LISTENERS_KEY, parse_metrics_listeners

        listeners = parse_metrics_listeners(self.config[METRICS_LISTENERS_KEY])
        if not listeners:
            log.info("metrics_disabled", reason=f"{METRICS_LISTENERS_KEY} is empty")
            return
        from broker.metrics.collectors import node_families
        from broker.metrics.exporter import MetricsServer

        self.stats = NodeStats()

        def own() -> list[Any]:
            return node_families(self, publisher=self._publisher, replicas=self._replicas,
                                 fetchers=self._fetchers, quorum=self._quorum)

        if self.layout.count == 1:
            self.metrics_server = MetricsServer(listeners, own)
        else:
            self.metrics_server = MetricsServer(
                listeners, lambda: self._gather_metrics(own()), process=False)
        self.metrics_server.start()

    async def _gather_metrics(self, own: list[Any]) -> list[Any]:
        """A broker of several workers: this process's families and every worker's, merged
        (broker/metrics/merge.py); `skiff_broker_worker_up` says which workers answered."""
        from prometheus_client.core import GaugeMetricFamily

        from broker.metrics.merge import merge_families, process_families

        own = own + process_families()
        up = GaugeMetricFamily("skiff_broker_worker_up", "1 when the worker process of this "
                               "broker answered the scrape (skiff.broker.workers)",
                               labels=["worker"])
        up.add_metric(["0"], 1)
        indexes = list(range(1, self.layout.count))
        calls: list[Any] = []
        for index in indexes:
            channel = None if self.workers is None else self.workers.channel_of(index)
            calls.append(None if channel is None else asyncio.wait_for(
                channel.call("metrics"), WORKER_SCRAPE_TIMEOUT_S))
        answers = await asyncio.gather(*(c for c in calls if c is not None),
                                       return_exceptions=True)
        it = iter(answers)
        others: list[Any] = []
        for index, call in zip(indexes, calls, strict=True):
            answer = None if call is None else next(it)
            ok = answer is not None and not isinstance(answer, BaseException)
            up.add_metric([str(index)], 1 if ok else 0)
            if ok:
                others.append(answer)
            elif answer is not None:
                log.warning("worker_metrics_missing", worker=index, error=repr(answer))
        return merge_families([*own, up], others)

    async def _stop_step(self, step: str, stopping: Awaitable[None]) -> None:
        """One part of the shutdown, bounded: a part that hangs is logged, cancelled and
        left behind (asyncio.wait, unlike wait_for, never waits for a cancellation the part
        may ignore), so the logs are still closed cleanly and the process exits."""
        started = time.monotonic()
        task = asyncio.ensure_future(stopping)
        done, _ = await asyncio.wait({task}, timeout=STOP_STEP_TIMEOUT_S)
        if not done:
            task.cancel()
            log.warning("stop_step_timed_out", step=step, timeout_s=STOP_STEP_TIMEOUT_S)
            return
        if not task.cancelled() and task.exception() is not None:
            log.error("stop_step_failed", step=step, error=repr(task.exception()))
        took_ms = round((time.monotonic() - started) * 1000)
        if took_ms > 1000:
            log.info("stop_step_slow", step=step, took_ms=took_ms)

    # KIP-966: a broker that stopped cleanly names its last broker epoch when it registers
    # again, so the controller keeps it eligible (ELR); Kafka keeps it in the clean-shutdown
    # file. Read once and removed, so a later crash is never mistaken for a clean stop.

    @property
    def _clean_shutdown_file(self) -> Path:
        return self.config.metadata_log_dir / CLEAN_SHUTDOWN_FILE

    def _take_clean_shutdown_epoch(self) -> int:
        path = self._clean_shutdown_file
        try:
            doc = json.loads(path.read_text()[:4096])
            epoch = int(doc["brokerEpoch"])
        except (OSError, ValueError, KeyError, TypeError):
            epoch = -1
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return epoch

    def _write_clean_shutdown_epoch(self) -> None:
        tmp = self._clean_shutdown_file.with_suffix(".tmp")
        tmp.write_text(json.dumps({"version": 0, "brokerEpoch": self.broker_epoch}))
        os.replace(tmp, self._clean_shutdown_file)

    def _controller_listeners(self) -> list[ListenerSpec]:
        return [
            self.credentials.listener(lst.name, lst.host, lst.port, controller_api_table(),
                                      self.quorum.dispatcher().bind(self))
            for lst in self.config.listeners
            if lst.name in self.config.controller_listener_names
        ]

    def _broker_listeners(self) -> list[ListenerSpec]:
        dispatcher = broker_dispatcher(BROKER_HANDLERS).bind(self)
        # what the other workers' hand-overs run here: this process's own handlers
        self._local_dispatcher = dispatcher
        if self.layout.sharded:
            dispatcher = sharded_dispatcher(self.layout, self._worker_channel, dispatcher,
                                            dispatcher.api_keys())
        apis = floors_table(BROKER_APIS, self.config["skiff.min.api.versions"])
        return [
            self.credentials.listener(lst.name, lst.host, lst.port, apis, dispatcher)
            for lst in self.config.listeners
            if lst.name not in self.config.controller_listener_names
        ]

    # ---- a broker of several workers (broker/node/shards.py) ----------------------

    def _worker_channel(self, index: int) -> ShardChannelClient | None:
        return None if self.workers is None else self.workers.channel_of(index)

    async def _start_workers(self, listeners: list[ListenerSpec]) -> None:
        """Workers 1..N-1, before this process opens the client port: they serve their
        partitions, and the connections it hands them, from the first connection on."""
        local = self._local_dispatcher
        assert local is not None  # made by _broker_listeners
        # a worker's request answered here sees the worker listener's advertised APIs (its
        # ApiVersions, forwarded here, lists the SASL APIs of a SASL listener)
        by_name = {spec.name: (local, advertised_apis(spec)) for spec in listeners}
        ops = ShardOps(self.replicas, by_name.get).ops()
        ops["alter_partition"] = self._worker_alter_partition
        ops["assign_replicas_to_dirs"] = self._worker_assign_dirs
        _, ops["quota_usage"] = share_quota_usage(self.quotas, self.layout,
                                                  self._worker_channel, quota_clock_ms)
        self.workers = workers = NodeWorkers(
            self.layout, self.config, ops,
            snapshot=lambda: encode_snapshot(self.publisher.image),
            keep_connections=lambda: limits_in_effect(
                self.connection_quotas.limits, self._dynamic_broker_configs(),
                self.metadata.client_quotas))
        self.publisher.taps.append(workers.tap)
        self.replicas.shard_router = ShardRoutes(self.layout, self.replicas,
                                                 self._worker_channel)
        await workers.start([(spec.name, spec.host, spec.port) for spec in listeners])

    async def _worker_alter_partition(self, peer: object, request: AlterPartitionRequest
                                      ) -> AlterPartitionReply:
        """A worker's ISR change, sent to the controller as this broker's (its epoch)."""
        return await self.controller.alter_partition(
            dataclasses.replace(request, broker_epoch=self.broker_epoch))

    # ---- controller side ---------------------------------------------------------

    async def _on_become_controller(self) -> None:
        assert self.controller_service is not None
        self.controller_service.activate(self.quorum.deposed_leader)
        bootstrap = read_bootstrap(self.config.metadata_log_dir)
        records = Controller.bootstrap_records(self.publisher.image, bootstrap)
        if records:
            await self.controller_service.append_records(records)
            log.info("metadata_bootstrapped", records=len(records))

    async def _controller_loop(self) -> None:
        """The active controller's periodic work: fence expired broker sessions every
        CONTROLLER_TICK_MS; with auto.leader.rebalance.enable, preferred-leader elections
        every leader.imbalance.check.interval.seconds."""
        service = self.controller_service
        assert service is not None
        cfg = self.config
        interval = min(CONTROLLER_TICK_MS, cfg["broker.heartbeat.interval.ms"]) / 1000
        rebalance_every = cfg["leader.imbalance.check.interval.seconds"]
        loop = asyncio.get_running_loop()
        next_rebalance = loop.time() + rebalance_every
        deferred = False
        while True:
            slept_from = loop.time()
            await asyncio.sleep(interval)
            late = loop.time() - slept_from - interval
            if late > CONTROLLER_STALL_S and not deferred:
                # This process was stalled (a long apply, a snapshot, no CPU): heartbeats
                # that arrived meanwhile still wait unread in the sockets. Fencing now would
                # fence brokers for this node's stall; the next tick comes after they are
                # read (ClusterControlManager.heartbeat_received). Once only, so a node
                # stalled over and over still fences.
                deferred = True
                log.info("controller_tick_deferred", stalled_ms=round(late * 1000))
                continue
            deferred = False
            if cfg["auto.leader.rebalance.enable"] and loop.time() >= next_rebalance:
                next_rebalance = loop.time() + rebalance_every
                try:
                    moved = await service.rebalance_leaders(
                        cfg["leader.imbalance.per.broker.percentage"])
                    if moved:
                        log.info("leaders_rebalanced", partitions=moved)
                except KafkaError as exc:
                    if exc.error_code is not ErrorCode.not_controller:
                        log.warning("leader_rebalance_failed", error=str(exc))
            try:
                await service.tick()
            except KafkaError as exc:
                if exc.error_code is not ErrorCode.not_controller:
                    log.warning("controller_tick_failed", error=str(exc))

    # ---- broker side ---------------------------------------------------------------

    async def _until_ready(self) -> None:
        """Until this broker is registered and unfenced; raises RegistrationTimedOut when the
        lifecycle gave up on its first registration."""
        assert self._lifecycle is not None
        ready = asyncio.ensure_future(self.ready.wait())
        ended = asyncio.ensure_future(self._lifecycle.wait())
        try:
            await asyncio.wait([ready, ended], return_when=asyncio.FIRST_COMPLETED)
        finally:
            ready.cancel()
            ended.cancel()
        if self.startup_failure is not None:
            raise self.startup_failure

    async def _broker_lifecycle(self) -> None:
        """Register with the controller, then heartbeat until told otherwise.

        A live broker that finds itself fenced (its session expired: the process was
        paused, or starved of CPU) heartbeats at a short interval until the controller
        unfences it again, which it does on the first heartbeat of a caught-up broker. A
        heartbeat refused with STALE_BROKER_EPOCH or BROKER_ID_NOT_REGISTERED means the
        controller no longer knows this registration: the broker registers again (same
        incarnation) instead of heartbeating a dead epoch forever. When the connection that
        carried the latest heartbeat closes, the next heartbeat goes at once (on a new
        connection): the controller fences a broker whose heartbeat connection closed and
        that has not heartbeated since for broker.session.disconnect.timeout.ms, which is
        shorter than the heartbeat interval."""
        cfg = self.config
        interval = cfg["broker.heartbeat.interval.ms"] / 1000
        fast = min(0.02, interval)
        timeout_ms = cfg["initial.broker.registration.timeout.ms"]
        try:
            await self._register(give_up_at=time.monotonic() + timeout_ms / 1000)
        except RegistrationTimedOut as exc:
            log.error("broker_registration_timed_out", error=str(exc))
            self.startup_failure = exc
            return
        self.fenced = True  # registered brokers start fenced
        while True:
            self._heartbeat_now.clear()  # this heartbeat goes to the leader known now
            try:
                beat = await self.controller.broker_heartbeat(BrokerHeartbeatRequest(
                    broker_id=self.node_id, broker_epoch=self.broker_epoch,
                    current_metadata_offset=self.publisher.image.offset,
                    want_fence=False, want_shut_down=False,
                    offline_log_dirs=self._offline_dir_ids(),
                    # none until caught up: an old image could uncordon what is cordoned
                    cordoned_log_dirs=None if self.fenced else self.logs.cordoned_dir_ids(),
                ))
                if beat.error is ErrorCode.none and not beat.is_fenced:
                    if self.fenced:
                        log.info("broker_unfenced", broker_epoch=self.broker_epoch)
                    self.fenced = False
                    self.ready.set()
                elif beat.error is ErrorCode.none:
                    if not self.fenced:
                        log.warning("broker_fenced_by_controller", broker_epoch=self.broker_epoch,
                                    reason="session expired (process paused or starved?)",
                                    session_timeout_ms=cfg["broker.session.timeout.ms"])
                    self.fenced = True
                elif beat.error in (ErrorCode.stale_broker_epoch,
                                    ErrorCode.broker_id_not_registered):
                    log.warning("broker_heartbeat_refused", error=beat.error.name,
                                broker_epoch=self.broker_epoch, action="registering again")
                    self.broker_epoch = -1
                    self.previous_broker_epoch = -1
                    self.fenced = True
                    await self._register()
                    continue
                else:
                    log.warning("broker_heartbeat_refused", error=beat.error.name,
                                broker_epoch=self.broker_epoch)
            except KafkaError as exc:
                log.debug("broker_heartbeat_failed", error=str(exc))
            except Exception:
                # Whatever goes wrong with one heartbeat, the loop goes on: a lifecycle task
                # that ended here would leave a live broker fenced for good, silently.
                log.exception("broker_heartbeat_error", broker_epoch=self.broker_epoch)
                self.fenced = True
            await self._until_next_heartbeat(fast if self.fenced else interval, fast)

    def _metadata_leader_changed(self, leader_id: int, epoch: int) -> None:
        """The metadata quorum has a new leader (Raft's LeaderChanged): heartbeat it at once.
        A newly active controller fences an unfenced broker that has not heartbeated to it
        within 2 x broker.heartbeat.interval.ms of its activation (cluster_control.py), so
        a broker must not wait out its interval; a node that died with the old controller
        never heartbeats, and its partitions move that soon instead of after a session."""
        if leader_id >= 0:
            self._heartbeat_now_leader = leader_id
            self._heartbeat_now.set()

    async def _until_next_heartbeat(self, delay: float, floor: float) -> None:
        """Wait `delay`, or less once the latest heartbeat's connection has closed or the
        metadata quorum's leader changed (but at least `floor`, so a controller that closes
        every connection gets no busy loop)."""
        closed = self.controller.heartbeat_connection_closed
        if delay <= floor:
            await asyncio.sleep(delay)
            return
        await asyncio.sleep(floor)
        if not self._heartbeat_now.is_set() and not (closed is not None and closed.done()):
            leader_changed: asyncio.Future[Any] = asyncio.ensure_future(
                self._heartbeat_now.wait())
            waits: list[asyncio.Future[Any]] = [leader_changed]
            if closed is not None:
                waits.append(closed)
            try:
                await asyncio.wait(waits, timeout=delay - floor,
                                   return_when=asyncio.FIRST_COMPLETED)
            finally:
                leader_changed.cancel()
        if self._heartbeat_now.is_set():
            log.info("broker_heartbeat_new_controller", leader=self._heartbeat_now_leader,
                     action="heartbeating at once")
        elif closed is not None and closed.done():
            log.info("broker_heartbeat_connection_closed", action="heartbeating at once")

    async def _register(self, give_up_at: float | None = None) -> None:
        """Register until the controller gives this broker an epoch. The first registration
        gives up at `give_up_at` (time.monotonic(); initial.broker.registration.timeout.ms)
        with RegistrationTimedOut, as Kafka's broker shuts down then; a registration again
        (the controller forgot this one) retries for as long as it takes."""
        cfg = self.config
        last_refusal: ErrorCode | None = None
        last_problem = "no answer from the controller quorum"
        while self.broker_epoch < 0:
            if give_up_at is not None and time.monotonic() >= give_up_at:
                raise RegistrationTimedOut(
                    "the broker could not register with the controller quorum within "
                    f"initial.broker.registration.timeout.ms "
                    f"({cfg['initial.broker.registration.timeout.ms']} ms): {last_problem}")
            try:
                reply = await self.controller.register_broker(BrokerRegistrationRequest(
                    broker_id=self.node_id, cluster_id=self.cluster_id,
                    incarnation_id=self.incarnation_id,
                    previous_broker_epoch=self.previous_broker_epoch,
                    listeners=self._advertised_endpoints(), rack=cfg["broker.rack"],
                    log_dirs=self._online_dir_ids(),
                    features=supported_features(),
                ))
                if reply.error is ErrorCode.none:
                    self.broker_epoch = reply.broker_epoch
                    log.info("broker_registered", broker_epoch=self.broker_epoch)
                else:
                    last_problem = ("the last attempt was refused with "
                                    f"{reply.error.name.upper()}")
                    if reply.error is not last_refusal:
                        # e.g. DUPLICATE_BROKER_REGISTRATION until the session of this
                        # node's previous (killed) process expires: said once, retried quietly
                        last_refusal = reply.error
                        log.warning("broker_registration_refused", error=reply.error.name,
                                    message=reply.message)
            except KafkaError as exc:
                last_problem = f"the last attempt failed: {exc}"
                log.debug("broker_registration_retry", error=str(exc))
            except Exception as exc:
                last_problem = f"the last attempt failed: {exc!r}"
                log.exception("broker_registration_error")
            if self.broker_epoch < 0:
                await asyncio.sleep(0.05)

    # ---- log dirs (KIP-858) ----------------------------------------------------------

    def _online_dir_ids(self) -> list[uuid.UUID]:
        logs = self._logs  # None before start() opens them
        return [] if logs is None else [logs.dir_id(d) for d in logs.online_dirs]

    def _cordoned_log_dirs(self) -> frozenset[Path]:
        return cordoned_log_dirs(self.config, self._dynamic_broker_configs(),
                                 self.logs.log_dirs)

    def _offline_dir_ids(self) -> list[uuid.UUID]:
        logs = self._logs
        return [] if logs is None else [logs.dir_id(d) for d in logs.log_dirs
                                        if d in logs.offline_dirs]

    def _log_dir_failed(self, d: Path) -> None:
        """A log dir went offline (LogManager.fail_dir, from any thread). The next heartbeat
        reports it; with no log dir left, or the metadata log's dir gone, the process stops
        at once, as Kafka halts."""
        if not self.logs.online_dirs:
            self.halt(f"all log dirs have failed ({', '.join(map(str, self.logs.log_dirs))})")
        elif d == self.config.metadata_log_dir:
            self.halt(f"the metadata log dir {d} has failed")

    @staticmethod
    def halt(reason: str) -> None:
        log.critical("node_halting", reason=reason)
        os._exit(1)

    async def _assign_dirs_loop(self) -> None:
        await assign_dirs_loop(lambda: self._replicas, self.node_id,
                               lambda: self.broker_epoch,
                               lambda req: self.controller.assign_replicas_to_dirs(req))

    async def _worker_assign_dirs(self, peer: object, request: AssignReplicasToDirsRequest
                                  ) -> AssignReplicasToDirsReply:
        """A worker's replica placements, sent to the controller as this broker's."""
        return await self.controller.assign_replicas_to_dirs(
            dataclasses.replace(request, broker_epoch=self.broker_epoch))

    async def controlled_shutdown(self, timeout_s: float) -> bool:
        """Heartbeat with WantShutDown until the controller answers ShouldShutDown (it first
        moves this broker's leaderships and ISR memberships away), for at most `timeout_s`.
        Gives up early once no controller has answered for broker.session.timeout.ms: the
        quorum is gone (e.g. the last nodes of a cluster stop), and a controller that comes
        back fences this broker anyway. Returns whether the controller agreed in time; the
        caller stops either way."""
        if self.controlled_shutdown_done:
            return True
        if self._lifecycle is not None:
            self._lifecycle.cancel()  # its plain heartbeats would undo nothing, but add noise
        loop = asyncio.get_running_loop()
        started = loop.time()
        deadline = started + timeout_s
        last_answer = started
        session_s = self.config["broker.session.timeout.ms"] / 1000
        attempt_s = self.config["controller.quorum.request.timeout.ms"] / 1000
        interval = min(0.1, self.config["broker.heartbeat.interval.ms"] / 1000)
        log.info("controlled_shutdown_started", broker_epoch=self.broker_epoch)
        while loop.time() < deadline:
            if loop.time() - last_answer > session_s:
                log.warning("controlled_shutdown_abandoned",
                            reason=f"no controller answered for {session_s:.1f}s")
                return False
            try:
                beat = await asyncio.wait_for(
                    self.controller.broker_heartbeat(BrokerHeartbeatRequest(
                        broker_id=self.node_id, broker_epoch=self.broker_epoch,
                        current_metadata_offset=self.publisher.image.offset,
                        want_fence=False, want_shut_down=True,
                    )), max(0.01, min(attempt_s, deadline - loop.time())))
                last_answer = loop.time()
                if beat.error is ErrorCode.none and beat.should_shut_down:
                    self.controlled_shutdown_done = True
                    log.info("controlled_shutdown_complete", broker_epoch=self.broker_epoch,
                             took_ms=int((loop.time() - started) * 1000))
                    return True
                if beat.error is not ErrorCode.none:
                    log.debug("controlled_shutdown_heartbeat_error", error=beat.error.name)
            except (KafkaError, TimeoutError) as exc:
                log.debug("controlled_shutdown_heartbeat_failed", error=str(exc))
            await asyncio.sleep(min(interval, max(0.0, deadline - loop.time())))
        log.warning("controlled_shutdown_timed_out", timeout_s=timeout_s)
        return False

    async def _register_controller(self) -> None:
        """KIP-919: tell the active controller this controller's listeners and supported
        feature ranges (a RegisterController record), retried until it is accepted; a
        refusal (a finalized level this release does not support) is logged once."""
        req = ControllerRegistrationRequest(
            controller_id=self.node_id, incarnation_id=self.incarnation_id,
            listeners=[(lst.name, lst.host, lst.port,
                        self.config.security_protocol_map.get(lst.name, "PLAINTEXT"))
                       for lst in self.config.controller_listeners],
            features=supported_features())
        last: ErrorCode | None = None
        backoff = 0.05  # the first try usually races the controller's activation
        while True:
            try:
                reply = await self.controller.register_controller(req)
                if reply.error is ErrorCode.none:
                    log.info("controller_registered")
                    return
                if reply.error is not last:
                    last = reply.error
                    log.warning("controller_registration_refused", error=reply.error.name,
                                message=reply.message)
            except KafkaError as exc:
                log.debug("controller_registration_retry", error=str(exc))
            await asyncio.sleep(backoff)
            backoff = min(0.5, backoff * 2)

    def _advertised_endpoints(self) -> list[tuple[str, str, int, str]]:
        out = []
        for lst in self.config.advertised_listeners:
            if lst.name in self.config.controller_listener_names:
                continue
            protocol = self.config.security_protocol_map.get(lst.name, "PLAINTEXT")
            out.append((lst.name, lst.host, lst.port, protocol))
        if self.admin is not None:
            out.extend(self.admin.advertised_endpoints())  # lets other nodes forward writes here
        return out


if TYPE_CHECKING:
    def _serves_the_handlers(node: Node) -> tuple[
            GroupsBroker, StreamsBroker, TxnOffsetCommitBroker, CoordinatorsBroker,
            InitProducerIdNode, ShareNode, FeatureSource, ControllerListenerNode,
            ControllerNode]:
        """mypy's check that a Node has what each handler's Protocol reads: the servers hand
        the node to handlers they know only as modules, so no call checks it."""
        return node, node, node, node, node, node, node, node, node


def data_dir_overrides(data: Path, port: int, controller_port: int) -> dict[str, str]:
    """The embedded defaults of `skiff dev`: one combined node on 127.0.0.1."""
    return {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@127.0.0.1:{controller_port}",
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "log.dirs": str(data / "logs"),
        "metadata.log.dir": str(data / "metadata"),
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        # the admin plane without credentials, for callers on this host only
        "admin.allow.unauthenticated": "loopback",
    }
