"""NodeConfig, the parsed and checked config of one node, and how it is built from its
sources (load_config, build_config)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from broker.config.definitions import BROKER_CONFIGS, TOPIC_CONFIGS
from broker.config.describe import _broker_synonym_value
from broker.config.properties import (
    ENV_NOT_CONFIG,
    _key_from_env,
    env_key,
    parse_overrides,
    parse_properties,
)
from broker.config.types import ConfigError
from broker.config.validation import _derive_and_check

if TYPE_CHECKING:
    from broker.config.listeners import Listener, Voter

# -- the node config -----------------------------------------------------------


@dataclass
class NodeConfig:
    """Parsed, validated config of one node. `cfg["num.partitions"]` gives the typed value."""

    values: dict[str, Any]
    originals: dict[str, str]          # what was explicitly set (known and unknown keys)
    origin: dict[str, str]             # key -> "file" | "override" | "env"
    warnings: list[str] = field(default_factory=list)
    # derived
    process_roles: frozenset[str] = frozenset()
    node_id: int = -1
    voters: list[Voter] = field(default_factory=list)
    bootstrap_servers: list[tuple[str, int]] = field(default_factory=list)
    listeners: list[Listener] = field(default_factory=list)
    advertised_listeners: list[Listener] = field(default_factory=list)
    security_protocol_map: dict[str, str] = field(default_factory=dict)
    controller_listener_names: list[str] = field(default_factory=list)
    inter_broker_listener_name: str = "PLAINTEXT"
    log_dirs: list[Path] = field(default_factory=list)
    metadata_log_dir: Path = Path()

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    @property
    def is_broker(self) -> bool:
        return "broker" in self.process_roles

    @property
    def is_controller(self) -> bool:
        return "controller" in self.process_roles

    def is_set(self, key: str) -> bool:
        """Whether a key was given explicitly (STATIC_BROKER_CONFIG) rather than defaulted."""
        return key in self.originals

    def listener(self, name: str) -> Listener | None:
        for lst in self.listeners:
            if lst.name == name:
                return lst
        return None

    @property
    def broker_listeners(self) -> list[Listener]:
        return [x for x in self.listeners if x.name not in self.controller_listener_names]

    @property
    def controller_listeners(self) -> list[Listener]:
        return [x for x in self.listeners if x.name in self.controller_listener_names]

    def all_directories(self) -> list[Path]:
        """Every log dir plus the metadata log dir, without duplicates, in order."""
        out: list[Path] = []
        for d in [*self.log_dirs, self.metadata_log_dir]:
            if d not in out:
                out.append(d)
        return out

    def retention_ms(self) -> int:
        return int(_broker_synonym_value(self, TOPIC_CONFIGS["retention.ms"])[0])

    def summary(self) -> dict[str, Any]:
        """Explicitly-set known keys and a few essentials, for the startup log line."""
        keys = {"process.roles", "node.id", "listeners", "log.dirs"} | set(self.originals)
        return {k: self.values[k] for k in sorted(keys)
                if k in self.values and not BROKER_CONFIGS[k].sensitive}


def load_config(
    path: str | Path | None = None,
    overrides: Mapping[str, str] | Iterable[str] = (),
    env: Mapping[str, str] | None = None,
    warn: Callable[[str], None] | None = None,
) -> NodeConfig:
    """Read a properties file, then overrides, then SKIFF_* env; validate; return the config.

    `env` defaults to os.environ; pass {} to ignore the environment. Warnings (SKIFF_*
    variables that name no key, settings that work against each other) go to `warn`, or
    to the structlog logger "skiff.config" when it is None, and are kept in
    `NodeConfig.warnings` either way. An unknown key from the file or the overrides
    raises ConfigError.
    """
    raw: dict[str, str] = {}
    origin: dict[str, str] = {}
    if path is not None:
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError("config file", str(p), f"a readable file ({exc.strerror})") from None
        for k, v in parse_properties(text).items():
            raw[k], origin[k] = v, "file"
    ov = overrides if isinstance(overrides, Mapping) else parse_overrides(overrides)
    for k, v in ov.items():
        raw[k], origin[k] = v, "override"
    if env is None:
        env = os.environ
    if env:
        for name, v in env.items():
            if not name.startswith("SKIFF_") or len(name) <= len("SKIFF_") \
                    or name in ENV_NOT_CONFIG:
                continue
            k = _key_from_env(name)
            raw[k], origin[k] = v, "env"
    return build_config(raw, origin, warn)


def build_config(raw: Mapping[str, str], origin: Mapping[str, str] | None = None,
                 warn: Callable[[str], None] | None = None) -> NodeConfig:
    warnings: list[str] = []

    def _emit(msg: str) -> None:
        if warn is not None:
            warn(msg)
        else:
            import structlog

            structlog.get_logger("skiff.config").warning(msg)

    def warning(msg: str) -> None:
        warnings.append(msg)
        _emit(msg)

    if "broker.id" in raw and "node.id" not in raw:
        # Kafka's synonym: a node configured by its older name (KafkaConfig.populateSynonyms)
        raw = {**raw, "node.id": raw["broker.id"]}
    values: dict[str, Any] = {}
    for key, d in BROKER_CONFIGS.items():
        values[key] = d.parse(raw[key]) if key in raw else d.default
    from broker.security.settings import refuse_unsupported_keys

    # ssl.*/sasl.* keys Skiff lacks are errors; per-listener forms of known ones are parsed
    accepted = refuse_unsupported_keys(raw, BROKER_CONFIGS)
    accepted |= _listener_scoped_keys(raw)
    # plugin.*: settings of Python authorizer/principal builder plugins, passed to them
    # unchecked (broker/security/plugins.py)
    accepted |= {k for k in raw if k.startswith("plugin.")}
    for key in raw:
        if key not in BROKER_CONFIGS and key not in accepted:
            _unknown_key(key, raw[key], (origin or {}).get(key, "input"), values, warning)
    cfg = NodeConfig(values=values, originals=dict(raw), origin=dict(origin or {}),
                     warnings=warnings)
    warnings_before = list(warnings)
    _derive_and_check(cfg, set(raw))
    for msg in cfg.warnings[len(warnings_before):]:
        _emit(msg)
    return cfg


def _unknown_key(key: str, value: str, source: str, values: Mapping[str, Any],
                 warning: Callable[[str], None]) -> None:
    """A key Skiff does not define. From the properties file or --override it stops the
    node (Kafka only logs these; Skiff does not run with a setting it would ignore). From
    the environment it is a warning: other tools keep SKIFF_* variables there too."""
    if source == "env":
        warning(f"unknown configuration {key!r} (from the environment, {env_key(key)}) is "
                "ignored: Skiff has no such setting")
        return
    if key == "broker.id":
        # Kafka's older name for node.id: accepted when it names the same node.
        if value.strip() == str(values["node.id"]):
            return
        raise ConfigError(key, value, f"the node.id ({values['node.id']}): broker.id is "
                          "Kafka's older name for node.id, and both must name the same node")
    if key.startswith("zookeeper."):
        raise ConfigError(key, value, "no ZooKeeper setting: Skiff runs in KRaft mode only "
                          "(process.roles, controller.quorum.voters); remove the line")
    raise ConfigError(key, value, "a key Skiff defines (this version of Skiff does not "
                      f"implement {key} and will not start with it rather than ignore it, "
                      "as Kafka would; remove the line, or see docs/configuration.md)")


def _listener_scoped_keys(raw: Mapping[str, str]) -> set[str]:
    """`listener.name.<l>.<key>` for the keys Kafka reads per listener (LISTENER_SCOPED_KEYS),
    parsed and validated as the base key."""
    from broker.config.definitions import LISTENER_SCOPED_KEYS

    accepted = set()
    for key in raw:
        if not key.lower().startswith("listener.name."):
            continue
        base = key[len("listener.name."):].partition(".")[2]
        if base in LISTENER_SCOPED_KEYS:
            try:
                BROKER_CONFIGS[base].parse(raw[key])
            except ConfigError as e:
                raise ConfigError(key, e.value, e.expected) from None
            accepted.add(key)
    return accepted


def listener_scoped(cfg: NodeConfig, key: str) -> dict[str, Any]:
    """{LISTENER NAME: parsed value} of `listener.name.<l>.<key>` settings."""
    out: dict[str, Any] = {}
    for k, v in cfg.originals.items():
        if k.lower().startswith("listener.name."):
            name, _, base = k[len("listener.name."):].partition(".")
            if base == key:
                out[name.upper()] = BROKER_CONFIGS[key].parse(v)
    return out
