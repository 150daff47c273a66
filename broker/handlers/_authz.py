"""Authorization in the Kafka handlers: who may do what, asked of broker/security/authorizer.

The request's principal is the connection's (`ctx.principal`: from SASL or the TLS client
certificate, else User:ANONYMOUS) and its host the peer address (`ctx.peer_host`). The
settings come from the node's config (`authorizer.class.name`, `super.users`,
`allow.everyone.if.no.acl.found`), the ACLs from its current metadata image. With no
authorizer configured every check passes (Kafka without `authorizer.class.name`).

Two kinds of checks, as Kafka's KafkaApis / ControllerApis make them:
  * whole-request checks, the same for every request of an API (CLUSTER_CHECKS): made by
    `guard`, which the dispatchers wrap around the handler; a refused request is answered
    by the module's `error_response` (or, without one, a response of the request's version
    carrying the error in its top-level error code and nothing else) and never reaches the
    handler. The controller listener guards every API (CONTROLLER_LISTENER_CHECKS).
  * per-resource checks (a topic, a group, a transactional id): made in the handler with
    `allowed`, which answers per partition or per group as Kafka does (Produce, Fetch,
    Metadata, ListOffsets, OffsetForLeaderEpoch, the group APIs, CreateTopics,
    DeleteTopics, CreatePartitions, the config APIs, DeleteRecords, InitProducerId,
    FindCoordinator, ListGroups, DescribeGroups).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any, Final, TypeVar

from kio.schema.errors import ErrorCode

from broker.handlers._context import AuthzNode
from broker.protocol.durations import NO_THROTTLE
from broker.protocol.kio_build import build, response_module
from broker.security.authorizer import (
    CLUSTER_NAME,
    AclIndex,
    AclOperation,
    AuthorizerSettings,
    ResourceType,
    authorize,
    authorize_any,
    authorized_operations,
)
from broker.server.context import RequestContext
from broker.server.dispatch import Dispatcher, HandlerResult

T = TypeVar("T")
Op = AclOperation
Res = ResourceType

# api key -> the cluster operation every request of it needs (Kafka's KafkaApis).
CLUSTER_CHECKS: Final[dict[int, AclOperation]] = {
    27: Op.CLUSTER_ACTION,  # WriteTxnMarkers: only transaction coordinators send it
    29: Op.DESCRIBE,  # DescribeAcls
    30: Op.ALTER,  # CreateAcls
    31: Op.ALTER,  # DeleteAcls
    35: Op.DESCRIBE,  # DescribeLogDirs
    43: Op.ALTER,  # ElectLeaders
    45: Op.ALTER,  # AlterPartitionReassignments
    46: Op.DESCRIBE,  # ListPartitionReassignments
    48: Op.DESCRIBE_CONFIGS,  # DescribeClientQuotas
    49: Op.ALTER_CONFIGS,  # AlterClientQuotas
    50: Op.DESCRIBE,  # DescribeUserScramCredentials
    51: Op.ALTER,  # AlterUserScramCredentials
    55: Op.DESCRIBE,  # DescribeQuorum, sent on to the quorum leader
    57: Op.ALTER,  # UpdateFeatures
    64: Op.ALTER,  # UnregisterBroker (Kafka's ControllerApis, the request forwarded to it)
    74: Op.DESCRIBE_CONFIGS,  # ListConfigResources
    80: Op.ALTER,  # AddRaftVoter, sent on to the quorum leader
    81: Op.ALTER,  # RemoveRaftVoter
    # the share coordinator's state APIs: only share-partition leaders and group
    # coordinators send them (KIP-932)
    83: Op.CLUSTER_ACTION,  # InitializeShareGroupState
    84: Op.CLUSTER_ACTION,  # ReadShareGroupState
    85: Op.CLUSTER_ACTION,  # WriteShareGroupState
    86: Op.CLUSTER_ACTION,  # DeleteShareGroupState
    87: Op.CLUSTER_ACTION,  # ReadShareGroupStateSummary
}

# The controller listener: only Skiff nodes call it, with their inter-broker or controller
# principal. Every API there needs CLUSTER_ACTION (Kafka's ControllerApis for the broker
# lifecycle and Raft RPCs), DescribeQuorum needs DESCRIBE; ApiVersions needs nothing.
DESCRIBE_QUORUM: Final = 55


# On the controller listener, as Kafka's ControllerApis: ALTER on the cluster for what an
# operator's admin client sends there (DescribeCluster, KIP-919; AddRaftVoter and
# RemoveRaftVoter, KIP-853), DESCRIBE for DescribeQuorum, CLUSTER_ACTION for the rest (what
# brokers and controllers send each other, UpdateRaftVoter included).
CONTROLLER_LISTENER_ALTER: Final = frozenset({60, 80, 81})


# Checked per resource instead: DescribeConfigs (DESCRIBE_CONFIGS, in its handler), and
# AlterConfigs / IncrementalAlterConfigs (config_change_guard: CLUSTER_ACTION for a Skiff
# broker forwarding its client's checked request, else ALTER_CONFIGS on each resource, as
# Kafka's ControllerApis).
CONTROLLER_LISTENER_PER_RESOURCE: Final = frozenset({32, 33, 44})
# DESCRIBE on the cluster: DescribeAcls, DescribeUserScramCredentials, DescribeQuorum.
CONTROLLER_LISTENER_DESCRIBE: Final = frozenset({29, 50, 55})


def controller_listener_check(api_key: int) -> AclOperation | None:
    if api_key == 18 or api_key in CONTROLLER_LISTENER_PER_RESOURCE:  # ApiVersions
        return None
    if api_key in CONTROLLER_LISTENER_DESCRIBE:
        return Op.DESCRIBE
    if api_key in CONTROLLER_LISTENER_ALTER:
        return Op.ALTER
    return Op.CLUSTER_ACTION


# ---- settings and decisions --------------------------------------------------------------

_SETTINGS: Final[dict[int, tuple[object, AuthorizerSettings]]] = {}


def settings_of(node: AuthzNode) -> AuthorizerSettings:
    """The node's authorizer settings (parsed once per config object)."""
    cfg = node.config
    hit = _SETTINGS.get(id(cfg))
    if hit is not None and hit[0] is cfg:
        return hit[1]
    settings = AuthorizerSettings.from_config(cfg)
    if len(_SETTINGS) > 64:
        _SETTINGS.clear()
    _SETTINGS[id(cfg)] = (cfg, settings)
    return settings


