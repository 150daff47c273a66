"""Small helpers shared by the group handlers (broker/handlers/<group api>.py)."""

from __future__ import annotations

from typing import Any

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
# READ (3), DELETE (6), DESCRIBE (8): what Kafka reports for a group without ACLs
GROUP_AUTHORIZED_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)


def client_host(ctx: Any) -> str:
    """Kafka shows a member's host as InetAddress.toString does: "/127.0.0.1"."""
    return "/" + str(getattr(ctx, "peer_host", ""))
