"""ConfigurationControlManager: AlterConfigs and IncrementalAlterConfigs on topics, brokers,
the cluster default, groups and client-metrics subscriptions (broker/config/
resource_configs.py), checked against Kafka's config definitions."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode

from broker import config as cfgmod
from broker.config import ConfigError, resource_configs
from broker.controller.control_base import ControlManagerBase
from broker.controller.requests import (
    AlterConfigOp,
    AlterConfigsResource,
    AlterConfigsResult,
    ConfigResource,
    ControllerResult,
    IncrementalAlterConfigsResource,
)
from broker.controller.validation import topic_name_error
from broker.metadata import records as rec
from broker.metadata.features import (
    CORDONED_LOG_DIRS_METADATA_VERSION,
    METADATA_VERSION,
    metadata_version_name,
)
from broker.metadata.image import (
    MetadataImage,
)
from broker.metadata.records import RESOURCE_BROKER, RESOURCE_TOPIC

# Broker keys that AlterConfigs may set dynamically (cluster default or per broker): the
# broker-level fallback of each topic config, as Kafka's DynamicLogConfig allows: only the
# first synonym (ServerTopicConfigSynonyms.TOPIC_CONFIG_SYNONYMS), so log.retention.ms but not
# log.retention.minutes or log.retention.hours, log.roll.ms but not log.roll.hours.
DYNAMIC_BROKER_KEYS = frozenset(
    d.synonyms[0] for d in cfgmod.TOPIC_CONFIGS.values() if d.synonyms
) | {"log.cleaner.threads", "num.io.threads", "num.replica.fetchers",
     "max.connections", "max.connections.per.ip", "max.connections.per.ip.overrides",
     "max.connection.creation.rate", "log.retention.check.interval.ms",
     "cordoned.log.dirs",
     # share-group dead-letter queues (broker/share/dlq.py reads them from the image)
     "errors.deadletterqueue.topic.name.prefix",
     "errors.deadletterqueue.auto.create.topics.enable"}

# Kafka's DynamicConfig.Broker per-broker-only keys among those Skiff lets change
PER_BROKER_ONLY_KEYS = frozenset({"cordoned.log.dirs"})

_R = TypeVar("_R", AlterConfigsResource, IncrementalAlterConfigsResource)

# Resources whose configs Kafka's controller checks only as they are after the change
# (ConfigurationControlManager.validateAlterConfig: the configs left set), so that an
# IncrementalAlterConfigs DELETE of any name, one Skiff does not know included, is accepted
# and changes nothing when the name is not set. MirrorMaker 2 relies on it: its topic-config
# sync sends a DELETE for every config at its default on the source, and Kafka 4.4 lists
# topic configs Skiff does not serve (errors.deadletterqueue.group.enable, remote.*, ...).
_CHECKED_WHEN_SET = frozenset({RESOURCE_TOPIC, resource_configs.RESOURCE_GROUP})


class ConfigurationControlManager(ControlManagerBase):
    # -- AlterConfigs / IncrementalAlterConfigs --------------------------------------

    def _check_resource(self, image: MetadataImage,
                        r: ConfigResource) -> tuple[ErrorCode, str] | None:
        if r.resource_type == RESOURCE_TOPIC:
            if topic_name_error(r.resource_name) is not None:
                return ErrorCode.invalid_topic_exception, topic_name_error(r.resource_name) or ""
            if r.resource_name not in image.topics_by_name:
                return (ErrorCode.unknown_topic_or_partition,
                        f"The topic '{r.resource_name}' does not exist.")
            return None
        if r.resource_type == RESOURCE_BROKER:
            if r.resource_name == "":
                return None
            try:
                int(r.resource_name)
            except ValueError:
                return (ErrorCode.invalid_request,
                        f"Invalid broker name {r.resource_name!r}: must be a broker id or empty")
            return None
        if r.resource_type in (resource_configs.RESOURCE_GROUP,
                               resource_configs.RESOURCE_CLIENT_METRICS):
            if r.resource_name == "":
                return ErrorCode.invalid_request, "Resource name must not be empty"
            return None
        return ErrorCode.invalid_request, f"Unsupported resource type {r.resource_type}"

    def _check_value(self, image: MetadataImage, r: ConfigResource, name: str,
                     value: str | None) -> tuple[ErrorCode, str] | None:
        """Why (name, value) cannot be set on the resource, or None. A broker key that is not
        dynamic is INVALID_REQUEST, as Kafka's broker answers it ("Cannot update these configs
        dynamically: [log.dirs]"), and so is any other refusal on a BROKER resource
        (_value_error); a bad topic config is INVALID_CONFIG."""
        try:
            if r.resource_type == resource_configs.RESOURCE_GROUP:
                resource_configs.validate_group_config(self.settings.node_config, name, value)
                return None
            if r.resource_type == resource_configs.RESOURCE_CLIENT_METRICS:
                resource_configs.validate_client_metrics_config(name, value)
                return None
            if r.resource_type == RESOURCE_TOPIC:
                if name not in cfgmod.TOPIC_CONFIGS:
                    return ErrorCode.invalid_config, f"Unknown topic config name: {name}"
                cfgmod.validate_topic_configs({name: value})
                return None
            d = cfgmod.BROKER_CONFIGS.get(name)
            if d is None and value is None:
                # deleting a key Skiff does not know removes nothing, as on Kafka (where it
                # may be set): kafka-reassign-partitions --verify clears the replication
                # throttle rates on every broker once a move is done
                return None
            if d is None:
                return self._value_error(r), f"Unknown broker config name: {name}"
            if name not in DYNAMIC_BROKER_KEYS:
                return (ErrorCode.invalid_request,
                        f"Cannot update these configs dynamically: [{name}]")
            if name in PER_BROKER_ONLY_KEYS and r.resource_name == "":
                return (ErrorCode.invalid_request,
                        "Cannot update these configs at default cluster level, broker id must "
                        f"be specified: [{name}]")
            if (name == "cordoned.log.dirs" and (value or "").strip()
                    and image.finalized_level(METADATA_VERSION)
                    < CORDONED_LOG_DIRS_METADATA_VERSION):
                return (ErrorCode.invalid_config,
                        "The cordoned.log.dirs configuration value cannot be set because it "
                        "requires metadata.version >= "
                        f"{metadata_version_name(CORDONED_LOG_DIRS_METADATA_VERSION)}")
            if value is not None:
                d.parse(value)
        except ConfigError as exc:
            return self._value_error(r), str(exc)
        except resource_configs.ResourceConfigError as exc:
            return exc.code, exc.message
        return None

    @staticmethod
    def _value_error(r: ConfigResource) -> ErrorCode:
        """A refused value's code: Kafka's brokers answer INVALID_REQUEST for a BROKER
        resource (ConfigAdminManager.validateBrokerConfigChange, KAFKA-13609) and
        INVALID_CONFIG for a topic."""
        return ErrorCode.invalid_request if r.resource_type == RESOURCE_BROKER \
            else ErrorCode.invalid_config

    def _diff(self, r: ConfigResource, old: Mapping[str, str],
              new: Mapping[str, str]) -> list[Any]:
        out = []
        for k in sorted(set(old) | set(new)):
            if k in new and old.get(k) != new[k]:
                out.append(rec.config_record(r.resource_type, r.resource_name, k, new[k]))
            elif k not in new:
                out.append(rec.config_record(r.resource_type, r.resource_name, k, None))
        return out

    def _admissible(self, image: MetadataImage, resources: Sequence[_R],
                    results: list[AlterConfigsResult]) -> Iterator[_R]:
        """The resources of an (Incremental)AlterConfigs request that are named once and pass
        `_check_resource`; the others get their error appended to `results` as they come,
        so results stay in request order while the caller appends for each one yielded."""
        counts: dict[ConfigResource, int] = {}
        for res in resources:
            counts[res.resource] = counts.get(res.resource, 0) + 1
        for res in resources:
            r = res.resource
            if counts[r] > 1:
                results.append(AlterConfigsResult(r, ErrorCode.invalid_request,
                                                  "Duplicate resource."))
                continue
            bad = self._check_resource(image, r)
            if bad is not None:
                results.append(AlterConfigsResult(r, *bad))
                continue
            yield res

    def alter_configs(
        self, image: MetadataImage, resources: Sequence[AlterConfigsResource],
        validate_only: bool = False,
    ) -> ControllerResult[list[AlterConfigsResult]]:
        """Legacy AlterConfigs: each resource's dynamic configs become exactly the given set."""
        records: list[Any] = []
        results: list[AlterConfigsResult] = []
        for res in self._admissible(image, resources, results):
            r = res.resource
            new: dict[str, str] = {}
            problem: tuple[ErrorCode, str] | None = None
            for name, value in res.configs.items():
                if value is None:
                    problem = (ErrorCode.invalid_config, f"Null value not supported for : {name}")
                    break
                problem = self._check_value(image, r, name, value)
                if problem is not None:
                    break
                new[name] = value
            if problem is not None:
                results.append(AlterConfigsResult(r, *problem))
                continue
            old = image.configs.get((r.resource_type, r.resource_name), {})
            results.append(AlterConfigsResult(r))
            if not validate_only:
                records.extend(self._diff(r, old, new))
        return ControllerResult(records, results)

    def incremental_alter_configs(
        self, image: MetadataImage, resources: Sequence[IncrementalAlterConfigsResource],
        validate_only: bool = False,
    ) -> ControllerResult[list[AlterConfigsResult]]:
        records: list[Any] = []
        results: list[AlterConfigsResult] = []
        for res in self._admissible(image, resources, results):
            r = res.resource
            old = dict(image.configs.get((r.resource_type, r.resource_name), {}))
            new = dict(old)
            seen: set[str] = set()
            problem: tuple[ErrorCode, str] | None = None
            for name, op, value in res.ops:
                if name in seen:
                    problem = (ErrorCode.invalid_request, f"Duplicate config key: {name}")
                    break
                seen.add(name)
                try:
                    op = AlterConfigOp(op)
                except ValueError:
                    problem = (ErrorCode.invalid_request, f"Unknown alter config operation {op}")
                    break
                if r.resource_type in (resource_configs.RESOURCE_GROUP,
                                       resource_configs.RESOURCE_CLIENT_METRICS) \
                        and op in (AlterConfigOp.APPEND, AlterConfigOp.SUBTRACT):
                    # Kafka 4.4's words, for these resources' list configs (metrics, match) too
                    problem = (ErrorCode.invalid_config,
                               f"Can't {op.name} to key {name} because its type is not LIST.")
                    break
                if not (op is AlterConfigOp.DELETE and r.resource_type in _CHECKED_WHEN_SET):
                    problem = self._check_value(
                        image, r, name, value if op is not AlterConfigOp.DELETE else None)
                    if problem is not None:
                        break
                if op is AlterConfigOp.SET:
                    if value is None:
                        problem = (ErrorCode.invalid_config,
                                   f"Null value not supported for : {name}")
                        break
                    new[name] = value
                elif op is AlterConfigOp.DELETE:
                    new.pop(name, None)
                else:
                    ctype = self._config_type(r, name)
                    if ctype is not cfgmod.ConfigType.LIST:
                        problem = (ErrorCode.invalid_config,
                                   f"Config value append is not allowed for config key: {name}"
                                   if op is AlterConfigOp.APPEND else
                                   f"Config value subtract is not allowed for config key: {name}")
                        break
                    current = self._current_list(r, name, new)
                    items = [x.strip() for x in (value or "").split(",") if x.strip()]
                    if op is AlterConfigOp.APPEND:
                        merged = current + [x for x in items if x not in current]
                    else:
                        merged = [x for x in current if x not in items]
                    joined = ",".join(merged)
                    problem = self._check_value(image, r, name, joined)
                    if problem is not None:
                        break
                    new[name] = joined
            if problem is not None:
                results.append(AlterConfigsResult(r, *problem))
                continue
            results.append(AlterConfigsResult(r))
            if not validate_only:
                records.extend(self._diff(r, old, new))
        return ControllerResult(records, results)

    @staticmethod
    def _config_type(r: ConfigResource, name: str) -> cfgmod.ConfigType | None:
        if r.resource_type in (resource_configs.RESOURCE_GROUP,
                               resource_configs.RESOURCE_CLIENT_METRICS):
            return resource_configs.config_type(r.resource_type, name)
        if r.resource_type == RESOURCE_TOPIC:
            td = cfgmod.TOPIC_CONFIGS.get(name)
            return None if td is None else td.type
        bd = cfgmod.BROKER_CONFIGS.get(name)
        return None if bd is None else bd.type

    def _current_list(self, r: ConfigResource, name: str, new: Mapping[str, str]) -> list[str]:
        """The list value APPEND/SUBTRACT start from: the dynamic value, else the default."""
        if name in new:
            return [x.strip() for x in new[name].split(",") if x.strip()]
        if r.resource_type == resource_configs.RESOURCE_CLIENT_METRICS:
            return []  # metrics and match default to nothing
        if r.resource_type == RESOURCE_TOPIC:
            td = cfgmod.TOPIC_CONFIGS[name]
            nc = self.settings.node_config
            if nc is not None:
                v = cfgmod.effective_topic_configs(nc, {}).get(name)
            else:
                syn = cfgmod.BROKER_CONFIGS.get(td.synonyms[0]) if td.synonyms else None
                v = syn.default if syn is not None else td.default
            return list(v or [])
        bd = cfgmod.BROKER_CONFIGS[name]
        return list(bd.default or [])
