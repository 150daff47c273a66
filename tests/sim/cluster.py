"""A seeded, deterministic simulation of a KRaft quorum.

One `random.Random(seed)` drives everything: message delays, drops,
duplicates (reordering follows from random delays), partitions, crashes and
client appends.  Time is a fake clock in milliseconds.

Storage is durable across restarts: a node restarts from exactly what its disk held.
A crash keeps what was flushed plus a random prefix of what was not (a crash between
writes: the OS may have written some of it), and `lose_head` models what issue 17's
bug did to the metadata log (its first segments deleted from under Raft, no snapshot
covering the new start).  Invariants are checked after every event; a violation raises
`InvariantError` carrying the seed.

Before issue 17 the storage only ever lost an unflushed tail: no log ever started above
its snapshot, so a voter voting or standing with a log that had lost committed records,
a DivergingEpoch below a follower's log start, and a leader asked for a snapshot it had
not made were never exercised.
"""

from __future__ import annotations

import hashlib
import heapq
import pickle
import uuid
from dataclasses import dataclass, field
from random import Random
from typing import Any

from kio.schema.errors import ErrorCode

from raft.control import VOTERS_TYPE, Endpoint, Voter, VoterSet, snapshot_payload
from raft.core import CoreConfig, NotLeaderError, RaftCore
from raft.kafka_messages import VOTER_CODEC
from raft.messages import (
    Batch,
    LeaderChanged,
    Request,
    Response,
    Send,
    SnapshotLoaded,
    SnapshotWanted,
    VoteResponse,
)
from raft.roles import Candidate, Leader, Prospective
from raft.store import MemoryLogStore, MemoryQuorumStateStore

SIM_CONFIG = CoreConfig(
    election_timeout_ms=100,
    fetch_timeout_ms=100,
    election_backoff_max_ms=50,
    fetch_max_wait_ms=40,
    request_timeout_ms=60,
    retry_backoff_ms=15,
    fetch_max_bytes=2048,
    snapshot_chunk_bytes=1024,
    leader_async_flush=True,
)


class InvariantError(AssertionError):
    pass


class SimLogStore(MemoryLogStore):
    """Checks that nobody truncates below its high watermark."""

    def __init__(self) -> None:
        super().__init__()
        self.owner: SimNode | None = None
        self.crashing = False

    def truncate_to(self, offset: int) -> None:
        if not self.crashing and self.owner is not None and self.owner.core is not None:
            hw = self.owner.core.hw
            if offset < hw:
                raise InvariantError(
                    f"node {self.owner.node_id} truncates to {offset} below its HW {hw}"
                )
        super().truncate_to(offset)

    def crash_between_writes(self, rng: Random) -> None:
        """Lose a random suffix of what was not flushed (possibly none of it)."""
        if self._flushed < self.end_offset:
            self._flushed = rng.randint(self._flushed, self.end_offset)
        self.crash()


@dataclass
class SimNode:
    node_id: int
    log: SimLogStore
    qstore: MemoryQuorumStateStore
    rng: Random
    core: RaftCore | None = None
    alive: bool = False
    incarnation: int = 0
    timer_at: int = 1 << 62
    # the replicated state machine: (offset, epoch, payload) applied in order
    applied: list[tuple[int, int, bytes]] = field(default_factory=list)
    applied_to: int = 0
    last_hw: int = 0
    last_epoch: int = 0
    snapshot_every: int = 0
    snapshots_loaded: int = 0
    # the state machine's state has a hole (its log lost its head): it must apply nothing
    state_hole: bool = False
    heads_lost: int = 0
    directory_id: uuid.UUID | None = None
    # KIP-853: the voter set its storage was formatted with (None: none, it joins as an
    # observer and finds the quorum through the bootstrap servers)
    bootstrap: VoterSet | None = None


@dataclass(order=True)
class _Event:
    time: int
    seq: int
    kind: str = field(compare=False)
    data: Any = field(compare=False)


