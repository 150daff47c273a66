"""The node's side of the metadata quorum: the Raft driver on the metadata log.

Committed batches go to the MetadataPublisher in order; snapshots are the image encoded
by broker/metadata/snapshot.py. The controller is active only once this node leads AND
the LeaderChange batch of its epoch is committed and applied: from then on the image
holds everything committed before, so the pure controller never sees a stale image.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping
from random import Random
from typing import Any

import structlog
from kio.schema.errors import ErrorCode

from broker.config import NodeConfig
from broker.metadata.log_store import MetadataLogStore
from broker.metadata.publisher import MetadataPublisher
from broker.metadata.snapshot import decode_snapshot, encode_snapshot
from broker.protocol.api import API_VERSIONS, ApiTable
from broker.protocol.frames import ResponseChunks
from broker.protocol.transport import ConnectionSecurity
from broker.server.context import RequestContext
from broker.server.dispatch import Dispatcher
from broker.util.tasks import ServiceTasks
from raft.config import RaftConfig
from raft.driver import RaftDriver, TcpTransport
from raft.kafka_messages import RAFT_APIS
from raft.messages import Batch, SnapshotId
from raft.stores.file import FileQuorumStateStore

log = structlog.get_logger(__name__)

# Kafka names these quorum keys; the node config holds them with their defaults.
_RAFT_KEYS = (
    "controller.quorum.election.timeout.ms",
    "controller.quorum.fetch.timeout.ms",
    "controller.quorum.election.backoff.max.ms",
    "controller.quorum.append.linger.ms",
    "controller.quorum.request.timeout.ms",
    "controller.quorum.retry.backoff.ms",
    "metadata.log.max.record.bytes.between.snapshots",
    "metadata.max.idle.interval.ms",
    "controller.quorum.fetch.snapshot.max.bytes",
)


def raft_config(cfg: NodeConfig, cluster_id: str) -> RaftConfig:
    props = {
        "node.id": str(cfg.node_id),
        "metadata.log.dir": str(cfg.metadata_log_dir),
        "cluster.id": cluster_id,
    }
    if cfg.voters:
        props["controller.quorum.voters"] = ",".join(
            f"{v.node_id}@{v.host}:{v.port}" for v in cfg.voters)
    if cfg.bootstrap_servers:
        # KIP-853: the voter set comes from the log; the quorum is found through these
        # (RaftConfig refuses both at once rather than ignore one)
        props["controller.quorum.bootstrap.servers"] = ",".join(
            f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in cfg.bootstrap_servers)
    for key in _RAFT_KEYS:
        if cfg.get(key) is not None:
            props[key] = str(cfg[key])
    return RaftConfig.from_properties(props)


def controller_api_table() -> ApiTable:
    """What the controller listener advertises: the KRaft RPCs the Raft driver serves, the
    controller APIs brokers send to the active controller (broker/controller/rpc/), and what
    an admin client bootstrapped from controllers sends (KIP-919): DescribeCluster,
    DescribeConfigs, the config changes (at Kafka's whole version ranges), DescribeAcls and
    DescribeUserScramCredentials, at the versions Kafka 4.4's controller listener lists."""
    from broker.controller.rpc import CONTROLLER_RPCS

    return ApiTable.of(
        (API_VERSIONS, 0, 4), *((k, lo, hi) for k, (lo, hi) in RAFT_APIS.items()),
        *((k, lo, hi) for k, (_m, lo, hi) in _CONTROLLER_ADMIN_APIS.items()),
        *((m.API_KEY, *CONTROLLER_LISTENER_RANGES.get(
              m.API_KEY, (getattr(m, "MIN_VERSION", m.VERSION), m.VERSION)))
          for m in CONTROLLER_RPCS))


# api key -> (handler module under broker.handlers, lowest, highest version): the admin
# APIs the controller listener serves with the broker's own handlers (KIP-919).
_CONTROLLER_ADMIN_APIS: dict[int, tuple[str, int, int]] = {
    60: ("describe_cluster_controller", 0, 2),
    32: ("describe_configs", 1, 4),
    29: ("describe_acls", 1, 3),
    50: ("describe_user_scram_credentials", 0, 0),
}
# Controller RPCs an operator's admin client may send too, at Kafka's ranges (the codecs
# parse any version and answer in it): AlterConfigs, IncrementalAlterConfigs.
CONTROLLER_LISTENER_RANGES: dict[int, tuple[int, int]] = {33: (0, 2), 44: (0, 1)}


class LiveControllers(Mapping[int, tuple[str, int]]):
    """Controller id -> controller listener (host, port) from the quorum's current voter set
    (KIP-853: dynamic voters live in the metadata log), for the broker's controller
    channel when there is no static controller.quorum.voters."""

    def __init__(self, driver: RaftDriver) -> None:
        self.driver = driver

    def __getitem__(self, node_id: int) -> tuple[str, int]:
        addr = self.driver.address_of(node_id) if node_id >= 0 else None
        if addr is None:
            raise KeyError(node_id)
        return addr.host, addr.port

    def __iter__(self) -> Iterator[int]:
        return iter(sorted(v.node_id for v in self.driver.core.voter_set if v.endpoints))

    def __len__(self) -> int:
        return sum(1 for v in self.driver.core.voter_set if v.endpoints)


class MetadataQuorumDriver:
    def __init__(
        self, cfg: NodeConfig, cluster_id: str, publisher: MetadataPublisher,
        clock: Callable[[], int], *, security: ConnectionSecurity | None = None,
    ) -> None:
        """`security`: how the controller listener is secured (the Raft driver's connections)."""
        self.cfg = cfg
        self.cluster_id = cluster_id
        self.publisher = publisher
        self.clock = clock
        self.store = MetadataLogStore(cfg.metadata_log_dir)
        rcfg = raft_config(cfg, cluster_id)
        from broker.metadata.storage import metadata_directory_id, read_bootstrap_voters

        self.driver = RaftDriver(
            rcfg, self.store, FileQuorumStateStore(self.store.dir),
            transport=TcpTransport(rcfg, security=security), rng=Random(),
            directory_id=metadata_directory_id(cfg),
            bootstrap_voters=(read_bootstrap_voters(cfg.metadata_log_dir)
                              if cfg.is_controller and not cfg.voters else None),
        )
        self.driver.snapshot_provider = self._snapshot
        self.driver.register(self)
        self._active_epoch = -1
        self._leader_epoch = -1
        # the last leader other than this node, and the one this node took over from when
        # it was elected (the controller activation's `deposed`), -1 if none
        self._last_other_leader = -1
        self.deposed_leader = -1
        self._on_leader: list[Callable[[], Awaitable[None]]] = []
        self._on_leader_change: list[Callable[[int, int], None]] = []
        self._tasks = ServiceTasks("metadata_quorum")  # the controller activation callbacks

    # ---- what the controller service needs -------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self.driver.is_leader and self._active_epoch == self.driver.leader_and_epoch[1]

    async def append(self, records: list[bytes]) -> int:
        return await self.driver.append(records)

    @property
    def kraft_version(self) -> int:
        return int(self.driver.core.kraft_version)

    async def upgrade_kraft_version(self, version: int, *,
                                    validate_only: bool = False) -> tuple[ErrorCode, str]:
        """KIP-853's upgrade of a static quorum: its voters, under the first
        controller.listener.names entry, become a Voters record in the log."""
        return await self.driver.upgrade_kraft_version(
            version, self.cfg.controller_listener_names[0], validate_only=validate_only)

    def on_become_leader(self, callback: Callable[[], Awaitable[None]]) -> None:
        """`callback` runs each time this node's controller becomes active."""
        self._on_leader.append(callback)

    def add_leader_listener(self, callback: Callable[[int, int], None]) -> None:
        """`callback(leader_id, epoch)` runs (on the event loop, at once) each time the
        quorum's leader changes, -1 while an election is on."""
        self._on_leader_change.append(callback)

    # ---- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        await self.driver.start()

    async def stop(self) -> None:
        await self._tasks.close()
        await self.driver.stop()
        self.store.close()

    def dispatcher(self) -> Dispatcher:
        dispatcher = Dispatcher()
        for api_key in RAFT_APIS:
            dispatcher.register(api_key, self._handle)
        import importlib

        from broker.controller.rpc import CONTROLLER_RPCS
        from broker.handlers import api_versions

        dispatcher.register_module(api_versions)
        for module_name, _lo, _hi in _CONTROLLER_ADMIN_APIS.values():
            dispatcher.register_module(importlib.import_module(f"broker.handlers.{module_name}"))
        for module in CONTROLLER_RPCS:
            dispatcher.register_module(module)
        from broker.handlers._authz import guard_controller_listener

        return guard_controller_listener(dispatcher)

    async def _handle(self, node: object, ctx: RequestContext, request: Any) -> Any:
        response = await self.driver.handle_request(ctx.api_key, ctx.api_version, request)
        if isinstance(response, bytes):  # a Fetch answer from raft's narrow encoder
            return ResponseChunks.of_bytes(response)
        return response

    # ---- RaftListener ------------------------------------------------------------------

    def on_commit(self, batches: list[Batch]) -> None:
        for batch in batches:
            if batch.control:
                self.publisher.advance_offset(batch.last_offset, batch.epoch, batch.timestamp)
            else:
                self.publisher.apply_committed(batch.last_offset, batch.epoch, batch.records,
                                               batch.timestamp)
            if (
                batch.epoch == self._leader_epoch and self._active_epoch != batch.epoch
                and self.driver.is_leader
            ):
                self._activate(batch.epoch)

    def on_snapshot_load(self, snapshot_id: SnapshotId, data: bytes) -> None:
        image = decode_snapshot(data)
        log.info("metadata_snapshot_loaded", end_offset=snapshot_id.end_offset,
                 epoch=snapshot_id.epoch, topics=len(image.topics_by_id))
        self.publisher.load_snapshot(image)

    def on_leader_change(self, leader_id: int, epoch: int) -> None:
        log.info("metadata_leader_changed", leader=leader_id, epoch=epoch)
        if leader_id == self.cfg.node_id:
            self.deposed_leader, self._last_other_leader = self._last_other_leader, -1
        elif leader_id >= 0:
            self._last_other_leader = leader_id
        self._leader_epoch = epoch if leader_id == self.cfg.node_id else -1
        if leader_id != self.cfg.node_id:
            self._active_epoch = -1
        for callback in self._on_leader_change:
            try:
                callback(leader_id, epoch)
            except Exception:
                log.exception("leader_change_callback_failed")

    def _snapshot(self, end_offset: int) -> bytes:
        return encode_snapshot(self.publisher.image, self.clock())

    def _activate(self, epoch: int) -> None:
        self._active_epoch = epoch
        log.info("controller_activated", epoch=epoch, metadata_offset=self.publisher.image.offset)
        for callback in self._on_leader:
            self._tasks.start_soon(self._run_callback, callback, name="controller_activation")

    async def _run_callback(self, callback: Callable[[], Awaitable[None]]) -> None:
        try:
            await callback()
        except Exception:
            log.exception("controller_activation_callback_failed")
