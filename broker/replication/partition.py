"""One partition replica on this broker: its log, its role, the high watermark, and waiters.

Role transitions (all of them live here):

    (new)    --become_leader(epoch)-->   Leader
    (new)    --become_follower(epoch)--> Follower
    Leader   --become_follower(epoch)--> Follower   (epoch must not go back)
    Follower --become_leader(epoch)-->   Leader     (epoch must not go back)
    any      --close()-->                Offline

The high watermark is the smallest log end offset among the in-sync replicas, and it
only advances while |ISR| >= min.insync.replicas (KIP-966 strict min-ISR). It never
goes back on the leader.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from uuid import UUID

from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.log import AppendResult, FileSlice, PartitionLog


class Role(enum.Enum):
    LEADER = "leader"
    FOLLOWER = "follower"
    OFFLINE = "offline"


@dataclass
class FollowerState:
    log_end_offset: int = 0
    last_caught_up_ms: int = 0


@dataclass
class Partition:
    topic: str
    index: int
    topic_id: UUID | None
    log: PartitionLog
    clock: Callable[[], int]
    node_id: int
    role: Role = Role.OFFLINE
    leader_id: int = -1
    leader_epoch: int = -1
    partition_epoch: int = -1
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    min_insync_replicas: int = 1
    high_watermark: int = 0
    followers: dict[int, FollowerState] = field(default_factory=dict)
    _waiters: list[asyncio.Future[None]] = field(default_factory=list)

    # ---- transitions -------------------------------------------------------------

    def become_leader(
        self, *, leader_epoch: int, partition_epoch: int, replicas: tuple[int, ...],
        isr: tuple[int, ...], min_insync_replicas: int,
    ) -> None:
        self._check_epoch(leader_epoch)
        now = self.clock()
        self.role = Role.LEADER
        self.leader_id = self.node_id
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.replicas = replicas
        self.isr = isr
        self.min_insync_replicas = min_insync_replicas
        self.followers = {
            r: self.followers.get(r, FollowerState(last_caught_up_ms=now))
            for r in replicas if r != self.node_id
        }
        self.high_watermark = max(self.high_watermark, self.log.log_start_offset)
        self.high_watermark = min(self.high_watermark, self.log.log_end_offset)
        self._maybe_advance_high_watermark()
        self._wake_waiters()

    def become_follower(
        self, *, leader_id: int, leader_epoch: int, partition_epoch: int,
        replicas: tuple[int, ...], isr: tuple[int, ...],
    ) -> None:
        self._check_epoch(leader_epoch)
        self.role = Role.FOLLOWER
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.replicas = replicas
        self.isr = isr
        self.followers = {}
        self._wake_waiters()

    def close(self) -> None:
        self.role = Role.OFFLINE
        self._wake_waiters()

    def _check_epoch(self, epoch: int) -> None:
        if epoch < self.leader_epoch:
            raise KafkaError(
                ErrorCode.fenced_leader_epoch,
                f"{self.topic}-{self.index}: epoch {epoch} < current {self.leader_epoch}",
            )

    # ---- leader data path --------------------------------------------------------

    def require_leader(self, current_leader_epoch: int = -1) -> None:
        if self.role is not Role.LEADER:
            raise KafkaError(ErrorCode.not_leader_or_follower, f"{self.topic}-{self.index}")
        if current_leader_epoch >= 0:
            if current_leader_epoch < self.leader_epoch:
                raise KafkaError(ErrorCode.fenced_leader_epoch, f"{self.topic}-{self.index}")
            if current_leader_epoch > self.leader_epoch:
                raise KafkaError(ErrorCode.unknown_leader_epoch, f"{self.topic}-{self.index}")

    def append_as_leader(self, records: bytes | memoryview, required_acks: int) -> AppendResult:
        self.require_leader()
        if required_acks == -1 and len(self.isr) < self.min_insync_replicas:
            raise KafkaError(
                ErrorCode.not_enough_replicas,
                f"ISR {list(self.isr)} is below min.insync.replicas={self.min_insync_replicas}",
            )
        result = self.log.append_as_leader(records, self.leader_epoch, self.clock())
        self._maybe_advance_high_watermark()
        self._wake_waiters()  # followers long-polling for new data
        return result

    def update_follower(self, replica_id: int, log_end_offset: int) -> None:
        """A follower fetched at `log_end_offset`: it holds everything before it."""
        state = self.followers.get(replica_id)
        if state is None:
            return
        state.log_end_offset = log_end_offset
        if log_end_offset >= self.log.log_end_offset:
            state.last_caught_up_ms = self.clock()
        self._maybe_advance_high_watermark()

    def _maybe_advance_high_watermark(self) -> None:
        if self.role is not Role.LEADER or len(self.isr) < self.min_insync_replicas:
            return
        candidates = [self.log.log_end_offset]
        for replica in self.isr:
            if replica != self.node_id:
                candidates.append(self.followers.get(replica, FollowerState()).log_end_offset)
        new_hw = min(candidates)
        if new_hw > self.high_watermark:
            self.high_watermark = new_hw
            # Retention and DeleteRecords never go past what the ISR holds.
            self.log.update_high_watermark(new_hw)
            self._wake_waiters()

    def read(
        self, fetch_offset: int, max_bytes: int, *, for_replica: bool, min_one_batch: bool,
    ) -> FileSlice:
        upper = self.log.log_end_offset if for_replica else self.high_watermark
        return self.log.read(fetch_offset, max_bytes, upper, min_one_batch)

    @property
    def last_stable_offset(self) -> int:
        return self.high_watermark

    # ---- waiting for the high watermark (acks=all, fetch long polls) -------------

    def new_waiter(self) -> asyncio.Future[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if len(self._waiters) >= 64:  # long polls that timed out leave cancelled futures behind
            self._waiters = [w for w in self._waiters if not w.done()]
        self._waiters.append(future)
        return future

    def _wake_waiters(self) -> None:
        waiters, self._waiters = self._waiters, []
        for future in waiters:
            if not future.done():
                future.set_result(None)
