"""What `quorum describe` reports, and where it comes from.

The admin server does not know the Raft driver's shape: the node hands it a
`QuorumDescriber` (an async function returning `QuorumInfo`). `describe_raft` builds one
from a KRaft-style core that exposes `node_id`, `voters`, `epoch`, `leader_id`, `hw` and
`replica_progress() -> (voters, observers)` of objects with `end_offset` and
`last_fetch_ms`; it only answers on the leader (as Kafka's DescribeQuorum), anywhere else
it raises NOT_LEADER_OR_FOLLOWER naming the leader.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.protocol.kafka_uuid import uuid_to_kafka
from broker.protocol.transport import ConnectionSecurity


@dataclass(frozen=True, slots=True)
class ReplicaInfo:
    replica_id: int
    log_end_offset: int = -1
    last_fetch_timestamp_ms: int = -1
    last_caught_up_timestamp_ms: int = -1
    directory_id: str = ""  # Kafka uuid (base64) of its metadata log dir; "" when unknown


@dataclass(frozen=True, slots=True)
class QuorumInfo:
    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[ReplicaInfo, ...]
    observers: tuple[ReplicaInfo, ...] = ()


QuorumDescriber = Callable[[], Awaitable[QuorumInfo]]


def describe_raft(core: Any, wall_clock_ms: Callable[[], int],
                  core_now_ms: Callable[[], int] | None = None) -> QuorumDescriber:
    """A describer over a Raft core (see the module doc for what it must expose).

    The core keeps fetch times in its own time base (raft/driver.py: milliseconds since the
    driver started); `core_now_ms` is that clock, used to turn them into wall-clock times.
    Without it the core's times are taken as wall-clock times. A replica that has not
    fetched in this epoch (`fetched` false) has no fetch time. The last caught-up time is
    the last fetch that reached the high watermark, as far as the core tracks it: the
    last fetch time when the replica's log end is at or past the high watermark now.
    """

    async def describe() -> QuorumInfo:
        leader = int(core.leader_id)
        if leader != core.node_id:
            raise KafkaError(
                ErrorCode.not_leader_or_follower,
                f"node {core.node_id} is not the metadata quorum leader"
                + (f" (node {leader} is)" if leader >= 0 else " (no leader is known)")
                + "; ask the leader's admin listener")
        voters, observers = core.replica_progress()
        wall = wall_clock_ms()
        core_now = core_now_ms() if core_now_ms is not None else None
        hw = int(core.hw)

        def to_wall(t: int) -> int:
            if t < 0:
                return -1
            return t if core_now is None else wall - (core_now - t)

        def dir_id(rid: int) -> str:
            voter = core.voter(rid) if hasattr(core, "voter") else None
            d = getattr(voter, "directory_id", None)
            return "" if d is None else uuid_to_kafka(d)

        def info(rid: int, p: Any) -> ReplicaInfo:
            end = int(getattr(p, "end_offset", -1))
            fetched = bool(getattr(p, "fetched", True))
            last = to_wall(int(getattr(p, "last_fetch_ms", -1))) if fetched else -1
            caught = int(getattr(p, "caught_up_ms", -2))  # -2: the core does not track it
            fallback = last if end >= hw >= 0 and last >= 0 else -1
            up = fallback if caught == -2 else to_wall(caught)
            return ReplicaInfo(rid, end, last, up, dir_id(rid))

        me = ReplicaInfo(core.node_id, int(core.log.end_offset), wall, wall,
                         dir_id(core.node_id))
        in_set = getattr(core, "voters", None)
        return QuorumInfo(
            leader_id=leader, leader_epoch=int(core.epoch), high_watermark=hw,
            # a leader that removed itself (KIP-853) leads on as a non-voter until it resigns
            voters=((me,) if in_set is None or core.node_id in in_set else ()) + tuple(
                info(r, voters[r]) for r in sorted(voters) if r != core.node_id),
            observers=tuple(info(r, observers[r]) for r in sorted(observers)),
        )

    return describe


def no_quorum_describer() -> QuorumDescriber:
    """For a node started without one (the admin tests' nodes run no Raft driver)."""

    async def describe() -> QuorumInfo:
        from broker.admin.errors import AdminError, S

        raise AdminError(S.UNIMPLEMENTED, "this node reports no metadata quorum state: it "
                                          "was started without a quorum describer")

    return describe


METADATA_TOPIC = "__cluster_metadata"
DESCRIBE_QUORUM_KEY = 55


async def describe_at(host: str, port: int, timeout_s: float,
                      security: ConnectionSecurity | None = None) -> QuorumInfo:
    """Kafka's DescribeQuorum (v2: fetch and caught-up times, directory ids) sent to a controller
    listener, as `kafka-metadata-quorum` does: for nodes that are not the quorum leader and
    do not know the leader's admin address (dedicated controllers do not register one)."""
    from kio.schema.describe_quorum.v2 import request as dq

    from broker.protocol.transport import KafkaConnection

    q: Any = dq
    conn = KafkaConnection(host, port, "skiff-admin", security=security)
    try:
        resp = await conn.request(DESCRIBE_QUORUM_KEY, 2, q.DescribeQuorumRequest(topics=(
            q.TopicData(topic_name=METADATA_TOPIC,
                        partitions=(q.PartitionData(partition_index=0),)),)), timeout_s)
    finally:
        await conn.close()
    if int(resp.error_code) != 0:
        raise KafkaError(ErrorCode(int(resp.error_code)), f"controller {host}:{port}")
    part = resp.topics[0].partitions[0]
    if int(part.error_code) != 0:
        raise KafkaError(ErrorCode(int(part.error_code)),
                         f"controller {host}:{port} is not the quorum leader")

    def info(r: Any) -> ReplicaInfo:
        d = getattr(r, "replica_directory_id", None)
        return ReplicaInfo(int(r.replica_id), int(r.log_end_offset),
                           int(r.last_fetch_timestamp), int(r.last_caught_up_timestamp),
                           "" if d is None or d.int == 0 else uuid_to_kafka(d))

    return QuorumInfo(
        leader_id=int(part.leader_id), leader_epoch=int(part.leader_epoch),
        high_watermark=int(part.high_watermark),
        voters=tuple(info(v) for v in part.current_voters),
        observers=tuple(info(o) for o in part.observers))
