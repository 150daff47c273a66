"""How a NodeConfig is built from its sources: a properties file, --override arguments and
SKIFF_* variables (load_config), or a dict of raw values (build_config): every key parsed
and checked by its definition, then the cross-field checks (validation.py)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from broker.config.definitions import BROKER_CONFIGS, LISTENER_SCOPED_KEYS
from broker.config.node_config import NodeConfig
from broker.config.properties import (
    ENV_NOT_CONFIG,
    _key_from_env,
    env_key,
    parse_overrides,
    parse_properties,
)
from broker.config.types import ConfigError
from broker.config.validation import _derive_and_check


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
