"""listeners, advertised.listeners and controller.quorum.voters as Kafka writes them."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from broker.config.types import ConfigError

# -- listeners, voters ---------------------------------------------------------

_LISTENER = re.compile(r"^([A-Za-z0-9_.\-]+)://\[?([0-9a-zA-Z\-%._:]*?)\]?:(-?[0-9]+)$")


@dataclass(frozen=True, slots=True)
class Listener:
    name: str
    host: str  # "" means all interfaces
    port: int
    security_protocol: str = "PLAINTEXT"

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


@dataclass(frozen=True, slots=True)
class Voter:
    node_id: int
    host: str
    port: int


def parse_listeners(key: str, items: Sequence[str],
                    protocol_map: Mapping[str, str]) -> list[Listener]:
    out: list[Listener] = []
    seen: set[str] = set()
    for item in items:
        m = _LISTENER.match(item.strip())
        if not m:
            raise ConfigError(key, ",".join(items),
                              f"{item!r} is not a listener of the form NAME://host:port")
        name, host, port = m.group(1).upper(), m.group(2), int(m.group(3))
        if not 0 <= port <= 65535:
            raise ConfigError(key, ",".join(items), f"port {port} is not in 0..65535")
        if name in seen:
            raise ConfigError(key, ",".join(items), f"listener name {name} appears twice")
        seen.add(name)
        proto = protocol_map.get(name)
        if proto is None:
            raise ConfigError(key, ",".join(items),
                              f"listener {name} has no entry in listener.security.protocol.map")
        out.append(Listener(name, host, port, proto))
    return out


def _host_port(key: str, value: str, item: str) -> tuple[str, int]:
    m = re.fullmatch(r"\[?([0-9a-zA-Z\-%._:]+?)\]?:([0-9]+)", item)
    if not m or not 0 < int(m.group(2)) <= 65535:
        raise ConfigError(key, value, f"{item!r} is not host:port")
    return m.group(1), int(m.group(2))


def parse_host_ports(key: str, value: str | Sequence[str]) -> list[tuple[str, int]]:
    """Skiff's own listener lists (`admin.listeners`, `metrics.listeners`): comma-separated
    `host:port`, a `NAME://` prefix accepted and ignored; the host as written (an IPv6 host
    keeps its brackets), "" for every interface. ValueError on an item that is not
    host:port."""
    items = value.split(",") if isinstance(value, str) else list(value)
    out: list[tuple[str, int]] = []
    for raw in items:
        item = raw.strip()
        if not item:
            continue
        if "://" in item:
            item = item.split("://", 1)[1]
        host, sep, port = item.rpartition(":")
        if not sep or not port.isdigit() or int(port) > 65535:
            raise ValueError(f"Invalid value {raw!r} for configuration {key}: "
                             "host:port expected")
        out.append((host, int(port)))
    return out


def parse_voters(key: str, items: Sequence[str]) -> list[Voter]:
    value = ",".join(items)
    out: list[Voter] = []
    for item in items:
        node, sep, rest = item.strip().partition("@")
        if not sep or not re.fullmatch(r"\d+", node):
            raise ConfigError(key, value, f"{item!r} is not of the form id@host:port")
        host, port = _host_port(key, value, rest)
        out.append(Voter(int(node), host, port))
    ids = [v.node_id for v in out]
    if len(set(ids)) != len(ids):
        raise ConfigError(key, value, "a node id appears more than once")
    return out
