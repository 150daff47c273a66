"""The configs of GROUP (32, KIP-848) and CLIENT_METRICS (16, KIP-714) config resources:
what IncrementalAlterConfigs may set on them (checked by the controller, with Kafka 4.4's
errors) and what DescribeConfigs reports. Their values live in the metadata log as
ConfigRecords, like topic and broker configs.

GROUP: `consumer.session.timeout.ms` and `consumer.heartbeat.interval.ms`, within the
node's group.consumer.{min,max}.session.timeout.ms and
group.consumer.{min,max}.heartbeat.interval.ms, used by the consumer-protocol group
coordinator (broker/group/consumer.py); for share groups (broker/share)
`share.session.timeout.ms`, `share.heartbeat.interval.ms`,
`share.record.lock.duration.ms`, `share.delivery.count.limit` and
`share.partition.max.record.locks` within the node's group.share.{min,max}.* bounds,
`share.auto.offset.reset` (latest or earliest), `share.isolation.level`
(read_uncommitted or read_committed) and `share.renew.acknowledge.enable` (true: RENEW
acknowledgements, KIP-1222, are taken); the dead-letter queue's
`errors.deadletterqueue.topic.name` and `errors.deadletterqueue.copy.record.enable`
(KIP-1191, broker/share/dlq.py); for streams groups (broker/group/streams.py)
`streams.session.timeout.ms`, `streams.heartbeat.interval.ms`,
`streams.num.standby.replicas`, `streams.initial.rebalance.delay.ms`,
`streams.task.offset.interval.ms` (at least the node's
group.streams.min.task.offset.interval.ms), `streams.num.warmup.replicas` (at most
group.streams.max.warmup.replicas), `streams.acceptable.recovery.lag` (a LONG),
`streams.assignor.name` (one of the node's group.streams.assignors; unset, the first) and
`streams.rack.aware.assignment.tags` (a LIST without empty or repeated keys), with Kafka
4.4's words; as Kafka 4.4 (whose GroupConfig makes them internal), the task offset
interval, warm-up replicas and recovery lag are described only when the group sets them.
For all three kinds `{consumer,share,streams}.assignment.interval.ms` (the least time
between two target assignments, Kafka 4.4's batching) within the node's
group.{consumer,share,streams}.{min,max}.assignment.interval.ms, and
`{consumer,share,streams}.assignor.offload.enable` (a BOOLEAN, internal in Kafka 4.4 so
described only when set; Kafka 4.4 takes it and runs the assignor within the heartbeat
whatever it says, and so does Skiff).

CLIENT_METRICS: a subscription: `metrics` (metric-name prefixes, `*` for all), `interval.ms`
(100 .. 3600000) and `match` (`selector=regex` entries on client_instance_id, client_id,
client_software_name, client_software_version, client_source_address, client_source_port),
used by GetTelemetrySubscriptions (broker/metrics/telemetry.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from broker.config.describe import ConfigEntry, ConfigSynonym
from broker.config.types import ConfigSource, ConfigType

RESOURCE_CLIENT_METRICS = 16
RESOURCE_GROUP = 32
# Kafka's ConfigSource codes for these resources' dynamic values
DYNAMIC_CLIENT_METRICS_CONFIG = 7
DYNAMIC_GROUP_CONFIG = 8


class ResourceConfigError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class GroupConfigDef:
    name: str
    broker_key: str  # the node config it defaults to (Kafka's synonym)
    min_key: str | None  # None: from 0 (or `floor`)
    max_key: str | None  # None: no upper bound
    # Kafka's GroupConfig ConfigDef lower bound, checked first ("Value must be at least");
    # None: the bounds give one range message
    floor: int | None = None
    type: ConfigType = ConfigType.INT
    # Kafka 4.4's internal group configs: described only when the group sets them
    described_when_set: bool = False


GROUP_CONFIGS: dict[str, GroupConfigDef] = {d.name: d for d in (
    GroupConfigDef("consumer.heartbeat.interval.ms", "group.consumer.heartbeat.interval.ms",
                   "group.consumer.min.heartbeat.interval.ms",
                   "group.consumer.max.heartbeat.interval.ms"),
    GroupConfigDef("consumer.session.timeout.ms", "group.consumer.session.timeout.ms",
                   "group.consumer.min.session.timeout.ms",
                   "group.consumer.max.session.timeout.ms"),
    GroupConfigDef("consumer.assignment.interval.ms", "group.consumer.assignment.interval.ms",
                   "group.consumer.min.assignment.interval.ms",
                   "group.consumer.max.assignment.interval.ms"),
    GroupConfigDef("consumer.assignor.offload.enable", "group.consumer.assignor.offload.enable",
                   None, None, type=ConfigType.BOOLEAN, described_when_set=True),
    # share groups (broker/share): the ones its membership and share-partitions read
    GroupConfigDef("share.session.timeout.ms", "group.share.session.timeout.ms",
                   "group.share.min.session.timeout.ms",
                   "group.share.max.session.timeout.ms"),
    GroupConfigDef("share.heartbeat.interval.ms", "group.share.heartbeat.interval.ms",
                   "group.share.min.heartbeat.interval.ms",
                   "group.share.max.heartbeat.interval.ms"),
    GroupConfigDef("share.record.lock.duration.ms", "group.share.record.lock.duration.ms",
                   "group.share.min.record.lock.duration.ms",
                   "group.share.max.record.lock.duration.ms"),
    GroupConfigDef("share.delivery.count.limit", "group.share.delivery.count.limit",
                   "group.share.min.delivery.count.limit",
                   "group.share.max.delivery.count.limit"),
    GroupConfigDef("share.partition.max.record.locks", "group.share.partition.max.record.locks",
                   "group.share.min.partition.max.record.locks",
                   "group.share.max.partition.max.record.locks"),
    GroupConfigDef("share.assignment.interval.ms", "group.share.assignment.interval.ms",
                   "group.share.min.assignment.interval.ms",
                   "group.share.max.assignment.interval.ms"),
    GroupConfigDef("share.assignor.offload.enable", "group.share.assignor.offload.enable",
                   None, None, type=ConfigType.BOOLEAN, described_when_set=True),
    # streams groups (broker/group/streams.py)
    GroupConfigDef("streams.session.timeout.ms", "group.streams.session.timeout.ms",
                   "group.streams.min.session.timeout.ms",
                   "group.streams.max.session.timeout.ms", floor=1),
    GroupConfigDef("streams.heartbeat.interval.ms", "group.streams.heartbeat.interval.ms",
                   "group.streams.min.heartbeat.interval.ms",
                   "group.streams.max.heartbeat.interval.ms", floor=1),
    GroupConfigDef("streams.assignment.interval.ms", "group.streams.assignment.interval.ms",
                   "group.streams.min.assignment.interval.ms",
                   "group.streams.max.assignment.interval.ms"),
    GroupConfigDef("streams.assignor.offload.enable", "group.streams.assignor.offload.enable",
                   None, None, type=ConfigType.BOOLEAN, described_when_set=True),
    GroupConfigDef("streams.num.standby.replicas", "group.streams.num.standby.replicas",
                   None, "group.streams.max.standby.replicas", floor=0),
    GroupConfigDef("streams.initial.rebalance.delay.ms",
                   "group.streams.initial.rebalance.delay.ms", None, None, floor=0),
    GroupConfigDef("streams.task.offset.interval.ms", "group.streams.task.offset.interval.ms",
                   "group.streams.min.task.offset.interval.ms", None, floor=1,
                   described_when_set=True),
    GroupConfigDef("streams.num.warmup.replicas", "group.streams.num.warmup.replicas",
                   None, "group.streams.max.warmup.replicas", floor=0,
                   described_when_set=True),
    GroupConfigDef("streams.acceptable.recovery.lag", "group.streams.acceptable.recovery.lag",
                   None, None, floor=0, type=ConfigType.LONG, described_when_set=True),
    # one of the node's group.streams.assignors; unset: the first of them
    GroupConfigDef("streams.assignor.name", "group.streams.assignors", None, None,
                   type=ConfigType.STRING),
    GroupConfigDef("streams.rack.aware.assignment.tags",
                   "group.streams.rack.aware.assignment.tags", None, None,
                   type=ConfigType.LIST),
)}
STREAMS_ASSIGNOR_NAME = "streams.assignor.name"
STREAMS_RACK_AWARE_ASSIGNMENT_TAGS = "streams.rack.aware.assignment.tags"
# share.auto.offset.reset: where a share-partition starts (Kafka's default: latest);
# Kafka's `by_duration:<ISO-8601 duration>` is not served
SHARE_AUTO_OFFSET_RESET = "share.auto.offset.reset"
SHARE_AUTO_OFFSET_RESET_VALUES = ("latest", "earliest")
# share.isolation.level: read_committed share groups get records up to the last stable
# offset and never an aborted transaction's (Kafka's default: read_uncommitted)
SHARE_ISOLATION_LEVEL = "share.isolation.level"
SHARE_ISOLATION_LEVEL_VALUES = ("read_committed", "read_uncommitted")  # Kafka's order
# a share group's dead-letter queue (KIP-1191, share.version 2): its topic ("" for none)
# and whether the dead letters carry the records' keys and values
DLQ_TOPIC_NAME = "errors.deadletterqueue.topic.name"
DLQ_COPY_RECORD_ENABLE = "errors.deadletterqueue.copy.record.enable"
# the group configs with string values and no broker config behind them, and their defaults
_STRING_GROUP_CONFIG_DEFAULTS: dict[str, str] = {
    SHARE_AUTO_OFFSET_RESET: "latest",
    SHARE_ISOLATION_LEVEL: "read_uncommitted",
    DLQ_TOPIC_NAME: "",
}
# share.renew.acknowledge.enable: false refuses RENEW acknowledgements (KIP-1222) with
# INVALID_RECORD_STATE, as Kafka's SharePartition does
SHARE_RENEW_ACKNOWLEDGE_ENABLE = "share.renew.acknowledge.enable"
# the boolean group configs with no broker config behind them, and their defaults
_BOOLEAN_GROUP_CONFIG_DEFAULTS: dict[str, str] = {
    SHARE_RENEW_ACKNOWLEDGE_ENABLE: "true",
    DLQ_COPY_RECORD_ENABLE: "false",
}


def group_flag(configs: Mapping[str, str], name: str) -> bool:
    """A boolean group config's value (its default when the group does not set it)."""
    return configs.get(name, _BOOLEAN_GROUP_CONFIG_DEFAULTS[name]).strip().lower() == "true"


