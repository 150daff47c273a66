"""ListConfigResources (API 74), versions 0-1 (KIP-1142, Kafka 4.1).

v0 is the former ListClientMetricsResources (KIP-714): it lists the client-metrics config
resources and carries no resource types. v1 names the resource types to list; an empty list
means every type this version supports: TOPIC (2), BROKER (4), BROKER_LOGGER (8),
CLIENT_METRICS (16) and GROUP (32). A type outside that set answers UNSUPPORTED_VERSION for
the whole request, as Kafka does.

What each type lists, from the metadata image:
  * TOPIC: every topic;
  * BROKER and BROKER_LOGGER: the unfenced brokers with an endpoint on the request's
    listener (Kafka's metadata cache's broker nodes), by id;
  * CLIENT_METRICS and GROUP: the resources of that type that hold dynamic configs.

DESCRIBE_CONFIGS on the cluster is checked before the handler (broker/handlers/_authz.py
CLUSTER_CHECKS); a refusal is CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.protocol.durations import NO_THROTTLE
from broker.protocol.kio_build import build, response_module

if TYPE_CHECKING:
    from broker.handlers.services import BrokerServices
    from broker.server import RequestContext

API_KEY = 74

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
_SUPPORTED = {0: frozenset({CLIENT_METRICS}),
              1: frozenset({TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP})}


def supported_types(version: int) -> frozenset[int]:
    return _SUPPORTED[0] if version == 0 else _SUPPORTED[1]


def list_resources(node: BrokerServices, listener: str, types: set[int]
                   ) -> list[tuple[str, int]]:
    """(name, type) of every config resource of `types`, in Kafka's order of types."""
    image = node.metadata
    out: list[tuple[str, int]] = []
    for rtype in (GROUP, CLIENT_METRICS):
        if rtype in types:
            out += [(name, rtype) for t, name in sorted(image.configs) if t == rtype]
    brokers = sorted(image.broker_endpoints(listener))
    for rtype in (BROKER_LOGGER, BROKER):
        if rtype in types:
            out += [(str(b), rtype) for b in brokers]
    if TOPIC in types:
        out += [(name, TOPIC) for name in sorted(image.topics_by_name)]
    return out


async def handle(node: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    mod = response_module(request)
    supported = supported_types(ctx.api_version)
    asked = {int(t) for t in getattr(request, "resource_types", ())} or set(supported)
    if not asked <= supported:
        return build(mod.ListConfigResourcesResponse, throttle_time=NO_THROTTLE,
                     error_code=ErrorCode.unsupported_version, config_resources=())
    items = list_resources(node, ctx.listener_name, asked)
    if ctx.api_version == 0:  # v0's answer has no resource_type: every entry is CLIENT_METRICS
        resources = tuple(build(mod.ConfigResource, resource_name=n) for n, _ in items)
    else:
        resources = tuple(build(mod.ConfigResource, resource_name=n, resource_type=t)
                          for n, t in items)
    return build(mod.ListConfigResourcesResponse, throttle_time=NO_THROTTLE,
                 error_code=ErrorCode.none, config_resources=resources)