class Cluster:
    def __init__(
        self,
        seed: int,
        voters: int,
        observers: int,
        drop: float = 0.0,
        duplicate: float = 0.0,
        max_delay_ms: int = 5,
        snapshot_every: int = 0,
        config: CoreConfig = SIM_CONFIG,
        dynamic: bool = False,
        directory_ids: bool = False,
    ) -> None:
        """`dynamic`: KIP-853 voters, the initial ones formatted with the voter set
        (--initial-controllers), observers formatted without one (they join through the
        bootstrap servers, the initial voters); otherwise static voters."""
        self.seed = seed
        self.rng = Random(seed)
        self.now = 0
        self.cfg = config
        self.voter_ids = frozenset(range(1, voters + 1))
        ids = list(range(1, voters + observers + 1))
        self.nodes: dict[int, SimNode] = {}
        for i in ids:
            log = SimLogStore()
            node = SimNode(i, log, MemoryQuorumStateStore(), Random(self.rng.getrandbits(64)))
            node.snapshot_every = snapshot_every
            log.owner = node
            self.nodes[i] = node
        self.dynamic = dynamic
        # static voters whose nodes have directory ids, as `storage format` gives them
        # (the kraft.version upgrade needs them)
        self.directory_ids = directory_ids
        if dynamic or directory_ids:
            for n in self.nodes.values():
                n.directory_id = uuid.UUID(int=self.rng.getrandbits(128))
        if dynamic:
            initial = tuple(self.voter_record(i) for i in sorted(self.voter_ids))
            for i in self.voter_ids:
                self.nodes[i].bootstrap = initial
        self.drop = drop
        self.duplicate = duplicate
        self.max_delay_ms = max_delay_ms
        self.groups: list[frozenset[int]] | None = None
        self._queue: list[_Event] = []
        self._seq = 0
        self._trace = hashlib.blake2b(digest_size=16)
        self._asker: dict[tuple[int, int], int] = {}
        self._same_time = 0
        # invariant state
        self.leaders: dict[int, int] = {}  # epoch -> leader id
        self.committed: dict[int, tuple[int, bytes]] = {}  # offset -> (epoch, payload)
        self.committed_end = 0
        self.appended = 0
        self.events = 0
        self.voter_changes = 0
        for i in ids:
            self.start(i)

    # ---------------------------------------------------------------- control

    @property
    def trace_hash(self) -> str:
        return self._trace.hexdigest()

    def _push(self, time: int, kind: str, data: Any) -> None:
        self._seq += 1
        heapq.heappush(self._queue, _Event(time, self._seq, kind, data))

    def start(self, node_id: int) -> None:
        n = self.nodes[node_id]
        assert not n.alive
        n.alive = True
        n.incarnation += 1
        n.timer_at = 1 << 62
        n.core = None
        if self.dynamic:
            core = RaftCore(node_id, frozenset(), n.log, n.qstore, n.rng, self.now, self.cfg,
                            directory_id=n.directory_id, bootstrap_voters=n.bootstrap,
                            codec=VOTER_CODEC, discovery_ids=tuple(sorted(self.voter_ids)))
        elif self.directory_ids:
            core = RaftCore(node_id, self.voter_ids, n.log, n.qstore, n.rng, self.now,
                            self.cfg, directory_id=n.directory_id, codec=VOTER_CODEC)
        else:
            core = RaftCore(node_id, self.voter_ids, n.log, n.qstore, n.rng, self.now,
                            self.cfg)
        n.core = core
        # the state machine reloads from its latest snapshot
        n.applied = []
        n.applied_to = n.log.log_start_offset
        snap = n.log.latest_snapshot()
        n.state_hole = n.log.log_start_offset > (snap.end_offset if snap else 0)
        if snap is not None:
            self._load_snapshot(n, snap.end_offset,
                                n.log.read_snapshot(snap, 0, 1 << 30))
        n.last_hw = core.hw
        self._after(n)

    def crash(self, node_id: int) -> None:
        n = self.nodes[node_id]
        if not n.alive:
            return
        n.alive = False
        n.core = None
        n.log.crashing = True
        n.log.crash_between_writes(self.rng)
        n.log.crashing = False
        self._record("crash", node_id)

    def lose_head(self, node_id: int) -> None:
        """Crash `node_id` and delete the head of its log with no snapshot to cover it
        (what the partition manager's retention did to the metadata log, issue 17)."""
        self.crash(node_id)
        log = self.nodes[node_id].log
        snap = log.latest_snapshot()
        lo = max(log.log_start_offset, snap.end_offset if snap else 0) + 1
        if log.end_offset >= lo:
            log.lose_head(self.rng.randint(lo, log.end_offset))
            self.nodes[node_id].heads_lost += 1
            self._record("lose_head", node_id * 1000000 + log.log_start_offset)
    def voter_record(self, node_id: int) -> Voter:
        return Voter(node_id, self.nodes[node_id].directory_id,
                     (Endpoint("CONTROLLER", f"sim-{node_id}", 9000 + node_id),))

    def voters_now(self) -> frozenset[int]:
        """The voter set of the live leader (else of the initial voters)."""
        lid = self.leader()
        core = self.nodes[lid].core if lid is not None else None
        return core.voters if core is not None else self.voter_ids

    def change_voters(self, add: int | None = None, remove: int | None = None) -> ErrorCode:
        """AddRaftVoter / RemoveRaftVoter through the live leader (KIP-853)."""
        lid = self.leader()
        if lid is None:
            return ErrorCode.not_leader_or_follower
        n = self.nodes[lid]
        assert n.core is not None
        if add is not None:
            err, _msg, _off = n.core.add_voter(self.voter_record(add), self.now)
        else:
            assert remove is not None
            err, _msg, _off = n.core.remove_voter(remove, self.nodes[remove].directory_id,
                                                  self.now)
        self._record("voters", (add or 0) * 1000 + (remove or 0) * 10 + int(err))
        if err == ErrorCode.none:
            self.voter_changes += 1
        self._after(n)
        return err

    def partition(self, *groups: set[int] | frozenset[int]) -> None:
        self.groups = [frozenset(g) for g in groups]
        self._record("partition", hash(tuple(sorted(tuple(sorted(g)) for g in self.groups))))

    def heal(self) -> None:
        self.groups = None
        self._record("heal", 0)

    def connected(self, a: int, b: int) -> bool:
        if self.groups is None:
            return True
        return any(a in g and b in g for g in self.groups)

    def leader(self) -> int | None:
        """The live leader with the highest epoch, if any."""
        best: tuple[int, int] | None = None
        for n in self.nodes.values():
            if n.alive and n.core is not None and isinstance(n.core.role, Leader) and (
                best is None or n.core.epoch > best[0]
            ):
                best = (n.core.epoch, n.node_id)
        return None if best is None else best[1]

    def append(self, count: int = 1) -> int | None:
        """A client appends through the leader it finds; None if there is none."""
        lid = self.leader()
        if lid is None:
            return None
        n = self.nodes[lid]
        assert n.core is not None
        records = []
        for _ in range(count):
            self.appended += 1
            records.append(f"s{self.seed}-r{self.appended}".encode())
        try:
            off = n.core.append(records, self.now)
        except NotLeaderError:
            return None
        self._record("append", lid)
        self._after(n)
        return off

    # ------------------------------------------------------------- execution

    def _record(self, kind: str, x: int) -> None:
        self._trace.update(f"{self.now}|{kind}|{x};".encode())

    def _deliver_later(self, src: int, send: Send) -> None:
        n = self.nodes[src]
        if self.rng.random() < self.drop:
            return
        copies = 2 if self.rng.random() < self.duplicate else 1
        # a response goes to the incarnation that asked; a restarted node never sees it
        inc = self._asker.get((send.dst, send.rid), -1) if send.is_response else n.incarnation
        for _ in range(copies):
            delay = self.rng.randint(1, self.max_delay_ms)
            self._push(self.now + delay, "msg", (src, inc, send))

    def _after(self, n: SimNode) -> None:
        """Collect a node's output, apply commits, check invariants, re-arm its timer."""
        core = n.core
        assert core is not None
        out = core.take_output()
        for send in out.sends:
            self._deliver_later(n.node_id, send)
        if out.flush:
            # the leader's fsync completes a little later; a crash before then loses it
            delay = self.rng.randint(0, 3)
            self._push(self.now + delay, "flushed",
                       (n.node_id, n.incarnation, core.epoch, n.log.end_offset))
        # judged from the disk, not by asking the core
        snap = n.log.latest_snapshot()
        lost = n.log.log_start_offset > (snap.end_offset if snap is not None else 0)
        if lost and isinstance(core.role, Prospective | Candidate | Leader):
            raise InvariantError(f"node {n.node_id} lost committed state yet stands "
                                 f"({type(core.role).__name__}, epoch {core.epoch})")
        for send in out.sends:
            if lost and isinstance(send.message, VoteResponse) and send.message.vote_granted:
                raise InvariantError(f"node {n.node_id} lost committed state yet grants a "
                                     f"{'pre-' if send.message.pre_vote else ''}vote")
        for ev in out.events:
            if isinstance(ev, SnapshotWanted):
                # the state machine snapshots what it applied, as the driver does
                if n.applied_to > n.log.log_start_offset and not n.state_hole:
                    core.create_snapshot(n.applied_to, pickle.dumps(n.applied), self.now)
            elif isinstance(ev, SnapshotLoaded):
                n.snapshots_loaded += 1
                n.state_hole = False
                sid = ev.snapshot_id
                self._load_snapshot(n, sid.end_offset, n.log.read_snapshot(sid, 0, 1 << 30))
            elif isinstance(ev, LeaderChanged) and ev.leader_id == n.node_id:
                self._check_leader_completeness(n)
        self._apply(n)
        self._check(n)
        w = core.next_wakeup_ms()
        if w < n.timer_at:
            n.timer_at = max(w, self.now)
            self._push(n.timer_at, "timer", (n.node_id, n.incarnation))

    def _load_snapshot(self, n: SimNode, end: int, data: bytes) -> None:
        entries: list[tuple[int, int, bytes]] = pickle.loads(snapshot_payload(data))
        if len(entries) != end:
            raise InvariantError(f"node {n.node_id} snapshot size {len(entries)} != end {end}")
        for off, epoch, payload in entries:
            self._commit(n, off, epoch, payload)
        n.applied = list(entries)
        n.applied_to = end

    def _commit(self, n: SimNode, off: int, epoch: int, payload: bytes) -> None:
        prev = self.committed.get(off)
        if prev is None:
            if off != self.committed_end:
                raise InvariantError(f"node {n.node_id} commits {off} with a gap at "
                                     f"{self.committed_end}")
            self.committed[off] = (epoch, payload)
            self.committed_end = off + 1
        elif prev != (epoch, payload):
            raise InvariantError(
                f"node {n.node_id} committed {off}={epoch, payload!r}, "
                f"but {prev!r} was committed before"
            )

    def _apply(self, n: SimNode) -> None:
        core = n.core
        assert core is not None
        if core.hw <= n.applied_to:
            return
        if n.state_hole:
            raise InvariantError(f"node {n.node_id} applies from {n.applied_to} to {core.hw} "
                                 f"with a hole in its state (its log lost its head)")
        pos = n.applied_to
        while pos < core.hw:
            batches = n.log.read(pos, 1 << 20)
            if not batches:
                raise InvariantError(f"node {n.node_id} HW {core.hw} beyond its log at {pos}")
            for b in batches:
                for i, payload in enumerate(b.records):
                    off = b.base_offset + i
                    if off < pos or off >= core.hw:
                        continue
                    self._commit(n, off, b.epoch, payload)
                    n.applied.append((off, b.epoch, payload))
                    pos = off + 1
        n.applied_to = pos
        if n.snapshot_every and pos - n.log.log_start_offset >= n.snapshot_every:
            core.create_snapshot(pos, pickle.dumps(n.applied), self.now)

    def _check_leader_completeness(self, n: SimNode) -> None:
        """A new leader holds every committed record (Leader Completeness)."""
        log = n.log
        if log.end_offset < self.committed_end:
            raise InvariantError(
                f"leader {n.node_id} log ends at {log.end_offset}, committed up to "
                f"{self.committed_end}"
            )
        snap = log.latest_snapshot()
        if log.log_start_offset > 0 and (snap is None or snap.end_offset < log.log_start_offset):
            raise InvariantError(f"leader {n.node_id} lacks a snapshot for its log start")
        pos = log.log_start_offset
        for b in log.read(pos, 1 << 40):
            for i, payload in enumerate(b.records):
                off = b.base_offset + i
                if off >= self.committed_end:
                    return
                if off >= pos and self.committed[off] != (b.epoch, payload):
                    raise InvariantError(f"leader {n.node_id} has a different record at {off}")

    def _check(self, n: SimNode) -> None:
        core = n.core
        assert core is not None
        if core.hw < n.last_hw:
            raise InvariantError(f"node {n.node_id} HW went back {n.last_hw} -> {core.hw}")
        n.last_hw = core.hw
        if core.epoch < n.last_epoch:
            raise InvariantError(f"node {n.node_id} epoch went back {n.last_epoch} -> "
                                 f"{core.epoch}")
        n.last_epoch = core.epoch
        # KIP-853: one voter change at a time, so no log holds two uncommitted Voters
        # records
        uncommitted: list[int] = []
        if self.dynamic or self.directory_ids:
            tail = n.log.read(max(self.committed_end, n.log.log_start_offset), 1 << 40)
            uncommitted = [b.base_offset for b in tail
                           if b.control and b.control_type == VOTERS_TYPE
                           and b.base_offset >= self.committed_end]
        if len(uncommitted) > 1:
            raise InvariantError(f"node {n.node_id} holds {len(uncommitted)} uncommitted "
                                 f"voter changes at {uncommitted}")
        if isinstance(core.role, Leader):
            prev = self.leaders.setdefault(core.epoch, n.node_id)
            if prev != n.node_id:
                raise InvariantError(f"two leaders in epoch {core.epoch}: {prev} and "
                                     f"{n.node_id}")

    def step(self) -> bool:
        if not self._queue:
            return False
        ev = heapq.heappop(self._queue)
        if ev.time > self.now:
            self.now = ev.time
            self._same_time = 0
        self._same_time += 1
        if self._same_time > 5000:
            raise InvariantError(f"livelock: 5000 events at {self.now} ms")
        self.events += 1
        if ev.kind == "timer":
            node_id, inc = ev.data
            n = self.nodes[node_id]
            if not n.alive or n.incarnation != inc or n.timer_at != ev.time or n.core is None:
                return True
            n.timer_at = 1 << 62
            self._record("tick", node_id)
            n.core.tick(self.now)
            self._after(n)
        elif ev.kind == "msg":
            src, inc, send = ev.data
            self._deliver(src, inc, send)
        elif ev.kind == "flushed":
            node_id, inc, epoch, end = ev.data
            fn = self.nodes[node_id]
            if fn.alive and fn.core is not None and fn.incarnation == inc:
                self._record("flushed", node_id * 1000000 + end)
                fn.core.flushed(epoch, end, self.now)
                self._after(fn)
        elif ev.kind == "refused":
            src, inc, send = ev.data
            sn = self.nodes[src]
            if sn.alive and sn.core is not None and sn.incarnation == inc:
                self._record("refused", src * 1000 + send.dst)
                sn.core.handle_failure(send.dst, send.rid, self.now)
                self._after(sn)
        elif ev.kind == "call":
            ev.data()
        return True

    def _deliver(self, src: int, inc: int, send: Send) -> None:
        n = self.nodes[send.dst]
        if not send.is_response and not n.alive and self.connected(src, send.dst):
            # a crashed process refuses connections: the sender hears of it
            self._push(self.now + 1, "refused", (src, inc, send))
            return
        if not n.alive or n.core is None or not self.connected(src, send.dst):
            return
        if send.is_response and inc != n.incarnation:
            return
        if not send.is_response:
            self._asker[(src, send.rid)] = inc
        msg = send.message
        self._record(type(msg).__name__, src * 1000 + send.dst)
        if send.is_response:
            assert isinstance(msg, Response.__args__)
            n.core.handle_response(src, send.rid, msg, self.now)
        else:
            assert isinstance(msg, Request.__args__)
            n.core.handle_request(src, send.rid, msg, self.now)
        self._after(n)

    def run_until(self, t: int) -> None:
        while self._queue and self._queue[0].time <= t:
            self.step()
        self.now = max(self.now, t)

    def at(self, t: int, fn: Any) -> None:
        self._push(t, "call", fn)

    def run_for(self, ms: int) -> None:
        self.run_until(self.now + ms)

    def run_with_load(self, ms: int, every_ms: tuple[int, int] = (10, 30)) -> None:
        """Run for `ms` while a client appends 1-3 records at random intervals."""
        end = self.now + ms
        while self.now < end:
            t = min(end, self.now + self.rng.randint(*every_ms))
            self.run_until(t)
            if self.now < end:
                self.append(self.rng.randint(1, 3))

    def wait_for_leader(self, within_ms: int) -> int:
        """Liveness: a leader that a majority of live voters follow, within the bound."""
        end = self.now + within_ms
        while True:
            lid = self._stable_leader()
            if lid is not None:
                return lid
            if self.now >= end:
                raise InvariantError(f"no leader within {within_ms} ms (at {self.now} ms)")
            self.run_until(min(end, self.now + 5))

    def _stable_leader(self) -> int | None:
        lid = self.leader()
        if lid is None:
            return None
        core = self.nodes[lid].core
        assert core is not None
        following = 0
        for v in core.voters:
            vc = self.nodes[v].core
            if self.nodes[v].alive and vc is not None and vc.leader_id == lid and (
                vc.epoch == core.epoch
            ):
                following += 1
        return lid if following >= core.majority and core.hw > 0 else None

    def wait_converged(self, within_ms: int) -> None:
        """Every live node reaches the leader's high watermark."""
        end = self.now + within_ms
        while True:
            lid = self._stable_leader()
            if lid is not None:
                lcore = self.nodes[lid].core
                assert lcore is not None
                hw = lcore.hw
                if all(
                    n.core is not None and n.core.hw >= hw
                    for n in self.nodes.values() if n.alive and self.connected(lid, n.node_id)
                ):
                    return
            if self.now >= end:
                hws = {i: (n.core.hw if n.core else None) for i, n in self.nodes.items()}
                raise InvariantError(f"not converged within {within_ms} ms: {hws}")
            self.run_until(min(end, self.now + 5))

    def final_check(self) -> None:
        lid = self.leader()
        if lid is not None:
            self._check_leader_completeness(self.nodes[lid])
        for n in self.nodes.values():
            if n.alive and n.core is not None:
                self._apply(n)
                for off, epoch, payload in n.applied[-50:]:
                    if self.committed[off] != (epoch, payload):
                        raise InvariantError(f"node {n.node_id} applied a different {off}")


def batch_payloads(batches: list[Batch]) -> list[bytes]:
    return [r for b in batches for r in b.records]
