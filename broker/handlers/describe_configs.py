"""DescribeConfigs (API 32), versions 0-4: topic and broker configs with their sources.

As Kafka's broker answers it:
  * TOPIC (2): every topic config (or the requested keys) with value and source —
    DYNAMIC_TOPIC_CONFIG for the topic's overrides (from the metadata image), else the broker
    value it falls back to (dynamic cluster default, static file, Kafka default);
    an illegal name is INVALID_TOPIC_EXCEPTION, an unknown topic UNKNOWN_TOPIC_OR_PARTITION;
  * BROKER (4) named by this node's id: every broker config, layered dynamic per-broker,
    dynamic cluster default, static, default; sensitive values are hidden;
    BROKER with an empty name: the dynamic cluster-default configs only;
    another broker's id, or a name that is not an id: INVALID_REQUEST (clients send this
    request to the broker they describe);
  * BROKER_LOGGER (8) for this node: no loggers to report (Skiff has no log4j loggers);
    other resource types: INVALID_REQUEST.
Synonyms (v1+) when asked; documentation and config types from v3. v0 (dropped by Kafka 4.0,
KIP-896) has no source: its is_default is true for a value from Kafka's defaults
(DEFAULT_CONFIG), as Kafka 3.9 answered.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.config import (
    BROKER_CONFIGS,
    ConfigEntry,
    ConfigSource,
)
from broker.controller.controller import DYNAMIC_BROKER_KEYS
from broker.errors import KafkaError
from broker.handlers._authz import Op, config_refusal
from broker.metadata.config_describe import describe_resource
from broker.metadata.records import RESOURCE_BROKER
from broker.protocol.durations import NO_THROTTLE
from broker.protocol.kio_build import build, response_module

if TYPE_CHECKING:
    from broker.handlers.services import BrokerServices
    from broker.server import RequestContext

API_KEY = 32


def _doc(name: str, resource_type: int) -> str | None:
    if resource_type == RESOURCE_BROKER:
        d = BROKER_CONFIGS.get(name)
        if d is not None and d.doc:
            return d.doc
    return None


def _read_only(e: ConfigEntry, resource_type: int) -> bool:
    # Kafka's rule: a broker config is read-only unless it can be altered dynamically, which
    # is exactly the set the controller accepts in AlterConfigs.
    if resource_type == RESOURCE_BROKER:
        return e.name not in DYNAMIC_BROKER_KEYS
    return e.read_only


def _entry(mod: Any, e: ConfigEntry, resource_type: int, include_documentation: bool) -> Any:
    return build(
        mod.DescribeConfigsResourceResult, name=e.name,
        value=None if e.sensitive else e.value, read_only=_read_only(e, resource_type),
        config_source=int(e.source), is_default=e.source is ConfigSource.DEFAULT_CONFIG,
        is_sensitive=e.sensitive,
        synonyms=tuple(build(mod.DescribeConfigsSynonym, name=s.name,
                             value=None if e.sensitive else s.value, source=int(s.source))
                       for s in e.synonyms),
        config_type=int(e.type),
        documentation=_doc(e.name, resource_type) if include_documentation else None,
    )


async def handle(node: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    mod = response_module(request)
    include_synonyms = bool(getattr(request, "include_synonyms", False))
    include_documentation = bool(getattr(request, "include_documentation", False))
    results = []
    for r in request.resources:
        # null or empty: every config, as Kafka reads it
        names = list(r.configuration_keys) if r.configuration_keys else None
        refused = config_refusal(node, ctx, Op.DESCRIBE_CONFIGS, int(r.resource_type),
                                 r.resource_name)
        try:
            if refused is not ErrorCode.none:
                raise KafkaError(refused, "")
            entries = describe_resource(node.metadata, node.config, node.node_id, r.resource_type,
                                        r.resource_name, names, include_synonyms)
        except KafkaError as exc:
            results.append(build(
                mod.DescribeConfigsResult, error_code=exc.error_code,
                error_message=exc.message or None, resource_type=r.resource_type,
                resource_name=r.resource_name, configs=()))
            continue
        results.append(build(
            mod.DescribeConfigsResult, error_code=ErrorCode.none, error_message=None,
            resource_type=r.resource_type, resource_name=r.resource_name,
            configs=tuple(_entry(mod, e, r.resource_type, include_documentation)
                          for e in entries)))
    return build(mod.DescribeConfigsResponse, throttle_time=NO_THROTTLE, results=tuple(results))
