"""GroupService: the RPCs exist, check their arguments, and say why they are not served yet."""

from __future__ import annotations

from typing import Any

import grpc

from broker.admin.groups import NO_COORDINATOR
from tests.unit.admin.harness import Admin, AdminTestNode, pb, serve, status_of

S = grpc.StatusCode
G = pb.groups


def test_group_rpcs_check_arguments_then_answer_unimplemented(node: AdminTestNode) -> None:
    tp = pb.partitions.TopicPartition(topic="t", partition=0)

    async def body(a: Admin) -> list[tuple[Any, str]]:
        g = a.groups
        return [
            await status_of(g.ListGroups(G.ListGroupsRequest())),
            await status_of(g.DescribeGroup(G.DescribeGroupRequest(group_id="g"))),
            await status_of(g.ResetOffsets(G.ResetOffsetsRequest(
                group_id="g", topics=["t"], strategy=G.RESET_STRATEGY_EARLIEST, dry_run=True))),
            await status_of(g.DeleteOffsets(G.DeleteOffsetsRequest(group_id="g",
                                                                   partitions=[tp]))),
            await status_of(g.DeleteGroup(G.DeleteGroupRequest(group_id="g"))),
            # argument errors come first
            await status_of(g.DescribeGroup(G.DescribeGroupRequest())),
            await status_of(g.ResetOffsets(G.ResetOffsetsRequest(group_id="g", topics=["t"]))),
            await status_of(g.ResetOffsets(G.ResetOffsetsRequest(
                group_id="g", strategy=G.RESET_STRATEGY_LATEST))),
            await status_of(g.DeleteOffsets(G.DeleteOffsetsRequest(group_id="g"))),
            await status_of(g.DeleteGroup(G.DeleteGroupRequest())),
        ]

    r = serve(node, body)
    assert [c for c, _ in r] == [S.UNIMPLEMENTED] * 5 + [S.INVALID_ARGUMENT] * 5
    assert all(d == NO_COORDINATOR for _, d in r[:5])
