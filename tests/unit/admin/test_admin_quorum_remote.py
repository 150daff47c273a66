"""`quorum describe` on a node that is not the quorum leader and does not know the leader's
admin address (a dedicated controller registers none): it sends Kafka's DescribeQuorum v2
(KIP-853: with directory ids) to the leader's controller listener. The listener here is a
real Kafka-framed server (broker.protocol.transport.serve) answering with a fixed
DescribeQuorum response."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import grpc
from kio.schema.describe_quorum.v2 import response as dqr
from kio.schema.errors import ErrorCode

from broker.admin import AdminServer
from broker.admin.quorum import QuorumInfo
from broker.errors import KafkaError
from broker.protocol.kafka_uuid import uuid_to_kafka
from broker.protocol.transport import serve
from tests.unit.admin.harness import Admin, AdminTestNode, pb, status_of

S = grpc.StatusCode
r: Any = dqr
DIRS = {2: uuid.UUID(int=(1 << 100) + 2)}  # voter 2 has a directory id, the others none


def _response(error: ErrorCode = ErrorCode.none) -> Any:
    def rs(rid: int, end: int, fetch: int, caught: int) -> Any:
        return r.ReplicaState(replica_id=rid, replica_directory_id=DIRS.get(rid),
                              log_end_offset=end, last_fetch_timestamp=fetch,
                              last_caught_up_timestamp=caught)

    part = r.PartitionData(
        partition_index=0, error_code=error, error_message=None, leader_id=2, leader_epoch=7,
        high_watermark=50,
        current_voters=(rs(2, 50, 1_000, 1_000), rs(1, 48, 900, 800), rs(3, 50, 950, 950)),
        observers=(rs(5, 45, 990, -1), rs(4, 50, 980, 980)))
    return r.DescribeQuorumResponse(error_code=ErrorCode.none, error_message=None, topics=(
        r.TopicData(topic_name="__cluster_metadata", partitions=(part,)),), nodes=())


async def _not_leader() -> QuorumInfo:
    raise KafkaError(ErrorCode.not_leader_or_follower, "node 1 is not the leader (node 2 is)")


async def _with_leader(tmp: Path, answer: Any, body: Any) -> Any:
    seen: list[tuple[int, int]] = []

    async def handler(api_key: int, version: int, request: Any) -> Any:
        seen.append((api_key, version))
        return answer

    listener = await serve(handler, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    node = AdminTestNode(tmp)
    await node.register(1)
    node.ready.set()
    node.quorum.is_leader = False
    node.quorum.driver = SimpleNamespace(leader_and_epoch=(2, 7))
    node.controller.voters = {2: ("127.0.0.1", port)}  # type: ignore[attr-defined]
    server = AdminServer(node, ["127.0.0.1:0"], describe_quorum=_not_leader, grace_s=0)
    await server.start()
    try:
        async with grpc.aio.insecure_channel(server.addresses[0]) as ch:
            result = await asyncio.wait_for(body(Admin(ch, server)), 30)
        return result, seen
    finally:
        await server.stop()
        listener.close()
        await listener.wait_closed()
        node.close()


def test_a_follower_asks_the_leaders_controller_listener(tmp_path: Path) -> None:
    async def body(adm: Admin) -> Any:
        return await adm.quorum.DescribeQuorum(pb.cluster.DescribeQuorumRequest())

    resp, seen = asyncio.run(_with_leader(tmp_path, _response(), body))
    assert seen == [(55, 2)]
    assert (resp.leader_id, resp.leader_epoch, resp.high_watermark) == (2, 7, 50)
    assert [(v.replica_id, v.log_end_offset, v.lag) for v in resp.voters] == \
        [(1, 48, 2), (2, 50, 0), (3, 50, 0)]
    assert [v.directory_id for v in resp.voters] == ["", uuid_to_kafka(DIRS[2]), ""]
    assert [(o.replica_id, o.log_end_offset, o.lag, o.last_caught_up_timestamp_ms)
            for o in resp.observers] == [(4, 50, 0, 980), (5, 45, 5, -1)]
    assert resp.max_follower_lag == 2


def test_a_stale_leader_answer_is_unavailable(tmp_path: Path) -> None:
    async def body(adm: Admin) -> Any:
        return await status_of(adm.quorum.DescribeQuorum(pb.cluster.DescribeQuorumRequest()))

    (code, details), _ = asyncio.run(_with_leader(
        tmp_path, _response(ErrorCode.not_leader_or_follower), body))
    assert code is S.UNAVAILABLE, details
    assert details.startswith("node 2, the metadata quorum leader as node 1 knows it, "
                              "answered NOT_LEADER_OR_FOLLOWER"), details
