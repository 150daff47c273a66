"""Effective topic configs, DescribeConfigs entries with their sources and synonyms, and
the log engine's dict from a topic's effective configs."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from broker.config.definitions import (
    _SYNONYM_SCALE,
    BROKER_CONFIGS,
    READ_ONLY_BROKER_KEYS,
    TOPIC_CONFIGS,
)
from broker.config.types import ConfigError, ConfigSource, ConfigType, format_value

if TYPE_CHECKING:
    from broker.config.definitions import TopicConfigDef
    from broker.config.node_config import NodeConfig

# -- effective topic configs and DescribeConfigs -------------------------------


@dataclass(frozen=True, slots=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    source: ConfigSource
    type: ConfigType
    read_only: bool = False
    sensitive: bool = False
    synonyms: tuple[ConfigSynonym, ...] = ()

    @property
    def is_default(self) -> bool:
        return self.source is ConfigSource.DEFAULT_CONFIG


# Keys Kafka 4.4 defines without a default: DescribeConfigs lists no DEFAULT_CONFIG synonym
# for them (Skiff's definitions give them an "unset" value to parse against).
NO_KAFKA_DEFAULT = frozenset({"node.id", "process.roles", "controller.listener.names"})
# keys Kafka 4.4 defines as internal: read from server.properties, never described
INTERNAL_BROKER_KEYS = frozenset({
    "group.streams.task.offset.interval.ms", "group.streams.min.task.offset.interval.ms",
    "group.streams.num.warmup.replicas", "group.streams.max.warmup.replicas",
    "group.streams.acceptable.recovery.lag", "group.consumer.assignor.offload.enable",
    "group.share.assignor.offload.enable", "group.streams.assignor.offload.enable"})
# The config_type Kafka 4.4 reports where Skiff parses the value as another type:
# listener.security.protocol.map is a STRING in Kafka's ConfigDef (Skiff splits it into a
# list), log.dir a LIST (Skiff reads one directory).
REPORTED_TYPES = {"listener.security.protocol.map": ConfigType.STRING,
                  "log.dir": ConfigType.LIST}


def _broker_synonym_value(
    cfg: NodeConfig, d: TopicConfigDef,
    dynamic_default: Mapping[str, str] | None = None,
    dynamic_broker: Mapping[str, str] | None = None,
) -> tuple[Any, ConfigSource, list[ConfigSynonym]]:
    """The broker-level value a topic config falls back to, its source, and the synonyms.

    Order as Kafka reports it: this broker's dynamic config, the dynamic cluster default,
    then static broker keys in the file (most specific key first), then the Kafka default
    of the first synonym.
    """
    synonyms: list[ConfigSynonym] = []
    chosen: tuple[Any, ConfigSource] | None = None
    for src, getter in ((ConfigSource.DYNAMIC_BROKER_CONFIG, dynamic_broker or {}),
                        (ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, dynamic_default or {}),
                        (ConfigSource.STATIC_BROKER_CONFIG, cfg.originals)):
        for key in d.synonyms:
            if key in getter:
                bd = BROKER_CONFIGS[key]
                val = bd.parse(getter[key])
                synonyms.append(ConfigSynonym(key, format_value(bd.type, val), src))
                if chosen is None and val is not None:
                    chosen = (val * _SYNONYM_SCALE.get(key, 1), src)
    # every synonym's Kafka default is listed (as ConfigHelper.configSynonyms does), the
    # value falls back to the first of them; describe_topic_configs drops what Kafka drops
    for key in d.synonyms:
        bd = BROKER_CONFIGS[key]
        if bd.default is not None:
            synonyms.append(ConfigSynonym(key, format_value(bd.type, bd.default),
                                          ConfigSource.DEFAULT_CONFIG))
            if chosen is None:
                chosen = (bd.default * _SYNONYM_SCALE.get(key, 1)
                          if not isinstance(bd.default, bool | list | str) else bd.default,
                          ConfigSource.DEFAULT_CONFIG)
    if chosen is None:
        chosen = (d.default, ConfigSource.DEFAULT_CONFIG)
    return chosen[0], chosen[1], synonyms


def effective_topic_configs(
    cfg: NodeConfig, topic_overrides: Mapping[str, str],
    dynamic_default: Mapping[str, str] | None = None,
    dynamic_broker: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Every topic config's typed value for one topic: override, else the broker's value."""
    out: dict[str, Any] = {}
    for name, d in TOPIC_CONFIGS.items():
        if name in topic_overrides:
            try:
                out[name] = d.parse(topic_overrides[name])
                continue
            except ConfigError:
                pass  # only a record from another version could hold one: use the default
        out[name] = _broker_synonym_value(cfg, d, dynamic_default, dynamic_broker)[0]
    return out


