"""The gRPC admin plane (skiff.admin.v1): services over the node's controller, metadata
image, replica manager and config; started by the node on `admin.listeners`.

Names are imported lazily so that the CLI, which only needs `broker.admin.pb`, does not
load the server side (kio, the controller, the log engine).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from broker.admin.quorum import QuorumDescriber, QuorumInfo, ReplicaInfo, describe_raft
    from broker.admin.server import (
        DEFAULT_ADMIN_LISTENER,
        AdminServer,
        admin_listeners,
        parse_admin_listeners,
    )

_HOMES = {
    "QuorumDescriber": "broker.admin.quorum", "QuorumInfo": "broker.admin.quorum",
    "ReplicaInfo": "broker.admin.quorum", "describe_raft": "broker.admin.quorum",
    "DEFAULT_ADMIN_LISTENER": "broker.admin.server", "AdminServer": "broker.admin.server",
    "admin_listeners": "broker.admin.server", "parse_admin_listeners": "broker.admin.server",
}

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


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'broker.admin' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