def _not_served_reason(name: str) -> str | None:
    if name.startswith("share."):
        return "Skiff's share groups do not serve it yet"
    if name.startswith("streams."):
        return "Skiff's streams groups do not serve it"
    return None


def _node_value(cfg: Any, key: str) -> Any:
    """The node's setting, or Kafka's default without a node config."""
    if cfg is None:
        from broker.config import BROKER_CONFIGS

        return BROKER_CONFIGS[key].default
    return cfg[key]


def _node_int(cfg: Any, key: str) -> int:
    return int(_node_value(cfg, key))


def _check_boolean(name: str, value: str) -> None:
    if value.strip().lower() not in ("true", "false"):
        raise ResourceConfigError(
            ErrorCode.invalid_config,
            f"Invalid value {value} for configuration {name}: Expected value to be either "
            f"true or false")


def validate_group_config(cfg: Any, name: str, value: str | None) -> None:
    """Raises ResourceConfigError (INVALID_CONFIG, Kafka's words) when `name=value` cannot be
    set on a group; `value` None is a deletion. `cfg`: the node config (the bounds)."""
    if name == SHARE_AUTO_OFFSET_RESET:
        if value is not None and value.strip().lower() not in SHARE_AUTO_OFFSET_RESET_VALUES:
            raise ResourceConfigError(
                ErrorCode.invalid_config,
                f"Invalid value {value} for configuration {name}: Skiff serves "
                f"{' and '.join(SHARE_AUTO_OFFSET_RESET_VALUES)} (not by_duration)")
        return
    if name == DLQ_TOPIC_NAME:
        return  # any name: the dead-letter queue checks it when it writes (broker/share/dlq.py)
    if name in _BOOLEAN_GROUP_CONFIG_DEFAULTS:
        if value is not None:
            _check_boolean(name, value)
        return
    if name == SHARE_ISOLATION_LEVEL:
        if value is not None and value.strip().lower() not in SHARE_ISOLATION_LEVEL_VALUES:
            raise ResourceConfigError(
                ErrorCode.invalid_config,
                f"Invalid value {value} for configuration {name}: String must be one of: "
                f"{', '.join(SHARE_ISOLATION_LEVEL_VALUES)}")
        return
    d = GROUP_CONFIGS.get(name)
    if d is None:
        reason = _not_served_reason(name)
        if reason is not None and value is None:
            return  # deleting a config Skiff never stores: nothing to do, as Kafka accepts it
        if reason is not None:
            raise ResourceConfigError(ErrorCode.invalid_config,
                                      f"Group config {name} is not supported: {reason}")
        raise ResourceConfigError(ErrorCode.invalid_config, f"Unknown group config name: {name}")
    if value is None:
        return
    if d.type is ConfigType.BOOLEAN:  # *.assignor.offload.enable
        _check_boolean(name, value)
        return
    if d.type is ConfigType.STRING:  # streams.assignor.name
        assignors = list(_node_value(cfg, d.broker_key))
        if value.strip() not in assignors:
            raise ResourceConfigError(
                ErrorCode.invalid_config,
                f"{name} '{value.strip()}' is not a registered task assignor. Registered "
                f"assignors are: [{', '.join(assignors)}].")
        return
    if d.type is ConfigType.LIST:  # streams.rack.aware.assignment.tags
        tags = group_list(value)
        if any(not t for t in tags):
            raise ResourceConfigError(ErrorCode.invalid_config,
                                      f"Configuration '{name}' values must not be empty.")
        if len(set(tags)) != len(tags):
            raise ResourceConfigError(ErrorCode.invalid_config,
                                      f"{name} must not contain duplicate tag keys.")
        return
    kind, limit = ("LONG", 2**63) if d.type is ConfigType.LONG else ("INT", 2**31)
    try:
        number = int(value.strip())
        if not -limit <= number < limit:
            raise ValueError(value)
    except ValueError:
        raise ResourceConfigError(
            ErrorCode.invalid_config,
            f"Invalid value {value} for configuration {name}: Not a number of type {kind}"
        ) from None
    if d.floor is not None and number < d.floor:
        raise ResourceConfigError(
            ErrorCode.invalid_config,
            f"Invalid value {value.strip()} for configuration {name}: Value must be at least "
            f"{d.floor}")
    low = _node_int(cfg, d.min_key) if d.min_key is not None else None
    high = _node_int(cfg, d.max_key) if d.max_key is not None else None
    if d.floor is not None and (low is None or high is None):
        # Kafka's validateIntMin / validateIntMax for a one-sided bound
        if low is not None and number < low:
            raise ResourceConfigError(ErrorCode.invalid_config,
                                      f"{name} must be greater than or equal to {low}")
        if high is not None and number > high:
            raise ResourceConfigError(ErrorCode.invalid_config,
                                      f"{name} must be less than or equal to {high}")
        return
    low = 0 if low is None else low
    high = 2**31 - 1 if high is None else high
    if not low <= number <= high:
        raise ResourceConfigError(
            ErrorCode.invalid_config,
            f"{name} must be in the range {low} to {high} inclusive.")


