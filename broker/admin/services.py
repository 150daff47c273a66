"""What the admin plane may use of the node it runs in: the handlers' narrow surface
(broker/handlers/services.py: config, metadata image, replica manager, controller channel,
quotas) plus what only the admin plane reads, each typed and named, instead of the whole Node
(broker/node) probed with `getattr`.

A coordinator or the quorum driver that a node does not run is None: a controller-only node
has no group or transaction coordinator, and the admin tests' node has no Raft driver.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from broker.handlers.services import BrokerServices

if TYPE_CHECKING:
    from broker.group.shell import GroupCoordinatorService
    from broker.protocol.transport import ConnectionSecurity
    from broker.share.coordinator_shell import ShareCoordinatorService
    from broker.share.shell import ShareService
    from broker.txn.shell import TransactionCoordinatorService
    from raft.driver import RaftDriver


class QuorumHandle(Protocol):
    """The node's metadata quorum driver (broker/node/quorum.py), as the admin plane reads it:
    the Raft driver (leader and epoch, KIP-853 voter changes)."""

    @property
    def driver(self) -> RaftDriver: ...


class AdminServices(BrokerServices, Protocol):
    # the share groups' service, made on first use (broker/share/shell.py share_service_of)
    share_groups: ShareService | None

    @property
    def ready(self) -> asyncio.Event:
        """Set once the node is registered and unfenced (or, controller-only, started)."""
        ...

    @property
    def clock(self) -> Callable[[], int]:
        """Wall-clock milliseconds."""
        ...

    @property
    def quorum(self) -> QuorumHandle | None: ...

    @property
    def kraft_version(self) -> int:
        """The metadata quorum's kraft.version (0 static voters, 1 voters in the log)."""
        ...

    @property
    def group_coordinator(self) -> GroupCoordinatorService | None: ...

    @property
    def txn_coordinator(self) -> TransactionCoordinatorService | None: ...

    @property
    def share_coordinator(self) -> ShareCoordinatorService | None: ...

    @property
    def inter_broker_security(self) -> ConnectionSecurity | None:
        """How this node reaches other brokers' inter-broker listeners."""
        ...

    @property
    def controller_security(self) -> ConnectionSecurity | None:
        """How this node reaches the controllers' listeners."""
        ...

