"""What the coordinators' shells (group, transaction, share: broker/coordinator/runtime.py
and the services over it) use of the node they run on; broker/node's Node provides it, and
tests pass small fakes of it."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from broker.config import NodeConfig
    from broker.controller.api import ControllerApi
    from broker.metadata.image import MetadataImage
    from broker.metadata.publisher import MetadataPublisher
    from broker.replication import ReplicaManager


class NodeSettings(Protocol):
    """The node's id, config and current metadata image."""

    @property
    def node_id(self) -> int: ...

    @property
    def config(self) -> NodeConfig: ...

    @property
    def metadata(self) -> MetadataImage: ...


class CoordinatorNode(NodeSettings, Protocol):
    """A coordinator runtime's node: its clock, the metadata it follows, the replicas of
    the internal topic it reads and appends to, and the controller that creates that
    topic."""

    @property
    def clock(self) -> Callable[[], int]: ...

    @property
    def publisher(self) -> MetadataPublisher: ...

    @property
    def replicas(self) -> ReplicaManager: ...

    @property
    def controller(self) -> ControllerApi: ...
