"""What the group, transaction and share handlers use of their node, each a narrow
Protocol over the few members it reads (broker/node's Node provides them all; handler
tests pass small fakes). The other handlers take broker/handlers/services.py's
BrokerServices."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from broker.group.shell import GroupNode
from broker.handlers.services import BrokerServices
from broker.share.coordinator_shell import ShareCoordinatorNode
from broker.txn.shell import TxnNode

if TYPE_CHECKING:
    from broker.config import NodeConfig
    from broker.controller.api import ControllerApi
    from broker.metadata.image import MetadataImage
    from broker.replication import ReplicaManager
    from broker.share.shell import ShareService
    from broker.util.tasks import ServiceTasks
    from raft.driver import RaftDriver


class MetadataNode(Protocol):
    """The node's current metadata image (feature levels, topics, ACLs)."""

    @property
    def metadata(self) -> MetadataImage: ...


class AuthzNode(MetadataNode, Protocol):
    """What the ACL checks (broker/handlers/_authz.py) read: the authorizer's settings in
    the node's config, the ACLs in its metadata image."""

    @property
    def config(self) -> NodeConfig: ...


class GroupBroker(AuthzNode, GroupNode, Protocol):
    """A group handler's node: its group coordinator, behind the ACL checks."""


class GroupsBroker(GroupBroker, Protocol):
    """DescribeGroups, ListGroups, DeleteGroups: the share groups as well (None until the
    first share-group request makes them)."""

    @property
    def share_groups(self) -> ShareService | None: ...


class StreamsBroker(GroupBroker, Protocol):
    """StreamsGroupHeartbeat's node: the controller that creates a group's internal topics,
    in the node's task group (the creation outlives the heartbeat that asked)."""

    @property
    def controller(self) -> ControllerApi: ...

    @property
    def tasks(self) -> ServiceTasks: ...


class TxnBroker(AuthzNode, TxnNode, Protocol):
    """A transaction handler's node: its transaction coordinator, behind the ACL checks."""


class TxnBrokerServices(BrokerServices, TxnNode, Protocol):
    """Produce and InitProducerId: a broker's services and its transaction coordinator
    (KIP-890's verification, transactional producer ids)."""


class TxnOffsetCommitBroker(GroupBroker, TxnNode, Protocol):
    """TxnOffsetCommit's node: the group coordinator, and the transaction coordinator that
    verifies the offsets partition is in the transaction (KIP-890)."""

    @property
    def replicas(self) -> ReplicaManager: ...


class QuorumView(Protocol):
    @property
    def driver(self) -> RaftDriver: ...


class ControllerListenerNode(AuthzNode, Protocol):
    """DescribeCluster on the controller listener: the cluster id and the metadata quorum's
    leader (no quorum: no leader)."""

    @property
    def cluster_id(self) -> str: ...

    @property
    def quorum(self) -> QuorumView | None: ...


class CoordinatorsBroker(AuthzNode, GroupNode, TxnNode, ShareCoordinatorNode, Protocol):
    """FindCoordinator's node: the coordinator of each key type."""
