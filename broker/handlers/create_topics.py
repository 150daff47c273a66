"""CreateTopics (API 19), versions 0-7 (v7 answers each topic's id).

v0-v1 (dropped by Kafka 4.0, KIP-896): v0 has no validate_only (always creates) and answers
only name and error code; v1 adds validate_only and error_message; v2 throttle time.

Each topic becomes a controller CreatableTopic; the controller validates names, counts,
replication factor, assignments and configs, and answers once the records are committed
and applied on this node. From v5 a created (or validated) topic's answer carries its
partition count, replication factor and every topic config with its source, as Kafka's
controller returns them to a client allowed to describe the topic's configs. v6 (KIP-599)
answers THROTTLING_QUOTA_EXCEEDED for a topic asked for while the controller mutation quota
is exceeded (broker/handlers/_quotas.MutationQuota).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import structlog
from kio.schema.errors import ErrorCode

from broker.config import describe_topic_configs
from broker.controller.deadline import within as await_controller
from broker.controller.requests import CreatableTopic, CreateTopicResult
from broker.controller.rpc import create_topics as rpc
from broker.errors import KafkaError
from broker.handlers._authz import Op, Res, allowed
from broker.handlers._quotas import THROTTLING_QUOTA_EXCEEDED_MESSAGE, MutationQuota
from broker.protocol.durations import duration, to_ms

if TYPE_CHECKING:
    from broker.handlers.services import BrokerServices
    from broker.server import RequestContext

API_KEY = 19
log = structlog.get_logger(__name__)


async def handle(node: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    order: list[str] = []          # one answer per distinct name, in request order
    counts: dict[str, int] = {}
    for t in request.topics:
        if t.name not in counts:
            order.append(t.name)
        counts[t.name] = counts.get(t.name, 0) + 1
    results: dict[str, CreateTopicResult] = {}
    to_create: list[CreatableTopic] = []
    # CREATE on the cluster, or on the topic (else TOPIC_AUTHORIZATION_FAILED), as Kafka
    on_cluster = allowed(node, ctx, Op.CREATE, Res.CLUSTER)
    for t in request.topics:
        if counts[t.name] > 1:
            results[t.name] = CreateTopicResult(t.name, ErrorCode.invalid_request,
                                                "Duplicate topic name.")
            continue
        if not on_cluster and not allowed(node, ctx, Op.CREATE, Res.TOPIC, t.name):
            results[t.name] = CreateTopicResult(
                t.name, ErrorCode.topic_authorization_failed,
                "Authorization failed.")
            continue
        c = rpc.creatable_of(t)
        if isinstance(c, CreateTopicResult):
            results[t.name] = c
        else:
            to_create.append(c)
    validate_only = bool(getattr(request, "validate_only", False))  # v1+
    # controller_mutation_rate (KIP-599): the partitions created count; strict from v6
    quota = MutationQuota(node, ctx, strict=ctx.api_version >= 6)
    if not validate_only:
        admitted = []
        for c in to_create:
            mutations = c.num_partitions if c.num_partitions > 0 else (
                len(c.assignments) if c.assignments else node.config["num.partitions"])
            if quota.admit(mutations):
                admitted.append(c)
            else:
                results[c.name] = CreateTopicResult(c.name, ErrorCode.throttling_quota_exceeded,
                                                    THROTTLING_QUOTA_EXCEEDED_MESSAGE)
        to_create = admitted
    if to_create:
        try:
            created = await await_controller(
                lambda: node.controller.create_topics(to_create, validate_only=validate_only),
                to_ms(request.timeout, 0))
            for r in created:
                results[r.name] = r
        except KafkaError as exc:
            for c in to_create:
                results[c.name] = CreateTopicResult(c.name, exc.error_code, exc.message or None)

    dynamic_default = node.metadata.broker_config()
    dynamic_broker = node.metadata.broker_config(node.config.node_id)

    def configs_of(r: CreateTopicResult) -> tuple[ErrorCode, list[rpc.TopicConfig]]:
        if not allowed(node, ctx, Op.DESCRIBE_CONFIGS, Res.TOPIC, r.name):
            return ErrorCode.topic_authorization_failed, []  # created, configs withheld
        return ErrorCode.none, [
            rpc.TopicConfig(e.name, e.value, int(e.source), e.read_only, e.sensitive)
            for e in describe_topic_configs(node.config, r.configs,
                                            dynamic_default=dynamic_default,
                                            dynamic_broker=dynamic_broker)]

    for name in order:
        r = results[name]
        if r.error is not ErrorCode.none:
            log.info("create_topic_rejected", topic=name, error=r.error.name, reason=r.message,
                     client=ctx.client_id)
    return rpc.response(request, [results[name] for name in order], configs_of,
                        duration(quota.throttle_ms()))