def group_list(value: str) -> list[str]:
    """A LIST group config's items, as Kafka's ConfigDef splits them (trailing empty items
    kept, so that they are refused)."""
    text = value.strip()
    return [] if not text else [t.strip() for t in text.split(",")]


def describe_group(cfg: Any, dynamic: Mapping[str, str], names: Sequence[str] | None,
                   include_synonyms: bool) -> list[ConfigEntry]:
    out = []
    for d in GROUP_CONFIGS.values():
        if names is not None and d.name not in names:
            continue
        if d.described_when_set and d.name not in dynamic:
            continue
        node = _node_value(cfg, d.broker_key)
        if d.type is ConfigType.STRING:  # the assignor: the first of the node's list
            default, broker_value = str(node[0]), ",".join(node)
        elif d.type is ConfigType.BOOLEAN:
            default = broker_value = str(bool(node)).lower()
        elif d.type is ConfigType.LIST:
            default = broker_value = ",".join(node)
        else:
            default = broker_value = str(node)
        base = ConfigSynonym(d.broker_key, broker_value, ConfigSource.DEFAULT_CONFIG)
        if d.name in dynamic:
            value = dynamic[d.name]
            src = ConfigSource(DYNAMIC_GROUP_CONFIG)
            syn: tuple[ConfigSynonym, ...] = (ConfigSynonym(d.name, value, src), base)
        else:
            value, src, syn = default, ConfigSource.DEFAULT_CONFIG, (base,)
        out.append(ConfigEntry(d.name, value, src, d.type,
                               synonyms=syn if include_synonyms else ()))
    for name, default, ctype in (
            *((n, d, ConfigType.STRING) for n, d in _STRING_GROUP_CONFIG_DEFAULTS.items()),
            *((n, d, ConfigType.BOOLEAN) for n, d in _BOOLEAN_GROUP_CONFIG_DEFAULTS.items())):
        if names is not None and name not in names:
            continue
        # no broker config behind it: Kafka's synonym is the group config's own default
        base = ConfigSynonym(name, default, ConfigSource.DEFAULT_CONFIG)
        if name in dynamic:
            value = dynamic[name]
            src = ConfigSource(DYNAMIC_GROUP_CONFIG)
            syn = (ConfigSynonym(name, value, src), base)
        else:
            value, src, syn = default, ConfigSource.DEFAULT_CONFIG, (base,)
        out.append(ConfigEntry(name, value, src, ctype,
                               synonyms=syn if include_synonyms else ()))
    return out


