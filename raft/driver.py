"""Runs the KRaft core on asyncio and carries its RPCs as kio messages.

The node's network server dispatches Vote, BeginQuorumEpoch, EndQuorumEpoch,
DescribeQuorum, Fetch and FetchSnapshot to `handle_request`; outbound RPCs go
through `Transport` (broker/protocol/transport.py).  The controller appends through
`append` and learns of commits, snapshots and leadership through listeners.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import functools
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from random import Random
from typing import Any, Protocol

import structlog
from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType

from broker.protocol.transport import ConnectionSecurity, KafkaConnection
from broker.util.tasks import ServiceTasks
from raft.config import RaftConfig, VoterAddress
from raft.control import Endpoint, Voter, VoterSet, snapshot_payload
from raft.core import NotLeaderError, RaftCore
from raft.kafka_messages import (
    ADD_RAFT_VOTER,
    DESCRIBE_QUORUM,
    METADATA_TOPIC,
    RAFT_APIS,
    REMOVE_RAFT_VOTER,
    VOTER_APIS,
    VOTER_CODEC,
    WireError,
    build,
    decode_request,
    decode_response,
    error_response,
    outbound,
    response_body,
    schema_module,
)
from raft.messages import (
    Batch,
    FetchRequest,
    FetchResponse,
    LeaderChanged,
    LogStateLost,
    Request,
    Response,
    Send,
    SnapshotId,
    SnapshotLoaded,
    SnapshotWanted,
)
from raft.roles import Candidate, Follower, Leader, Prospective
from raft.store import LogStore, QuorumStateStore

log = structlog.get_logger("raft")

# A timer that fires this late (ms) means the event loop was blocked; the tick then waits
# for a Fetch sent after the stall to come back (the leader may hold it for its fetch wait).
STALL_MS = 250
_ZERO = datetime.timedelta(0)

__all__ = ["NotLeaderError", "RaftDriver", "RaftListener"]


class RaftListener(Protocol):
    def on_commit(self, batches: list[Batch]) -> None:
        """Batches (control ones included) up to the high watermark, in order."""

    def on_snapshot_load(self, snapshot_id: SnapshotId, data: bytes) -> None:
        """Replace the state with this snapshot; commits continue after it."""

    def on_leader_change(self, leader_id: int, epoch: int) -> None: ...


class Transport(Protocol):
    async def request(self, dst: int, api_key: int, version: int, request: Any,
                      timeout_s: float) -> Any: ...

    async def close(self) -> None: ...


class TcpTransport:
    """Two connections per peer: one for Fetch/FetchSnapshot (long polls), one
    for elections, so a parked Fetch never delays a Vote."""

    def __init__(self, config: RaftConfig, *,
                 security: ConnectionSecurity | None = None) -> None:
        """`security`: how the controller listener is secured (TLS, SASL)."""
        self.config = config
        self.security = security
        self._conns: dict[tuple[int, bool], KafkaConnection] = {}
        # KIP-853: where a voter listens comes from the Voters record (the driver sets
        # this to the core's lookup); static voters and bootstrap servers otherwise
        self.address_of: Callable[[int], VoterAddress | None] = lambda _dst: None

    async def request(self, dst: int, api_key: int, version: int, request: Any,
                      timeout_s: float) -> Any:
        return await self._conn(dst, api_key).request(api_key, version, request, timeout_s)

    def start_request(self, dst: int, api_key: int, version: int, request: Any,
                      timeout_s: float) -> asyncio.Future[Any]:
        """Like `request`, but the frame is written before this returns when the
        connection is up; the future holds the answer."""
        return self._conn(dst, api_key).start_request(api_key, version, request, timeout_s)

    def _conn(self, dst: int, api_key: int) -> KafkaConnection:
        lane = api_key in (1, 59)
        conn = self._conns.get((dst, lane))
        if conn is None:
            addr = self.address_of(dst) or self.config.voters.get(dst)
            if addr is None:
                raise ConnectionError(f"no address known for node {dst}")
            # a request that times out closes its connection, as KRaft's does
            conn = KafkaConnection(addr.host, addr.port, f"raft-{self.config.node_id}",
                                   security=self.security, close_on_timeout=True)
            self._conns[(dst, lane)] = conn
        return conn

    async def close(self) -> None:
        for c in self._conns.values():
            await c.close()


@dataclass
class _Pending:
    records: list[bytes]
    future: asyncio.Future[int]


@dataclass
class _Stats:
    appended_batches: int = 0
    appended_records: int = 0
    commits: int = 0
    snapshots_loaded: int = 0
    snapshots_created: int = 0
    leader_changes: list[tuple[int, int, float]] = field(default_factory=list)
    # appends as the leader, from append() to committed (seconds): sum and count
    commit_latency_sum: float = 0.0
    commit_latency_count: int = 0
    # records a follower or observer got in Fetch answers (Kafka's fetch-records-rate)
    fetched_records: int = 0
    # elections this node stood in, from becoming prospective or candidate to a known
    # leader (Kafka's election-latency-avg/max), seconds: sum, count, largest
    election_latency_sum: float = 0.0
    election_latency_count: int = 0
    election_latency_max: float = 0.0


class RaftDriver:
    def __init__(
        self,
        config: RaftConfig,
        log_store: LogStore,
        state_store: QuorumStateStore,
        transport: Transport | None = None,
        rng: Random | None = None,
        clock: Callable[[], float] = time.monotonic,
        *,
        directory_id: uuid.UUID | None = None,
        bootstrap_voters: VoterSet | None = None,
    ) -> None:
        """`directory_id`: this node's metadata log directory id (meta.properties
        `directory.id`); `bootstrap_voters`: the voter set of the bootstrap checkpoint
        (KIP-853, kraft.version 1), None for static `controller.quorum.voters`."""
        self.config = config
        self.log = log_store
        self._clock = clock
        self._t0 = clock()
        # observers without a voter to ask reach the quorum through
        # controller.quorum.bootstrap.servers, given negative ids here (as Kafka does)
        self._bootstrap = {-(i + 1): a for i, a in enumerate(config.bootstrap_servers)}
        self.core = RaftCore(
            config.node_id, frozenset(config.voters), log_store, state_store,
            rng or Random(), self._now(), config.core_config(),
            wall_offset_ms=time.time_ns() // 1_000_000 - self._now(),
            directory_id=directory_id, bootstrap_voters=bootstrap_voters, codec=VOTER_CODEC,
            discovery_ids=tuple(sorted(self._bootstrap, reverse=True)),
        )
        self.transport: Transport = transport or TcpTransport(config)
        if isinstance(self.transport, TcpTransport):
            self.transport.address_of = self.address_of
        self.listeners: list[RaftListener] = []
        self.snapshot_provider: Callable[[int], bytes] | None = None
        self.stats = _Stats()
        self._inbound: dict[int, asyncio.Future[Response]] = {}
        self._rid = 0
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0
        self._pending: list[_Pending] = []
        self._flush_handle: asyncio.Handle | None = None
        self._waiting: list[tuple[int, asyncio.Future[int]]] = []  # (last offset, future)
        self._delivered = log_store.log_start_offset
        self._bytes_since_snapshot = 0
        self._requests: set[asyncio.Task[Any]] = set()  # requests sent, cancelled by stop
        self._tasks = ServiceTasks("raft")  # learning the leader's endpoints
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False
        self._syncing = False
        self._after_stall = False
        self._deliver_scheduled = False
        self._lost_at_start = self.core.lost_committed_state()
        self._role_type: type = type(self.core.role)
        self._election_started = -1.0  # clock() when this node's election began, or -1
        self._learned: dict[int, VoterAddress] = {}  # endpoints from bootstrap servers
        self._learning = False

    def _now(self) -> int:
        return int((self._clock() - self._t0) * 1000)

    def address_of(self, node_id: int) -> VoterAddress | None:
        """A voter's controller endpoint from the voter set (KIP-853), a bootstrap server
        for a negative id, else None (static voters: the config)."""
        if node_id < 0:
            return self._bootstrap.get(node_id)
        v = self.core.voter(node_id)
        if v is not None and v.endpoints:
            e = v.endpoints[0]
            return VoterAddress(node_id, e.host, e.port)
        return self._learned.get(node_id)

    async def _learn_endpoints(self) -> None:
        """A leader named by a bootstrap server whose address this node does not know yet
        (it has not fetched the voter set): ask the bootstrap servers' DescribeQuorum v2,
        which lists the voters' endpoints (Kafka sends them in Fetch's NodeEndpoints)."""
        from kio.schema.describe_quorum.v2 import request as dq

        q: Any = dq
        req = q.DescribeQuorumRequest(topics=(q.TopicData(
            topic_name=METADATA_TOPIC, partitions=(q.PartitionData(partition_index=0),)),))
        try:
            for bid in sorted(self._bootstrap, reverse=True):
                try:
                    resp = await self.transport.request(
                        bid, DESCRIBE_QUORUM, 2, req, self.config.request_timeout_ms / 1000)
                except (OSError, TimeoutError, ConnectionError, ValueError) as e:
                    log.debug("raft.bootstrap_describe_failed", server=bid, error=repr(e))
                    continue
                for n in resp.nodes:
                    if n.listeners:
                        lst = n.listeners[0]
                        self._learned[int(n.node_id)] = VoterAddress(int(n.node_id),
                                                                     str(lst.host),
                                                                     int(lst.port))
                if self.core.leader_id in self._learned:
                    return
        finally:
            self._learning = False

    # ---------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        snap = self.log.latest_snapshot()
        if snap is not None:
            data = snapshot_payload(self.log.read_snapshot(snap, 0, 1 << 62))
            for lst in self.listeners:
                lst.on_snapshot_load(snap, data)
            self._delivered = snap.end_offset
        self._drain()

    async def stop(self) -> None:
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
        if self._flush_handle is not None:
            self._flush_handle.cancel()
        for t in list(self._requests):
            t.cancel()
        for t in list(self._requests):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        await self._tasks.close()
        await self.transport.close()
        self._fail_waiting()
        for fut in self._inbound.values():
            if not fut.done():
                fut.cancel()

    def register(self, listener: RaftListener) -> None:
        self.listeners.append(listener)

    # ------------------------------------------------------------------ queries

    @property
    def leader_and_epoch(self) -> tuple[int, int]:
        return self.core.leader_id, self.core.epoch

    @property
    def high_watermark(self) -> int:
        return self.core.hw

    @property
    def is_leader(self) -> bool:
        return isinstance(self.core.role, Leader)

    @property
    def leader_ready(self) -> bool:
        """Leader, and every record of earlier epochs is committed and delivered to
        the listeners (this epoch's LeaderChange batch has been), so a state machine
        acting now sees the whole log.  A listener sees the same moment as the commit
        of a control batch of the epoch it was told it leads."""
        r = self.core.role
        return isinstance(r, Leader) and self._delivered > r.epoch_start_offset

    def describe_quorum(self, version: int = 2) -> Any:
        """A DescribeQuorumResponse of `version` (KIP-595 "DescribeQuorum")."""
        m = schema_module(DESCRIBE_QUORUM, version, EntityType.response)
        voters, observers = self.core.replica_progress()
        now = self._now()
        wall = int(time.time() * 1000)

        def state(rid: int, end: int, last_fetch: int, caught_up: int = -2,
                  fetched_dir: uuid.UUID | None = None) -> Any:
            ts = wall - (now - last_fetch) if last_fetch >= 0 else -1
            if caught_up == -2:
                up = ts if end >= self.core.hw else -1
            else:
                up = wall - (now - caught_up) if caught_up >= 0 else -1
            # a voter's directory id is the voter set's; an observer's the one its Fetch
            # named (v17), as Kafka reports it
            v = self.core.voter(rid)
            return build(m, "ReplicaState", replica_id=rid,
                         replica_directory_id=v.directory_id if v is not None else fetched_dir,
                         log_end_offset=end, last_fetch_timestamp=ts,
                         last_caught_up_timestamp=up)

        leader = isinstance(self.core.role, Leader)
        vs = []
        for v in sorted(self.core.voters):
            if v == self.config.node_id and leader:
                vs.append(state(v, self.log.end_offset, now))
            elif v in voters:
                p = voters[v]
                vs.append(state(v, p.end_offset, p.last_fetch_ms, p.caught_up_ms))
            else:
                vs.append(state(v, -1, -1))
        obs = [state(o, p.end_offset, p.last_fetch_ms, p.caught_up_ms, p.directory_id)
               for o, p in sorted(observers.items())]
        err = ErrorCode.none if leader else ErrorCode.not_leader_or_follower
        p = build(m, "PartitionData", partition_index=0, error_code=err, error_message=None,
                  leader_id=self.core.leader_id, leader_epoch=self.core.epoch,
                  high_watermark=self.core.hw, current_voters=tuple(vs), observers=tuple(obs))
        t = build(m, "TopicData", topic_name=METADATA_TOPIC, partitions=(p,))
        # v2 (KIP-853): the voters' endpoints, so a node that found the quorum through a
        # bootstrap server can reach the leader
        nodes = tuple(
            build(m, "Node", node_id=v.node_id, listeners=tuple(
                build(m, "Listener", name=e.name, host=e.host, port=e.port)
                for e in v.endpoints))
            for v in self.core.voter_set if v.endpoints) if hasattr(m, "Node") else ()
        return build(m, "DescribeQuorumResponse", error_code=ErrorCode.none, error_message=None,
                     topics=(t,), nodes=nodes)

    # ------------------------------------------------------------------ inbound

    async def handle_request(self, api_key: int, api_version: int, request: object) -> object:
        lo_hi = RAFT_APIS.get(api_key)
        if lo_hi is None or not lo_hi[0] <= api_version <= lo_hi[1]:
            raise WireError(ErrorCode.unsupported_version, f"api {api_key} v{api_version}")
        if api_key == DESCRIBE_QUORUM:
            return self.describe_quorum(api_version)
        theirs = getattr(request, "cluster_id", None)
        if self.config.cluster_id and theirs is not None and theirs != self.config.cluster_id:
            return error_response(api_key, api_version, ErrorCode.inconsistent_cluster_id)
        if api_key in VOTER_APIS:
            return await self._voter_change(api_key, api_version, request)
        try:
            src, req = decode_request(api_key, request)
        except WireError as e:
            return error_response(api_key, api_version, e.error)
        self._rid += 1
        rid = self._rid
        fut: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        self._inbound[rid] = fut
        try:
            self.core.handle_request(src, rid, req, self._now())
            self._drain()
            resp = await fut
        finally:
            self._inbound.pop(rid, None)
        return response_body(api_key, api_version, resp)

    def _epoch_start(self) -> int:
        r = self.core.role
        return r.epoch_start_offset if isinstance(r, Leader) else 1 << 62

    async def request_voter_change(self, api_key: int, version: int, request: Any,
                                   timeout_s: float) -> Any:
        """AddRaftVoter / RemoveRaftVoter / UpdateRaftVoter for an operator's tool: handled
        here on the leader, else sent to the leader this node knows over the controller
        listener.  Returns the kio response."""
        if self.is_leader:
            return await self._voter_change(api_key, version, request)
        leader = self.core.leader_id
        if leader < 0:
            return error_response(api_key, version, ErrorCode.not_leader_or_follower)
        return await self.transport.request(leader, api_key, version, request, timeout_s)

    async def upgrade_kraft_version(self, version: int, listener_name: str, *,
                                    validate_only: bool = False,
                                    timeout_s: float = 30.0) -> tuple[ErrorCode, str]:
        """KIP-853's kraft.version upgrade of a static quorum, on the leader: the static
        voters (controller.quorum.voters, under `listener_name`) become a Voters record.
        Answered once it is committed; a voter whose directory id the leader has not seen
        yet is retried within the timeout."""
        eps = {i: (Endpoint(listener_name, a.host, a.port),)
               for i, a in self.config.voters.items()}
        until = self._clock() + timeout_s
        err, msg, off = self.core.upgrade_kraft_version(version, eps, self._now(),
                                                        validate_only)
        while (err == ErrorCode.request_timed_out and self.is_leader
               and self._clock() < until):
            await asyncio.sleep(max(0.01, self.config.retry_backoff_ms / 1000))
            err, msg, off = self.core.upgrade_kraft_version(version, eps, self._now(),
                                                            validate_only)
        if err != ErrorCode.none or off < 0:
            return err, msg
        log.info("raft.kraft_version_upgraded", node=self.config.node_id, version=version,
                 offset=off, voters=sorted(self.core.voters))
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._waiting.append((off, fut))
        self._drain()
        try:
            await asyncio.wait_for(fut, max(0.001, until - self._clock()))
        except TimeoutError:
            return ErrorCode.request_timed_out, "the kraft.version upgrade did not commit in time"
        except NotLeaderError:
            return ErrorCode.not_controller, "leadership lost before commit"
        return ErrorCode.none, ""

    async def _voter_change(self, api_key: int, api_version: int, request: Any) -> Any:
        """AddRaftVoter (80), RemoveRaftVoter (81), UpdateRaftVoter (82): KIP-853, on the
        leader.  Answered once the new Voters record is committed, or REQUEST_TIMED_OUT
        when the request's timeout passes first."""
        m = schema_module(api_key, api_version, EntityType.response)
        cls = {ADD_RAFT_VOTER: "AddRaftVoterResponse", REMOVE_RAFT_VOTER:
               "RemoveRaftVoterResponse"}.get(api_key, "UpdateRaftVoterResponse")
        directory = request.voter_directory_id
        if directory == uuid.UUID(int=0):
            directory = None
        now = self._now()
        if api_key == REMOVE_RAFT_VOTER:
            err, msg, off = self.core.remove_voter(int(request.voter_id), directory, now)
        else:
            eps = tuple(Endpoint(str(e.name), str(e.host), int(e.port))
                        for e in request.listeners)
            voter = Voter(int(request.voter_id), directory, eps)
            if api_key == ADD_RAFT_VOTER:
                err, msg, off = self.core.add_voter(voter, now)
                # As Kafka's leader, wait (within the request's timeout) for the new voter
                # to catch up; another change in progress is answered at once.
                timeout = getattr(request, "timeout", None)
                until = self._clock() + (timeout.total_seconds() if timeout else 30.0)
                while (err == ErrorCode.request_timed_out and self.is_leader
                       and self.core.pending_voter_change() < 0
                       and self.high_watermark > self._epoch_start()
                       and self._clock() < until):
                    await asyncio.sleep(max(0.01, self.config.retry_backoff_ms / 1000))
                    err, msg, off = self.core.add_voter(voter, self._now())
            else:
                err, msg, off = self.core.update_voter(voter, now)
        if err == ErrorCode.none and not getattr(request, "ack_when_committed", True):
            self._drain()  # AddRaftVoter v1: answered once appended
        elif err == ErrorCode.none:
            log.info("raft.voter_change", node=self.config.node_id, api=api_key,
                     voter=int(request.voter_id), offset=off,
                     voters=sorted(self.core.voters))
            fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
            self._waiting.append((off, fut))
            self._drain()
            timeout = getattr(request, "timeout", None)
            secs = timeout.total_seconds() if timeout is not None else 30.0
            try:
                await asyncio.wait_for(fut, max(0.001, secs))
            except TimeoutError:
                err, msg = ErrorCode.request_timed_out, "the voter change did not commit in time"
            except NotLeaderError:
                err, msg = ErrorCode.not_leader_or_follower, "leadership lost before commit"
        else:
            self._drain()
        leader = self.core.leader_id
        addr = self.address_of(leader) if leader >= 0 else None
        current = build(m, "CurrentLeader", leader_id=leader, leader_epoch=self.core.epoch,
                        host=addr.host if addr else "", port=addr.port if addr else -1
                        ) if hasattr(m, "CurrentLeader") else None
        return build(m, cls, throttle_time=_ZERO, error_code=err, error_message=msg or None,
                     current_leader=current)

    # ----------------------------------------------------------------- outbound

    def _start_send(self, send: Send) -> None:
        """Send a request; its answer or failure reaches `_on_answer`. A transport with
        `start_request` writes it in this turn of the event loop (a follower's next Fetch
        leaves as soon as the previous answer is handled, with no task hop in between);
        other transports run `request` in a task."""
        req = send.message
        assert isinstance(req, Request.__args__)
        api_key, version, body = outbound(req, self.config.cluster_id)
        wait_ms = req.max_wait_ms if isinstance(req, FetchRequest) else 0
        timeout = (self.config.request_timeout_ms + wait_ms) / 1000
        start = getattr(self.transport, "start_request", None)
        fut: asyncio.Future[Any]
        try:
            if start is not None:
                fut = start(send.dst, api_key, version, body, timeout)
            else:
                fut = asyncio.ensure_future(
                    self.transport.request(send.dst, api_key, version, body, timeout))
        except (OSError, ConnectionError, RuntimeError) as e:
            fut = asyncio.get_running_loop().create_future()
            fut.set_exception(e)
        if isinstance(fut, asyncio.Task):  # a request still running: stop() cancels it
            self._requests.add(fut)
            fut.add_done_callback(self._requests.discard)
        fut.add_done_callback(functools.partial(self._on_answer, send, req, api_key))

    def _on_answer(self, send: Send, req: Request, api_key: int,
                   fut: asyncio.Future[Any]) -> None:
        if self._closed:
            if not fut.cancelled():
                fut.exception()  # retrieved: nobody else will
            return
        try:
            if fut.cancelled():
                raise ConnectionError("request cancelled")
            resp = decode_response(req, fut.result())
        except (OSError, TimeoutError, ConnectionError, ValueError, RuntimeError) as e:
            log.debug("raft.request_failed", dst=send.dst, api=api_key, error=repr(e))
            self.core.handle_failure(send.dst, send.rid, self._now())
            self._drain()
            return
        if type(resp) is FetchResponse and resp.batches:
            self.stats.fetched_records += sum(len(b.records) for b in resp.batches)
        self.core.handle_response(send.dst, send.rid, resp, self._now())
        self._drain()

    def _drain(self) -> None:
        """Act on the core's output: send, resolve answers, deliver commits and
        leadership, complete appends, re-arm the timer."""
        if self._closed:
            return
        out = self.core.take_output()
        if type(self.core.role) is not self._role_type:
            self._role_changed(type(self.core.role))
        requests_sent = False
        for send in out.sends:
            if send.is_response:
                fut = self._inbound.get(send.rid)
                if fut is not None and not fut.done():
                    fut.set_result(send.message)  # type: ignore[arg-type]
            else:
                self._start_send(send)
                requests_sent = True
        if out.flush:
            # queued after the answers just released, so they are written first
            self._start_sync()
        for ev in out.events:
            if isinstance(ev, LeaderChanged):
                self.stats.leader_changes.append((ev.leader_id, ev.epoch, time.time()))
                log.info("raft.leader", node=self.config.node_id, leader=ev.leader_id,
                         epoch=ev.epoch)
                if ev.leader_id != self.config.node_id:
                    self._fail_waiting()
                if (ev.leader_id >= 0 and self._bootstrap and not self._learning
                        and self.address_of(ev.leader_id) is None):
                    self._learning = True
                    self._tasks.start_soon(self._learn_endpoints, name="raft_learn_endpoints")
                for lst in self.listeners:
                    lst.on_leader_change(ev.leader_id, ev.epoch)
            elif isinstance(ev, LogStateLost):
                log.error(
                    "raft.log_lost_committed_state", node=self.config.node_id,
                    log_start_offset=ev.log_start_offset, snapshot_end_offset=ev.snapshot_end,
                    message="the metadata log starts above 0 but no snapshot covers its "
                            "start: committed records are missing from this node's disk. "
                            "It will not vote or stand for election, and applies nothing, "
                            "until it has loaded the leader's snapshot")
            elif isinstance(ev, SnapshotWanted):
                self._snapshot_on_demand()
            elif isinstance(ev, SnapshotLoaded):
                if self.stats.snapshots_loaded == 0 and self._lost_at_start:
                    log.warning("raft.log_recovered_from_snapshot", node=self.config.node_id,
                                end_offset=ev.snapshot_id.end_offset,
                                epoch=ev.snapshot_id.epoch)
                self.stats.snapshots_loaded += 1
                data = snapshot_payload(self.log.read_snapshot(ev.snapshot_id, 0, 1 << 62))
                for lst in self.listeners:
                    lst.on_snapshot_load(ev.snapshot_id, data)
                self._delivered = ev.snapshot_id.end_offset
        if requests_sent and self.core.hw > self._delivered:
            # A follower: its next Fetch is on its way (or in a task queued just now);
            # the state machine gets the commits after that, off the replication path.
            if not self._deliver_scheduled:
                self._deliver_scheduled = True
                (self._loop or asyncio.get_running_loop()).call_soon(self._deliver_later)
        else:
            self._deliver_commits()
        if self._pending and not self._syncing and self._flush_handle is not None:
            # the previous fsync finished: write what gathered meanwhile now
            self._flush_handle.cancel()
            self._flush_handle = None
        if self._pending and self._flush_handle is None:
            self._schedule_flush()
        self._arm_timer()

    def _role_changed(self, role: type) -> None:
        """Times elections in the shell (the core has no clock): one begins when this node
        turns prospective or candidate, and ends when a leader is known (this node leading
        or following); losing rounds and backoffs in between belong to it."""
        self._role_type = role
        if role is Prospective or role is Candidate:
            if self._election_started < 0:
                self._election_started = self._clock()
        elif role is Leader or role is Follower:
            if self._election_started >= 0:
                took = self._clock() - self._election_started
            elif role is Leader:
                took = 0.0  # stood and won within one step of the core: a lone voter
            else:
                return  # told of a leader without standing: no election of this node's
            self._election_started = -1.0
            st = self.stats
            st.election_latency_sum += took
            st.election_latency_count += 1
            st.election_latency_max = max(st.election_latency_max, took)

    def _start_sync(self) -> None:
        if self._syncing:
            return  # the queued fsync will cover this append too: it reads the end then
        self._syncing = True
        loop = self._loop or asyncio.get_running_loop()
        # Run after the callbacks already queued, which write this turn's Fetch answers:
        # the followers get the records first, and the fsync overlaps their work.  (A
        # thread would too, but on a busy machine its GIL hand-offs cost more.)
        loop.call_soon(self._sync)

    def _sync(self) -> None:
        epoch, end = self.core.epoch, self.log.end_offset
        try:
            self.log.sync()
        except OSError as e:
            log.warning("raft.sync_failed", error=str(e))
            self._syncing = False
            if not self._closed:
                self._start_sync()
            return
        self._syncing = False
        if self._closed:
            return
        self.core.flushed(epoch, end, self._now())
        self._drain()

    def _deliver_later(self) -> None:
        self._deliver_scheduled = False
        if not self._closed:
            self._deliver_commits()

    def _deliver_commits(self) -> None:
        hw = self.core.hw
        if hw > self._delivered:
            pos = self._delivered
            while pos < hw:
                batches = self.log.read(pos, 1 << 20)
                if not batches:
                    break
                out: list[Batch] = []
                for b in batches:
                    if b.next_offset <= pos or b.base_offset >= hw:
                        continue
                    if b.base_offset < pos or b.next_offset > hw:
                        lo, hi = max(pos, b.base_offset), min(hw, b.next_offset)
                        b = Batch(lo, b.epoch, b.records[lo - b.base_offset: hi - b.base_offset],
                                  b.control, timestamp=b.timestamp,
                                  control_type=b.control_type)
                    out.append(b)
                    pos = b.next_offset
                    self._bytes_since_snapshot += b.size_bytes
                if not out:
                    break
                self.stats.commits += len(out)
                for lst in self.listeners:
                    lst.on_commit(out)
            self._delivered = pos
            self._maybe_snapshot()
        if self._waiting:
            keep = []
            for last, fut in self._waiting:
                if last < hw:
                    if not fut.done():
                        fut.set_result(last)
                else:
                    keep.append((last, fut))
            self._waiting = keep

    def _maybe_snapshot(self) -> None:
        limit = self.config.max_record_bytes_between_snapshots
        if self.snapshot_provider is None or self._bytes_since_snapshot < limit:
            return
        end = self._delivered
        if end <= self.log.log_start_offset:
            return
        data = self.snapshot_provider(end)
        self.create_snapshot(end, data)

    def _snapshot_on_demand(self) -> None:
        """A follower needs a snapshot this leader does not have: make one of what the
        state machine has applied (at most one per call; the follower asks again)."""
        end = self._delivered
        if self.snapshot_provider is None or end <= self.log.log_start_offset:
            return
        latest = self.log.latest_snapshot()
        if latest is not None and latest.end_offset >= end:
            return
        log.info("raft.snapshot_for_follower", node=self.config.node_id, end_offset=end)
        self.create_snapshot(end, self.snapshot_provider(end))

    def create_snapshot(self, end_offset: int, data: bytes) -> SnapshotId:
        """The state machine's snapshot of everything below `end_offset` (committed)."""
        sid = self.core.create_snapshot(end_offset, data, self._now())
        self._bytes_since_snapshot = 0
        self.stats.snapshots_created += 1
        return sid

    def _arm_timer(self) -> None:
        loop = self._loop or asyncio.get_running_loop()
        at = self.core.next_wakeup_ms()
        if self._timer is not None and self._timer_at == at:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = at
        delay = max(0.0, (at - self._now()) / 1000)
        self._timer = loop.call_later(min(delay, 3600.0), self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        if self._closed:
            return
        now = self._now()
        if now - self._timer_at > STALL_MS and not self._after_stall:
            # The event loop was blocked (e.g. a large metadata delta applied): answers that
            # arrived meanwhile are still queued behind this timer, and the next Fetch only
            # left after the stall. Give it a round trip before the core judges the leader
            # or the voters by the clock, or a busy node gives up on a healthy leader (and,
            # dropping the answer that was on its way, may never catch up).
            self._after_stall = True
            loop = self._loop or asyncio.get_running_loop()
            grace_s = (self.core.cfg.fetch_max_wait_ms + STALL_MS) / 1000
            self._timer = loop.call_later(grace_s, self._on_timer)
            return
        self._after_stall = False
        self.core.tick(now)
        self._drain()

    # ------------------------------------------------------------------- append

    async def append(self, records: list[bytes]) -> int:
        """Append records as the leader; returns the offset of the last one once
        it is committed.  Raises NotLeaderError naming the leader otherwise."""
        if not records:
            raise ValueError("nothing to append")
        if not self.is_leader:
            raise NotLeaderError(self.core.leader_id, self.core.epoch)
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._pending.append(_Pending(list(records), fut))
        if self._flush_handle is None:
            self._schedule_flush()
        started = time.monotonic()
        offset = await fut
        took = time.monotonic() - started
        st = self.stats
        st.commit_latency_sum += took
        st.commit_latency_count += 1
        return offset

    def _schedule_flush(self) -> None:
        loop = self._loop or asyncio.get_running_loop()
        # Appends made in one turn of the event loop always share a batch.  While the
        # leader's previous fsync is still running, gather appends until it finishes or
        # the linger runs out, whichever is first (group commit); otherwise write at once.
        if not self._syncing or self.config.append_linger_ms <= 0:
            self._flush_handle = loop.call_soon(self._flush)
        else:
            self._flush_handle = loop.call_later(self.config.append_linger_ms / 1000,
                                                 self._flush)

    def _flush(self) -> None:
        self._flush_handle = None
        pending, self._pending = self._pending, []
        if not pending or self._closed:
            return
        records = [r for p in pending for r in p.records]
        try:
            last = self.core.append(records, self._now())
        except NotLeaderError as e:
            for p in pending:
                if not p.future.done():
                    p.future.set_exception(NotLeaderError(e.leader_id, e.epoch))
            return
        self.stats.appended_batches += 1
        self.stats.appended_records += len(records)
        off = last - len(records)
        for p in pending:
            off += len(p.records)
            self._waiting.append((off, p.future))
        self._drain()

    def _fail_waiting(self) -> None:
        leader, epoch = self.core.leader_id, self.core.epoch
        for _last, fut in self._waiting:
            if not fut.done():
                fut.set_exception(NotLeaderError(leader, epoch))
        self._waiting = []
        for p in self._pending:
            if not p.future.done():
                p.future.set_exception(NotLeaderError(leader, epoch))
        self._pending = []

    def resign(self) -> None:
        self.core.resign(self._now())
        self._drain()

