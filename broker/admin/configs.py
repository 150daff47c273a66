"""ConfigService: broker and topic configs with their sources; set and delete."""

from __future__ import annotations

from typing import Any

import grpc
from kio.schema.errors import ErrorCode

from broker.admin.errors import AdminError, S, rpc_errors
from broker.admin.forward import Forwarder, forwards_writes
from broker.admin.pb import configs, configs_grpc
from broker.admin.services import AdminServices
from broker.config import BROKER_CONFIGS, TOPIC_CONFIGS, ConfigEntry, ConfigSource
from broker.controller.controller import DYNAMIC_BROKER_KEYS
from broker.controller.requests import (
    AlterConfigOp,
    ConfigResource,
    IncrementalAlterConfigsResource,
)
from broker.errors import KafkaError
from broker.metadata.config_describe import describe_resource
from broker.metadata.records import RESOURCE_BROKER, RESOURCE_TOPIC

_SERVICE = configs.DESCRIPTOR.services_by_name["ConfigService"]
_DYNAMIC = {ConfigSource.DYNAMIC_TOPIC_CONFIG, ConfigSource.DYNAMIC_BROKER_CONFIG,
            ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG}


def _kind(resource_type: int) -> str:
    return {RESOURCE_TOPIC: "topic", RESOURCE_BROKER: "broker"}.get(resource_type, "?")


def check_resource(node: AdminServices, resource_type: int, name: str, *,
                   for_describe: bool) -> None:
    if resource_type == RESOURCE_TOPIC:
        if not name:
            raise AdminError(S.INVALID_ARGUMENT, "a topic resource needs the topic name")
        if node.metadata.topic(name) is None:
            raise AdminError(S.NOT_FOUND, f"topic '{name}' does not exist")
    elif resource_type == RESOURCE_BROKER:
        if name == "":
            return
        try:
            broker_id = int(name)
        except ValueError:
            raise AdminError(S.INVALID_ARGUMENT,
                             f"a broker resource is a broker id or '' (the cluster default), "
                             f"not {name!r}") from None
        if node.metadata.broker(broker_id) is None and broker_id != node.node_id:
            raise AdminError(S.NOT_FOUND, f"broker {broker_id} is not registered")
        if for_describe and broker_id != node.node_id:
            raise AdminError(S.FAILED_PRECONDITION,
                             f"node {node.node_id} describes only its own broker configs; ask "
                             f"broker {broker_id}'s admin listener, or describe the cluster "
                             "default (broker '')")
    else:
        raise AdminError(S.INVALID_ARGUMENT,
                         "resource type must be TOPIC (2) or BROKER (4)")


def _entry(e: ConfigEntry, resource_type: int) -> Any:
    read_only = (e.name not in DYNAMIC_BROKER_KEYS if resource_type == RESOURCE_BROKER
                 else e.read_only)
    msg = configs.ConfigEntry(
        name=e.name, source=int(e.source), read_only=read_only, sensitive=e.sensitive,
        type=e.type.name,
        synonyms=[configs.ConfigSynonym(name=s.name, source=int(s.source),
                                        **({} if s.value is None or e.sensitive
                                           else {"value": s.value}))
                  for s in e.synonyms])
    if e.value is not None and not e.sensitive:
        msg.value = e.value
    return msg


class ConfigService(configs_grpc.ConfigServiceServicer):  # type: ignore[misc]
    def __init__(self, node: AdminServices, forwarder: Forwarder | None = None) -> None:
        self.node = node
        self.forwarder = forwarder

    @rpc_errors
    async def DescribeConfigs(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        r = request.resource
        check_resource(self.node, r.type, r.name, for_describe=True)
        names = list(request.names) or None
        if names:
            known = TOPIC_CONFIGS if r.type == RESOURCE_TOPIC else BROKER_CONFIGS
            unknown = [n for n in names if n not in known]
            if unknown:
                raise AdminError(S.INVALID_ARGUMENT,
                                 f"unknown {_kind(r.type)} config(s): {', '.join(unknown)}")
        entries = describe_resource(self.node.metadata, self.node.config, self.node.node_id,
                                        r.type, r.name, names, request.include_synonyms)
        if request.dynamic_only:
            entries = [e for e in entries if e.source in _DYNAMIC]
        return configs.DescribeConfigsResponse(
            resource=configs.ConfigResource(type=r.type, name=r.name),
            entries=[_entry(e, r.type) for e in entries])

    @rpc_errors
    @forwards_writes(_SERVICE)
    async def AlterConfigs(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        if not request.changes:
            raise AdminError(S.INVALID_ARGUMENT, "no config changes given")
        grouped: dict[ConfigResource, list[tuple[str, AlterConfigOp, str | None]]] = {}
        for c in request.changes:
            check_resource(self.node, c.resource_type, c.resource_name, for_describe=False)
            if not c.name:
                raise AdminError(S.INVALID_ARGUMENT, "a config change needs the key name")
            res = ConfigResource(c.resource_type, c.resource_name)
            if c.HasField("value"):
                grouped.setdefault(res, []).append((c.name, AlterConfigOp.SET, c.value))
            else:
                grouped.setdefault(res, []).append((c.name, AlterConfigOp.DELETE, None))
        # all or nothing: a refused resource leaves the others unchanged
        results = await self.node.controller.incremental_alter_configs(
            [IncrementalAlterConfigsResource(r, ops) for r, ops in grouped.items()],
            validate_only=request.validate_only, all_or_nothing=True)
        for result in results:
            if result.error is not ErrorCode.none:
                r = result.resource
                where = f"{_kind(r.resource_type)} '{r.resource_name}'"
                raise KafkaError(result.error, f"{where}: {result.message or result.error.name}")
        return configs.AlterConfigsResponse(resources=[
            configs.ConfigResource(type=r.resource_type, name=r.resource_name) for r in grouped])
