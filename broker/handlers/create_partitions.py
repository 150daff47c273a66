"""CreatePartitions (API 37), versions 0-3: raise a topic's partition count.

`count` is the new total; `assignments`, when given, lists the replicas of each new
partition. The controller validates and answers once the new partitions are committed and
applied on this node.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.controller.deadline import within as await_controller
from broker.controller.requests import CreatePartitionsResult, CreatePartitionsTopic
from broker.controller.rpc import create_partitions as rpc
from broker.errors import KafkaError
from broker.handlers._authz import Op, Res, allowed
from broker.handlers._quotas import THROTTLING_QUOTA_EXCEEDED_MESSAGE, MutationQuota
from broker.protocol.durations import duration, to_ms

if TYPE_CHECKING:
    from broker.handlers.services import BrokerServices
    from broker.server import RequestContext

API_KEY = 37


async def handle(node: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    counts: dict[str, int] = {}
    for t in request.topics:
        counts[t.name] = counts.get(t.name, 0) + 1
    order = list(counts)  # one answer per distinct name, in request order
    results: dict[str, CreatePartitionsResult] = {}
    wanted: list[CreatePartitionsTopic] = []
    for t in request.topics:
        if counts[t.name] > 1:
            results[t.name] = CreatePartitionsResult(t.name, ErrorCode.invalid_request,
                                                     "Duplicate topic name.")
            continue
        if not allowed(node, ctx, Op.ALTER, Res.TOPIC, t.name):
            results[t.name] = CreatePartitionsResult(
                t.name, ErrorCode.topic_authorization_failed, "Authorization failed.")
            continue
        wanted.append(rpc.topic_of(t))
    # controller_mutation_rate (KIP-599): the partitions added count; strict from v3
    quota = MutationQuota(node, ctx, strict=ctx.api_version >= 3)
    if not request.validate_only:
        image = node.metadata
        admitted = []
        for w in wanted:
            topic = image.topic(w.name)
            if quota.admit(max(0, w.count - (topic.num_partitions if topic else 0))):
                admitted.append(w)
            else:
                results[w.name] = CreatePartitionsResult(
                    w.name, ErrorCode.throttling_quota_exceeded,
                    THROTTLING_QUOTA_EXCEEDED_MESSAGE)
        wanted = admitted
    if wanted:
        try:
            done = await await_controller(
                lambda: node.controller.create_partitions(
                    wanted, validate_only=request.validate_only),
                to_ms(request.timeout, 0))
            for r in done:
                results[r.name] = r
        except KafkaError as exc:
            for w in wanted:
                results[w.name] = CreatePartitionsResult(w.name, exc.error_code,
                                                         exc.message or None)
    return rpc.response(request, [results[n] for n in order],
                        duration(quota.throttle_ms()))
