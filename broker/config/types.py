"""Config types, sources, validators and ConfigDef: how one property's value is parsed,
checked and printed."""

from __future__ import annotations

import enum
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1


class ConfigError(ValueError):
    """A config value that stops startup (or a request): says key, value and what was expected."""

    def __init__(self, key: str, value: object, expected: str) -> None:
        # Kafka's ConfigException: the value as written, unquoted
        super().__init__(f"Invalid value {value} for configuration {key}: {expected}")
        self.key = key
        self.value = value
        self.expected = expected


class ConfigType(enum.IntEnum):
    """DescribeConfigs' config_type codes (KIP-569)."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(enum.IntEnum):
    """DescribeConfigs' config_source codes."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    DYNAMIC_CLIENT_METRICS_CONFIG = 7
    DYNAMIC_GROUP_CONFIG = 8


# -- validators ---------------------------------------------------------------

Validator = Callable[[str, Any], None]


def at_least(minimum: float) -> Validator:
    def check(key: str, v: Any) -> None:
        if v is not None and v < minimum:
            raise ConfigError(key, v, f"Value must be at least {minimum}")
    return check


def kafka_default_only(default: int, why: str, *, sample: int | None = None) -> Validator:
    """A Kafka key Skiff has nothing to apply to: Kafka's default (and `sample`, the value
    Kafka's sample config/server.properties sets when it differs) is accepted, any other
    value is refused, never ignored."""
    accepted = f"{default} (Kafka's default)"
    if sample is not None:
        accepted += f", {sample} (Kafka's sample server.properties)"

    def check(key: str, v: Any) -> None:
        if v is not None and v != default and v != sample:
            raise ConfigError(key, v, f"{accepted} or unset: {why}")
    return check


def between(lo: float, hi: float) -> Validator:
    def check(key: str, v: Any) -> None:
        if v is not None and not lo <= v <= hi:
            raise ConfigError(key, v, f"Value must be between {lo} and {hi}")
    return check


def one_of(*choices: str, case_sensitive: bool = True) -> Validator:
    allowed = choices if case_sensitive else tuple(c.lower() for c in choices)

    def check(key: str, v: Any) -> None:
        if v is None:
            return
        probe = v if case_sensitive else str(v).lower()
        if probe not in allowed:
            raise ConfigError(key, v, f"String must be one of: {', '.join(choices)}")
    return check


def list_of(*choices: str, allow_empty: bool = True) -> Validator:
    def check(key: str, v: Any) -> None:
        if v is None:
            return
        if not v and not allow_empty:
            raise ConfigError(key, v, "Empty list not allowed")
        for item in v:
            if item not in choices:
                raise ConfigError(key, ",".join(v), f"Valid values are: {', '.join(choices)}")
    return check


def one_of_ints(*allowed: int) -> Validator:
    def check(key: str, v: Any) -> None:
        if v is not None and v not in allowed:
            raise ConfigError(key, v, f"Value must be one of {list(allowed)}")
    return check


# -- definitions ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConfigDef:
    name: str
    type: ConfigType
    default: Any  # parsed value; None means "no default" (null)
    validator: Validator | None = None
    doc: str = ""
    sensitive: bool = False

    def parse(self, raw: object) -> Any:
        return parse_value(self.name, self.type, raw, self.validator)


_INT_RANGES = {ConfigType.INT: (-(2**31), 2**31 - 1), ConfigType.SHORT: (-(2**15), 2**15 - 1),
               ConfigType.LONG: (-(2**63), 2**63 - 1)}
# Kafka's ConfigDef.parseType: a string that Integer/Short/Long.parse* refuses (also out of range)
_EXPECTED = {ConfigType.INT: "Not a number of type INT",
             ConfigType.SHORT: "Not a number of type SHORT",
             ConfigType.LONG: "Not a number of type LONG"}


def parse_value(key: str, ctype: ConfigType, raw: object, validator: Validator | None) -> Any:
    """Parse one value as Kafka's ConfigDef does (strings are trimmed; booleans are true/false)."""
    value: Any
    if raw is None:
        value = None
    elif ctype is ConfigType.BOOLEAN:
        if isinstance(raw, bool):
            value = raw
        else:
            s = str(raw).strip().lower()
            if s not in ("true", "false"):
                raise ConfigError(key, raw, "Expected value to be either true or false")
            value = s == "true"
    elif ctype in _INT_RANGES:
        if isinstance(raw, bool):
            raise ConfigError(key, raw, _EXPECTED[ctype])
        if isinstance(raw, int):
            value = raw
        else:
            s = str(raw).strip()
            if not re.fullmatch(r"[+-]?\d+", s):
                raise ConfigError(key, raw, _EXPECTED[ctype])
            value = int(s)
        lo, hi = _INT_RANGES[ctype]
        if not lo <= value <= hi:
            raise ConfigError(key, raw, _EXPECTED[ctype])
    elif ctype is ConfigType.DOUBLE:
        try:
            value = float(str(raw).strip()) if not isinstance(raw, int | float) else float(raw)
        except ValueError:
            raise ConfigError(key, raw, "Not a number of type DOUBLE") from None
        if value != value or value in (float("inf"), float("-inf")):
            raise ConfigError(key, raw, "Expected value to be a finite double")
    elif ctype is ConfigType.LIST:
        if isinstance(raw, list | tuple):
            value = [str(x).strip() for x in raw]
        else:
            s = str(raw).strip()
            value = [] if not s else [x.strip() for x in s.split(",")]
    elif ctype is ConfigType.PASSWORD:
        value = str(raw)
    else:
        value = str(raw).strip()
    if validator is not None:
        try:
            validator(key, value)
        except ConfigError as exc:
            shown = raw if isinstance(raw, str) else exc.value
            raise ConfigError(key, shown, exc.expected) from None
    return value


def format_value(ctype: ConfigType, value: Any) -> str | None:
    """A parsed value as Kafka prints it in DescribeConfigs."""
    if value is None:
        return None
    if ctype is ConfigType.BOOLEAN:
        return "true" if value else "false"
    if ctype is ConfigType.LIST:
        return ",".join(value)
    if ctype is ConfigType.DOUBLE:
        return repr(float(value))
    return str(value)


def parse_ip_overrides(text: str) -> dict[str, int]:
    """`max.connections.per.ip.overrides`: "host-or-ip:count,..." (Kafka's format).
    Raises ValueError with the entry at fault."""
    out: dict[str, int] = {}
    for item in (p.strip() for p in text.split(",")):
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        if not sep or not host:
            raise ValueError(f"{item!r} is not host:count")
        try:
            n = int(count)
        except ValueError:
            raise ValueError(f"{item!r}: {count!r} is not a number") from None
        if n < 0:
            raise ValueError(f"{item!r}: the count must be at least 0")
        out[host.strip()] = n
    return out
