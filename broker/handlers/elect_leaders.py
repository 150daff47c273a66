"""ElectLeaders (API 43, KIP-460), versions 0-2: preferred (or, when asked, unclean)
leader elections, sent on to the active controller.

v0 has no election type (preferred); v1 adds it; v2 is flexible. Null topic partitions
(v1+) means every partition. The answer lists each partition's result; a whole-request
failure (e.g. no controller within the timeout) is the top-level error (v1+) or each
partition's error (v0).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.controller.rpc import elect_leaders as rpc

if TYPE_CHECKING:
    from broker.handlers.services import BrokerServices
    from broker.server import RequestContext

API_KEY = 43

# a refused request (CLUSTER_AUTHORIZATION_FAILED) names each partition with the error too
error_response = rpc.error_response


async def handle(node: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    return await rpc.serve(node.controller, request)