def describe_topic_configs(
    cfg: NodeConfig, topic_overrides: Mapping[str, str],
    names: Iterable[str] | None = None, include_synonyms: bool = False,
    dynamic_default: Mapping[str, str] | None = None,
    dynamic_broker: Mapping[str, str] | None = None,
) -> list[ConfigEntry]:
    """DescribeConfigs for a TOPIC resource: value, source and (optionally) synonyms."""
    wanted = sorted(TOPIC_CONFIGS) if names is None else [n for n in names if n in TOPIC_CONFIGS]
    out: list[ConfigEntry] = []
    for name in wanted:
        d = TOPIC_CONFIGS[name]
        bval, _, bsyn = _broker_synonym_value(cfg, d, dynamic_default, dynamic_broker)
        # Kafka's ConfigHelper.configSynonyms keeps the broker synonyms from the first one
        # that names the primary key on (dropWhile): retention.ms shows none of
        # log.retention.{minutes,hours} until log.retention.ms itself is set somewhere,
        # and the entry's source is the first synonym's (DEFAULT_CONFIG when none is left).
        primary = d.synonyms[0] if d.synonyms else None
        while bsyn and bsyn[0].name != primary:
            bsyn = bsyn[1:]
        bsrc = bsyn[0].source if bsyn else ConfigSource.DEFAULT_CONFIG
        synonyms: list[ConfigSynonym] = []
        if name in topic_overrides:
            try:
                shown = format_value(d.type, d.parse(topic_overrides[name]))
            except ConfigError:
                shown = topic_overrides[name]
            synonyms.append(ConfigSynonym(name, shown, ConfigSource.DYNAMIC_TOPIC_CONFIG))
            value, source = shown, ConfigSource.DYNAMIC_TOPIC_CONFIG
        else:
            value, source = format_value(d.type, bval), bsrc
        synonyms.extend(bsyn)
        out.append(ConfigEntry(name, value, source, d.type,
                               synonyms=tuple(synonyms) if include_synonyms else ()))
    return out


# Kafka's DynamicBrokerConfig.brokerConfigSynonyms: the keys of one setting, finest first.
_BROKER_SYNONYM_CHAINS = (
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
)


def _broker_synonyms(name: str) -> tuple[str, ...]:
    for chain in _BROKER_SYNONYM_CHAINS:
        if name in chain:
            return tuple(k for k in chain if k in BROKER_CONFIGS)
    return (name,)


def describe_broker_configs(
    cfg: NodeConfig, names: Iterable[str] | None = None, include_synonyms: bool = False,
    dynamic_broker: Mapping[str, str] | None = None,
    dynamic_default: Mapping[str, str] | None = None,
) -> list[ConfigEntry]:
    """DescribeConfigs for a BROKER resource (this node)."""
    wanted = [n for n in (sorted(BROKER_CONFIGS) if names is None else names)
              if n in BROKER_CONFIGS and n not in INTERNAL_BROKER_KEYS]
    out: list[ConfigEntry] = []
    for name in wanted:
        d = BROKER_CONFIGS[name]
        synonyms: list[ConfigSynonym] = []
        layers = ((ConfigSource.DYNAMIC_BROKER_CONFIG, dynamic_broker or {}),
                  (ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, dynamic_default or {}),
                  (ConfigSource.STATIC_BROKER_CONFIG, cfg.originals))
        # ConfigHelper.configSynonyms: by source, then by synonym key; then dropWhile the
        # name is not the described one (log.retention.minutes shows nothing until it or a
        # key before it, log.retention.ms, is set; log.retention.ms shows the hours default
        # after its own dynamic value)
        keys = _broker_synonyms(name)
        for src, layer in layers:
            for key in keys:
                if key in layer:
                    kd = BROKER_CONFIGS[key]
                    synonyms.append(ConfigSynonym(
                        key, format_value(kd.type, kd.parse(layer[key])), src))
        for key in keys:
            kd = BROKER_CONFIGS[key]
            if kd.default is not None and key not in NO_KAFKA_DEFAULT:
                synonyms.append(ConfigSynonym(key, format_value(kd.type, kd.default),
                                              ConfigSource.DEFAULT_CONFIG))
        while synonyms and synonyms[0].name != name:
            synonyms = synonyms[1:]
        own = [s for s in synonyms if s.name == name]
        value = own[0].value if own else None
        source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
        if d.sensitive:
            value = None
        out.append(ConfigEntry(name, value, source, REPORTED_TYPES.get(name, d.type),
                               read_only=name in READ_ONLY_BROKER_KEYS, sensitive=d.sensitive,
                               synonyms=tuple(synonyms) if include_synonyms else ()))
    return out


def log_config(effective: Mapping[str, Any]) -> dict[str, Any]:
    """The log engine's config dict from a topic's effective configs (typed values,
    Kafka's topic-level names)."""
    keys = ("segment.bytes", "segment.ms", "segment.jitter.ms", "segment.index.bytes",
            "index.interval.bytes", "retention.ms", "retention.bytes", "cleanup.policy",
            "max.message.bytes", "message.timestamp.type", "message.timestamp.before.max.ms",
            "message.timestamp.after.max.ms", "flush.messages", "flush.ms",
            "file.delete.delay.ms", "delete.retention.ms", "min.compaction.lag.ms",
            "max.compaction.lag.ms", "min.cleanable.dirty.ratio", "compression.type",
            "compression.gzip.level", "compression.lz4.level", "compression.zstd.level",
            "preallocate", "drop.behind.bytes", "min.insync.replicas",
            "unclean.leader.election.enable")
    out = {k: effective[k] for k in keys}
    out["cleanup.policy"] = list(out["cleanup.policy"])
    out["compression.type"] = str(out["compression.type"]).lower()
    return out


def topic_log_config(cfg: NodeConfig, topic_overrides: Mapping[str, str],
                     dynamic_default: Mapping[str, str] | None = None,
                     dynamic_broker: Mapping[str, str] | None = None) -> dict[str, Any]:
    return log_config(effective_topic_configs(cfg, topic_overrides, dynamic_default,
                                              dynamic_broker))
