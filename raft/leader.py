"""The leader's view of the other replicas in its epoch (Kafka's `LeaderState`, etcd's
`Progress` tracker).

Per replica: the offset it fetched from (its log end), when it last fetched, when it
was last caught up, the high watermark last sent to it, and the directory id its Fetch
named.  From the voters' progress come the high watermark (the offset a majority
holds) and check-quorum's deadline.  Fetches that found nothing new wait here
(parked) until records, a new high watermark or their deadline.  The state lives in
the `Leader` role (raft/roles.py), so it is born with the epoch and gone with it.
Pure: time is an argument.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from raft.messages import FetchRequest

NEVER = 1 << 62


@dataclass(slots=True)
class ReplicaProgress:
    """What the leader knows of one fetcher in its epoch (KIP-595 "Fetch")."""

    end_offset: int = -1
    last_fetch_ms: int = -1
    last_hw_sent: int = -1
    fetched: bool = False
    # last time it fetched from at or past the high watermark (KIP-853's caught-up test;
    # DescribeQuorum's LastCaughtUpTimestamp)
    caught_up_ms: int = -1
    # the directory id its Fetch named (KIP-853), for the kraft.version upgrade
    directory_id: uuid.UUID | None = None


# a Fetch waiting for news: (request id, request, answer by)
ParkedFetch = tuple[int, FetchRequest, int]


class LeaderState:
    """Progress of the voters and observers, and the parked fetches, of one epoch."""

    __slots__ = ("observers", "parked", "resign_when_committed", "voters")

    def __init__(self, voter_ids: Iterable[int], now_ms: int, resign_when_committed: bool
                 ) -> None:
        # the other voters (a voter leader counts itself apart, by its flushed offset)
        self.voters: dict[int, ReplicaProgress] = {
            v: ReplicaProgress(last_fetch_ms=now_ms) for v in voter_ids}
        self.observers: dict[int, ReplicaProgress] = {}
        self.parked: dict[int, ParkedFetch] = {}
        # a leader removed from the voter set (KIP-853) resigns once that is committed
        self.resign_when_committed = resign_when_committed

    def progress(self, node_id: int) -> ReplicaProgress | None:
        return self.voters.get(node_id) or self.observers.get(node_id)

    def fetched(self, node_id: int, offset: int, now_ms: int, high_watermark: int,
                directory_id: uuid.UUID | None) -> ReplicaProgress:
        """A valid Fetch from `offset`: the replica holds everything below it."""
        if node_id in self.voters:
            p = self.voters[node_id]
        else:
            p = self.observers.setdefault(node_id, ReplicaProgress())
        p.end_offset = offset
        p.last_fetch_ms = now_ms
        if directory_id is not None:
            p.directory_id = directory_id
        if offset >= high_watermark:
            p.caught_up_ms = now_ms
        if not p.fetched:
            p.fetched = True
        return p

    def snapshot_fetched(self, node_id: int, now_ms: int) -> None:
        """A voter fetching a snapshot is alive, though its log end does not move."""
        p = self.voters.get(node_id)
        if p is not None:
            p.last_fetch_ms = now_ms

    def caught_up_observer(self, node_id: int, now_ms: int, within_ms: int) -> bool:
        """KIP-853 "AddVoter": the observer was caught up within `within_ms`."""
        p = self.observers.get(node_id)
        return p is not None and p.caught_up_ms >= 0 and now_ms - p.caught_up_ms <= within_ms

    def set_voters(self, voter_ids: Iterable[int], now_ms: int) -> None:
        """The voter set changed: new voters keep what the leader knew of them as
        observers; removed voters become observers."""
        ids = set(voter_ids)
        for v in voter_ids:
            if v not in self.voters:
                prev = self.observers.pop(v, None)
                self.voters[v] = prev or ReplicaProgress(last_fetch_ms=now_ms)
        for v in list(self.voters):
            if v not in ids:
                self.observers[v] = self.voters.pop(v)

    def high_watermark(self, own_flushed: int | None, majority: int) -> int:
        """The largest offset a majority of voters holds (-1: no majority reports);
        `own_flushed` is the leader's if it is a voter."""
        ends = [p.end_offset for p in self.voters.values()]
        if own_flushed is not None:
            ends.append(own_flushed)
        ends.sort(reverse=True)
        return ends[majority - 1] if len(ends) >= majority else -1

    def quorum_expiry_ms(self, now_ms: int, need: int, timeout_ms: int) -> int:
        """When check-quorum fails if nobody else fetches: the time at which fewer than
        `need` other voters have fetched within `timeout_ms`."""
        times = sorted((p.last_fetch_ms for p in self.voters.values()), reverse=True)
        if need <= 0:
            return NEVER
        if need > len(times):
            return now_ms
        return times[need - 1] + timeout_ms

    def successors(self) -> tuple[int, ...]:
        """The voters, most caught-up first (EndQuorumEpoch's preferred successors)."""
        return tuple(v for v, _p in sorted(self.voters.items(),
                                           key=lambda kv: -kv[1].end_offset))

    def all_voters_fetched(self) -> bool:
        return all(p.fetched for p in self.voters.values())

    # ---------------------------------------------------------- parked fetches

    def park(self, node_id: int, rid: int, request: FetchRequest, deadline_ms: int) -> None:
        self.parked[node_id] = (rid, request, deadline_ms)

    def unpark(self, node_id: int) -> ParkedFetch | None:
        return self.parked.pop(node_id, None)

    def take_parked(self) -> dict[int, ParkedFetch]:
        parked, self.parked = self.parked, {}
        return parked

    def take_expired(self, now_ms: int) -> list[tuple[int, ParkedFetch]]:
        """The parked fetches due by `now_ms`, in the order they were parked."""
        due = [(src, f) for src, f in self.parked.items() if now_ms >= f[2]]
        for src, _f in due:
            del self.parked[src]
        return due

    def hurry_parked(self, deadline_ms: int) -> None:
        """Answer every parked fetch by `deadline_ms` at the latest."""
        for src, (rid, req, deadline) in list(self.parked.items()):
            self.parked[src] = (rid, req, min(deadline, deadline_ms))

    def next_parked_deadline(self) -> int:
        t = NEVER
        for _rid, _req, deadline in self.parked.values():
            t = min(t, deadline)
        return t