# ---- CLIENT_METRICS -------------------------------------------------------------------------

CLIENT_METRICS_CONFIGS: dict[str, tuple[ConfigType, str]] = {
    "interval.ms": (ConfigType.INT, "300000"),
    "match": (ConfigType.LIST, ""),
    "metrics": (ConfigType.LIST, ""),
}
MIN_INTERVAL_MS, MAX_INTERVAL_MS = 100, 3600000
MATCH_SELECTORS = ("client_instance_id", "client_id", "client_software_name",
                   "client_software_version", "client_source_address", "client_source_port")


def parse_match(value: str) -> dict[str, re.Pattern[str]]:
    """`match` as selector -> compiled regex; raises ResourceConfigError as Kafka."""
    out: dict[str, re.Pattern[str]] = {}
    for item in (x.strip() for x in value.split(",")):
        if not item:
            continue
        key, sep, pattern = item.partition("=")
        key, pattern = key.strip(), pattern.strip()
        if not sep or key not in MATCH_SELECTORS or not pattern:
            raise ResourceConfigError(ErrorCode.invalid_config,
                                      f"Illegal client matching pattern: {item}")
        try:
            out[key] = re.compile(pattern)
        except re.error:
            raise ResourceConfigError(ErrorCode.invalid_config,
                                      f"Illegal client matching pattern: {item}") from None
    return out


