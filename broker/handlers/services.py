"""What a Kafka handler may use of the node it runs on: a typed, narrow surface instead of the
whole Node (broker/node), which stands floors above the handlers. broker/node's Node
provides it; handler tests pass small fakes of it.

Each handler module's `handle(node, ctx, request)` takes a `BrokerServices`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from broker.config import NodeConfig
    from broker.controller.api import ControllerChannelApi
    from broker.log import LogManager
    from broker.metadata.image import MetadataImage
    from broker.quotas.core import Quotas
    from broker.replication import ReplicaManager
    from broker.util.tasks import ServiceTasks


class BrokerServices(Protocol):
    node_id: int
    cluster_id: str
    broker_epoch: int
    config: NodeConfig
    logs: LogManager  # the partitions' logs, for DescribeLogDirs
    replicas: ReplicaManager  # produce, fetch, offsets, DeleteRecords
    quotas: Quotas  # client quotas measured on this broker (broker/quotas)
    tasks: ServiceTasks  # the node's task group: work a request starts that outlives it

    @property
    def controller(self) -> ControllerChannelApi:
        """The way to the active controller (broker/controller/api.py)."""
        ...

    @property
    def metadata(self) -> MetadataImage:
        """The current metadata image."""
        ...
