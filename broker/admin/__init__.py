"""The gRPC admin plane (skiff.admin.v1): services over the node's controller, metadata
image, replica manager and config; started by the node on `admin.listeners`."""

from broker.admin.quorum import QuorumDescriber, QuorumInfo, ReplicaInfo, describe_raft
from broker.admin.server import (
    DEFAULT_ADMIN_LISTENER,
    AdminServer,
    admin_listeners,
    parse_admin_listeners,
)

__all__ = [
    "DEFAULT_ADMIN_LISTENER",
    "AdminServer",
    "QuorumDescriber",
    "QuorumInfo",
    "ReplicaInfo",
    "admin_listeners",
    "describe_raft",
    "parse_admin_listeners",
]
