"""ElectLeaders (API 43, KIP-460), versions 0-2: preferred (or, when asked, unclean)
leader elections, sent on to the active controller.

v0 has no election type (preferred); v1 adds it; v2 is flexible. Null topic partitions
(v1+) means every partition. The answer lists each partition's result; a whole-request
failure (e.g. no controller within the timeout) is the top-level error (v1+) or each
partition's error (v0).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.controller.deadline import within as await_controller
from broker.controller.requests import ElectLeadersResult
from broker.controller.rpc import elect_leaders as rpc
from broker.errors import KafkaError
from broker.protocol.durations import to_ms

if TYPE_CHECKING:
    from broker.handlers.services import BrokerServices
    from broker.server import RequestContext

API_KEY = 43


async def handle(node: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    try:
        election_type, asked = rpc.parse(request)
        results = await await_controller(
            lambda: node.controller.elect_leaders(election_type, asked),
            to_ms(request.timeout, 0))
    except KafkaError as exc:
        if ctx.api_version > 0:
            return rpc.response(request, [], exc.error_code)
        failed = [ElectLeadersResult(t, p, exc.error_code)
                  for t, p in rpc.partitions_of(request) or ()]
        return rpc.response(request, failed, exc.error_code)
    return rpc.response(request, results)