def validate_client_metrics_config(name: str, value: str | None) -> None:
    if name not in CLIENT_METRICS_CONFIGS:
        raise ResourceConfigError(ErrorCode.invalid_request,
                                  f"Unknown client metrics configuration: {name}")
    if value is None:
        return
    if name == "interval.ms":
        try:
            number = int(value.strip())
        except ValueError:
            raise ResourceConfigError(
                ErrorCode.invalid_config,
                f"Invalid value {value} for configuration interval.ms: Not a number of type INT"
            ) from None
        if not MIN_INTERVAL_MS <= number <= MAX_INTERVAL_MS:
            raise ResourceConfigError(
                ErrorCode.invalid_request,
                f"Invalid value {number} for interval.ms, interval must be between "
                f"{MIN_INTERVAL_MS} and {MAX_INTERVAL_MS} (1 hour)")
    elif name == "match":
        parse_match(value)


def describe_client_metrics(dynamic: Mapping[str, str], names: Sequence[str] | None,
                            include_synonyms: bool) -> list[ConfigEntry]:
    out = []
    for name, (ctype, default) in CLIENT_METRICS_CONFIGS.items():
        if names is not None and name not in names:
            continue
        if name in dynamic:
            src = ConfigSource(DYNAMIC_CLIENT_METRICS_CONFIG)
            value = dynamic[name]
            syn: tuple[ConfigSynonym, ...] = (ConfigSynonym(name, value, src),)
        else:
            value, src, syn = default, ConfigSource.DEFAULT_CONFIG, ()
        out.append(ConfigEntry(name, value, src, ctype,
                               synonyms=syn if include_synonyms else ()))
    return out


def config_type(resource_type: int, name: str) -> ConfigType | None:
    if resource_type == RESOURCE_GROUP:
        d = GROUP_CONFIGS.get(name)
        return None if d is None else d.type
    if resource_type == RESOURCE_CLIENT_METRICS:
        t = CLIENT_METRICS_CONFIGS.get(name)
        return None if t is None else t[0]
    return None
