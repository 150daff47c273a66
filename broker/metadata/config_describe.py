"""The configs of one resource as a broker reports them: DescribeConfigs (broker/handlers/
describe_configs.py) and the admin plane's config service (broker/admin/configs.py) both
answer from here.

TOPIC: every topic config (or the requested keys) with value and source; BROKER named by
this node's id: every broker config, layered; BROKER with an empty name: the dynamic
cluster-default configs only; BROKER_LOGGER for this node: none; GROUP and CLIENT_METRICS:
broker/config/resource_configs.py (any name: defaults where nothing is set, as Kafka).
Errors as Kafka's broker raises them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from broker.config import (
    BROKER_CONFIGS,
    ConfigEntry,
    ConfigSource,
    ConfigSynonym,
    describe_broker_configs,
    describe_topic_configs,
    format_value,
    resource_configs,
)
from broker.controller.validation import topic_name_error
from broker.errors import KafkaError
from broker.metadata.records import RESOURCE_BROKER, RESOURCE_TOPIC

if TYPE_CHECKING:
    from broker.config import NodeConfig
    from broker.metadata.image import MetadataImage

RESOURCE_BROKER_LOGGER = 8


def _cluster_default_entries(dynamic_default: Mapping[str, str], names: Sequence[str] | None,
                             include_synonyms: bool) -> list[ConfigEntry]:
    out: list[ConfigEntry] = []
    for name in sorted(dynamic_default):
        if names is not None and name not in names:
            continue
        d = BROKER_CONFIGS.get(name)
        if d is None:
            continue
        value = format_value(d.type, d.parse(dynamic_default[name]))
        src = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        out.append(ConfigEntry(
            name, None if d.sensitive else value, src, d.type, sensitive=d.sensitive,
            synonyms=(ConfigSynonym(name, value, src),) if include_synonyms else ()))
    return out


def describe_resource(image: MetadataImage, cfg: NodeConfig, node_id: int, resource_type: int,
                      resource_name: str, names: Sequence[str] | None,
                      include_synonyms: bool) -> list[ConfigEntry]:
    """The entries of one resource as broker `node_id` reports them; raises KafkaError for the
    resource's error."""
    if resource_type == RESOURCE_TOPIC:
        problem = topic_name_error(resource_name)
        if problem is not None:
            raise KafkaError(ErrorCode.invalid_topic_exception, problem)
        if image.topic(resource_name) is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition,
                             f"The topic '{resource_name}' does not exist.")
        return describe_topic_configs(cfg, image.topic_config(resource_name), names,
                                      include_synonyms, dynamic_default=image.broker_config(),
                                      dynamic_broker=image.broker_config(node_id))
    if resource_type == RESOURCE_BROKER:
        if resource_name == "":
            return _cluster_default_entries(image.broker_config(), names, include_synonyms)
        _require_this_broker(node_id, resource_name)
        return describe_broker_configs(
            cfg, names, include_synonyms,
            dynamic_broker=image.broker_config(node_id),
            dynamic_default=image.broker_config())
    if resource_type == RESOURCE_BROKER_LOGGER:
        if resource_name == "":
            raise KafkaError(ErrorCode.invalid_request, "Broker id must not be empty")
        _require_this_broker(node_id, resource_name)
        return []
    if resource_type == resource_configs.RESOURCE_GROUP:
        return resource_configs.describe_group(
            cfg, image.configs.get((resource_type, resource_name), {}), names, include_synonyms)
    if resource_type == resource_configs.RESOURCE_CLIENT_METRICS:
        return resource_configs.describe_client_metrics(
            image.configs.get((resource_type, resource_name), {}), names, include_synonyms)
    raise KafkaError(ErrorCode.invalid_request, f"Unsupported resource type: {resource_type}")


def _require_this_broker(node_id: int, resource_name: str) -> None:
    try:
        broker_id = int(resource_name)
    except ValueError:
        raise KafkaError(ErrorCode.invalid_request,
                         f"Broker id must be an integer, but it is: {resource_name}") from None
    if broker_id != node_id:
        raise KafkaError(ErrorCode.invalid_request,
                         f"Unexpected broker id, expected {node_id} or empty string, "
                         f"but received {resource_name}")