def enabled(node: AuthzNode) -> bool:
    return settings_of(node).enabled


# What the ACL APIs answer on a node without an authorizer (Kafka's AclApis).
SECURITY_DISABLED_MESSAGE: Final = "No Authorizer is configured."


def _index(node: AuthzNode) -> AclIndex:
    return node.metadata.acl_index


def allowed(node: AuthzNode, ctx: RequestContext, op: AclOperation, rtype: ResourceType,
            name: str = CLUSTER_NAME) -> bool:
    return allowed_for(node, ctx.principal, ctx.peer_host, op, rtype, name)


def allowed_for(node: AuthzNode, principal: str, host: str, op: AclOperation,
                rtype: ResourceType, name: str = CLUSTER_NAME) -> bool:
    """`allowed` for a caller that is not a Kafka request (the gRPC admin plane)."""
    s = settings_of(node)
    if not s.enabled:
        return True
    return authorize(s, _index(node), principal, host, op, rtype, name)


def allowed_on_any(node: AuthzNode, ctx: RequestContext, op: AclOperation,
                   rtype: ResourceType) -> bool:
    """Kafka's authorizeByResourceType: `op` on at least one resource of the type."""
    s = settings_of(node)
    if not s.enabled:
        return True
    return authorize_any(s, _index(node), ctx.principal, ctx.peer_host, op, rtype)


def operations(node: AuthzNode, ctx: RequestContext, rtype: ResourceType,
               name: str = CLUSTER_NAME) -> int:
    """The authorized-operations bitfield Metadata, DescribeGroups and DescribeCluster carry."""
    return authorized_operations(settings_of(node), _index(node), ctx.principal,
                                 ctx.peer_host, rtype, name)


def filter_allowed(node: AuthzNode, ctx: RequestContext, op: AclOperation, rtype: ResourceType,
                   items: Iterable[T], name: Callable[[T], str]) -> tuple[list[T], list[T]]:
    """(allowed, refused) of `items`, each named by `name(item)`; one decision per name."""
    ok: list[T] = []
    refused: list[T] = []
    seen: dict[str, bool] = {}
    for item in items:
        n = name(item)
        if n not in seen:
            seen[n] = allowed(node, ctx, op, rtype, n)
        (ok if seen[n] else refused).append(item)
    return ok, refused


# Kafka's ConfigResource.Type codes, and what a config check of each is made on.
_CONFIG_TOPIC, _CONFIG_GROUP = 2, 32


def config_refusal(node: AuthzNode, ctx: RequestContext, op: AclOperation, resource_type: int,
                   name: str) -> ErrorCode:
    """DESCRIBE_CONFIGS / ALTER_CONFIGS on a config resource: on the topic for TOPIC
    (TOPIC_AUTHORIZATION_FAILED), on the group for GROUP (GROUP_AUTHORIZATION_FAILED), on
    the cluster for BROKER, BROKER_LOGGER and CLIENT_METRICS (CLUSTER_AUTHORIZATION_FAILED).
    ErrorCode.none when allowed."""
    if resource_type == _CONFIG_TOPIC:
        ok, code = allowed(node, ctx, op, Res.TOPIC, name), ErrorCode.topic_authorization_failed
    elif resource_type == _CONFIG_GROUP:
        ok, code = allowed(node, ctx, op, Res.GROUP, name), ErrorCode.group_authorization_failed
    else:
        ok, code = allowed(node, ctx, op, Res.CLUSTER), ErrorCode.cluster_authorization_failed
    return ErrorCode.none if ok else code


