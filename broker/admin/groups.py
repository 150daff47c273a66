"""GroupService: the RPCs are defined; they need the group coordinator.

The coordinator is being built on its own branch. Until a node has one, every call checks
its arguments (INVALID_ARGUMENT stays INVALID_ARGUMENT once it exists) and then answers
UNIMPLEMENTED saying why.
"""

from __future__ import annotations

from typing import Any

import grpc

from broker.admin.errors import AdminError, S, rpc_errors
from broker.admin.pb import groups, groups_grpc

NO_COORDINATOR = ("consumer groups are served by the group coordinator, which this node "
                  "does not run yet")


def _need_group(request: Any) -> None:
    if not request.group_id:
        raise AdminError(S.INVALID_ARGUMENT, "a group id is required")


def _unimplemented() -> AdminError:
    return AdminError(S.UNIMPLEMENTED, NO_COORDINATOR)


class GroupService(groups_grpc.GroupServiceServicer):  # type: ignore[misc]
    def __init__(self, node: Any) -> None:
        self.node = node

    @rpc_errors
    async def ListGroups(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        raise _unimplemented()

    @rpc_errors
    async def DescribeGroup(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        _need_group(request)
        raise _unimplemented()

    @rpc_errors
    async def ResetOffsets(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        _need_group(request)
        if request.strategy == groups.RESET_STRATEGY_UNSPECIFIED:
            raise AdminError(S.INVALID_ARGUMENT, "choose a reset strategy: earliest, latest, "
                                                 "timestamp, offset or shift")
        if not request.topics and not request.partitions:
            raise AdminError(S.INVALID_ARGUMENT, "name the topics or partitions to reset")
        raise _unimplemented()

    @rpc_errors
    async def DeleteOffsets(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        _need_group(request)
        if not request.partitions:
            raise AdminError(S.INVALID_ARGUMENT, "name the partitions whose offsets to delete")
        raise _unimplemented()

    @rpc_errors
    async def DeleteGroup(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        _need_group(request)
        raise _unimplemented()