# ---- whole-request checks ------------------------------------------------------------------


def refused_response(request: Any, code: ErrorCode) -> Any:
    """A response of the request's API and version with `code` as its top-level error and
    every other field empty (for APIs whose module has no error_response)."""
    mod = response_module(request)
    cls = getattr(mod, type(request).__name__.removesuffix("Request") + "Response")
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING or \
                f.default_factory is not dataclasses.MISSING:
            continue
        kind = f.metadata.get("kafka_type", "")
        if f.name == "error_code":
            values[f.name] = code
        elif f.name == "error_message":
            values[f.name] = None
        elif kind == "timedelta_i32":
            values[f.name] = NO_THROTTLE
        elif kind == "string":
            values[f.name] = ""
        elif kind == "bool":
            values[f.name] = False
        elif kind == "uuid":
            values[f.name] = uuid.UUID(int=0)
        elif kind.startswith("int"):
            values[f.name] = -1 if f.name.endswith("_id") else 0
        else:
            values[f.name] = ()
    return cls(**values)


def guard(handle: Any, error_response: Any, op: Callable[[int], AclOperation | None],
          code: ErrorCode) -> Any:
    """`handle` behind the whole-request check `op(api_key)` on the cluster."""

    async def guarded(node: AuthzNode, ctx: RequestContext, request: Any) -> HandlerResult:
        needed = op(ctx.api_key)
        if needed is not None and not allowed(node, ctx, needed, Res.CLUSTER):
            if error_response is not None:
                return error_response(ctx, request, code)
            return refused_response(request, code)
        return await handle(node, ctx, request)

    return guarded


def guarded_dispatcher(modules: Iterable[ModuleType]) -> Dispatcher:
    """The client listener's dispatcher: CLUSTER_CHECKS made before the handlers."""
    d = Dispatcher()
    for m in modules:
        key = int(m.API_KEY)
        err = getattr(m, "error_response", None)
        handle = m.handle
        if key in CLUSTER_CHECKS:
            handle = guard(handle, err, CLUSTER_CHECKS.get,
                           ErrorCode.cluster_authorization_failed)
        d.register(key, handle, error_response=err)
    return d


def config_change_guard(handle: Any) -> Any:
    """(Incremental)AlterConfigs on the controller listener: a Skiff broker forwards its
    client's request, already checked, with CLUSTER_ACTION; anyone else (an admin client
    bootstrapped from the controllers, KIP-919) needs ALTER_CONFIGS on each resource, as
    Kafka's ControllerApis checks it. The refused resources are answered here, the others by
    `handle`, in the request's order."""

    async def guarded(node: AuthzNode, ctx: RequestContext, request: Any) -> HandlerResult:
        if allowed(node, ctx, Op.CLUSTER_ACTION, Res.CLUSTER):
            return await handle(node, ctx, request)
        codes = [config_refusal(node, ctx, Op.ALTER_CONFIGS, int(r.resource_type),
                                r.resource_name) for r in request.resources]
        if all(c is ErrorCode.none for c in codes):
            return await handle(node, ctx, request)
        mod = response_module(request)
        ok = tuple(r for r, c in zip(request.resources, codes, strict=True)
                   if c is ErrorCode.none)
        answered = await handle(node, ctx, dataclasses.replace(request, resources=ok)) \
            if ok else None
        answers = iter(answered.responses if answered is not None else ())
        out = tuple(next(answers) if c is ErrorCode.none else build(
            mod.AlterConfigsResourceResponse, error_code=c, error_message=None,
            resource_type=r.resource_type, resource_name=r.resource_name)
            for r, c in zip(request.resources, codes, strict=True))
        if answered is None:
            cls = getattr(mod, type(request).__name__.removesuffix("Request") + "Response")
            return build(cls, throttle_time=NO_THROTTLE, responses=out)
        return dataclasses.replace(answered, responses=out)

    return guarded


def guard_controller_listener(d: Dispatcher) -> Dispatcher:
    """Every API of the controller listener behind controller_listener_check; the config
    changes behind config_change_guard."""
    out = Dispatcher()
    for key in sorted(d.api_keys()):
        entry = d.get(key)
        assert entry is not None
        handle = config_change_guard(entry.handle) if key in (33, 44) else entry.handle
        out.register(key, guard(handle, entry.error_response, controller_listener_check,
                                ErrorCode.cluster_authorization_failed),
                     error_response=entry.error_response)
    return out
