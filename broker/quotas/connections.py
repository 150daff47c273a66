"""Connection limits at accept time, as Kafka's ConnectionQuotas applies them (KIP-402, KIP-612).

Pure: the server asks `admit` for each new connection and calls `closed` when an admitted one
ends; nothing here touches a socket. All decisions:

  * `max.connections.per.ip` (with `max.connections.per.ip.overrides`, "host-or-ip:count,..."):
    a connection from an address already holding its count is closed at once (Kafka's
    TooManyConnectionsException).
  * `max.connections` (broker-wide) and `listener.name.<l>.max.connections`: a connection over
    either is closed at once. Kafka instead stops accepting until a slot frees (the client
    waits in the accept backlog), and lets the inter-broker listener exceed the broker-wide
    bound by closing another listener's connection; Skiff closes the newcomer (asyncio accepts
    for us), and the inter-broker and controller listeners are never held to the broker-wide
    bound.
  * `max.connection.creation.rate` (broker-wide) and
    `listener.name.<l>.max.connection.creation.rate`: over the rate, the connection is accepted
    but not read until the throttle time has passed (Kafka's acceptor sleeps that long before
    accepting more); the inter-broker and controller listeners are not held to the broker-wide
    rate, as in Kafka.
  * `connection_creation_rate` client quotas on `ip` entities (the address's own, else the
    `<default>` ip entity; none: unlimited): over it, the connection is not counted and is
    closed after the throttle time (Kafka's DelayedCloseSocket), so the client cannot retry
    at once.
max.connections, max.connections.per.ip(.overrides) and max.connection.creation.rate are
also dynamic broker configs (AlterConfigs, per broker or cluster default), applied from the next
connection on, as Kafka's DynamicConnectionQuota applies them.
Rates are Kafka's windowed rate (quota.window.num windows of quota.window.size.seconds,
broker/quotas/core.py's SampledRate); the throttle time is Kafka's QuotaUtils.throttleTime,
and for the broker and listener rates bounded by one quota window set, as Kafka bounds it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from broker.config.node_config import NodeConfig, listener_scoped
from broker.config.types import parse_ip_overrides
from broker.quotas.core import (
    CONNECTION_CREATION_RATE,
    DEFAULT_WINDOW_NUM,
    DEFAULT_WINDOW_SIZE_S,
    IP,
    QuotaMap,
    SampledRate,
    make_entity,
)

INT_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class Admit:
    """Serve the connection; `delay_ms` > 0: read nothing from it before then."""

    delay_ms: int = 0


@dataclass(frozen=True, slots=True)
class Refuse:
    """Close the connection, after `close_after_ms` (0: at once); `reason` for the log."""

    reason: str
    close_after_ms: int = 0


Decision = Admit | Refuse


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    max_connections: int = INT_MAX
    max_per_ip: int = INT_MAX
    per_ip_overrides: Mapping[str, int] = field(default_factory=dict)
    max_creation_rate: int = INT_MAX
    listener_max_connections: Mapping[str, int] = field(default_factory=dict)
    listener_creation_rates: Mapping[str, int] = field(default_factory=dict)
    # listeners the broker-wide bounds do not apply to (inter-broker, controller)
    exempt_listeners: frozenset[str] = frozenset()
    window_num: int = DEFAULT_WINDOW_NUM
    window_ms: int = DEFAULT_WINDOW_SIZE_S * 1000


class ConnectionQuotas:
    """Counts and rates of accepted connections per listener and address."""

    def __init__(self, limits: ConnectionLimits) -> None:
        self.limits = limits
        self.total = 0
        self.per_listener: dict[str, int] = {}
        self.per_ip: dict[str, int] = {}
        self._broker_rate = self._new_rate()
        self._listener_rates: dict[str, SampledRate] = {}
        self._ip_rates: dict[str, SampledRate] = {}
        self.refused = 0  # connections closed here (metrics, tests)
        self.delayed = 0

    def _new_rate(self) -> SampledRate:
        return SampledRate(self.limits.window_num, self.limits.window_ms)

    def max_for_ip(self, ip: str, limits: ConnectionLimits | None = None) -> int:
        lim = limits or self.limits
        return lim.per_ip_overrides.get(ip, lim.max_per_ip)

    def admit(self, listener: str, ip: str, now_ms: int, quotas: QuotaMap,
              dynamic: Mapping[str, str] | None = None) -> Decision:
        """Decide on a new connection from `ip` on `listener`; an Admit is counted (call
        `closed` when it ends), a Refuse is not. `dynamic`: the broker's dynamic configs
        (AlterConfigs, this broker's over the cluster default), over the static ones."""
        lim = self.limits if not dynamic else with_dynamic(self.limits, dynamic)
        exempt = listener in lim.exempt_listeners
        if self.per_ip.get(ip, 0) >= self.max_for_ip(ip, lim):
            return self._refuse(f"too many connections from {ip} (max.connections.per.ip "
                                f"{self.max_for_ip(ip, lim)})")
        listener_max = lim.listener_max_connections.get(listener, INT_MAX)
        if self.per_listener.get(listener, 0) >= listener_max:
            return self._refuse(f"listener {listener} has {listener_max} connections "
                                f"(listener.name.{listener.lower()}.max.connections)")
        if not exempt and self._counted_total(lim) >= lim.max_connections:
            return self._refuse(f"the broker has {lim.max_connections} connections "
                                "(max.connections)")
        ip_bound = ip_connection_rate(quotas, ip)
        if ip_bound is not None:
            sensor = self._ip_rates.get(ip)
            if sensor is None:
                sensor = self._ip_rates[ip] = self._new_rate()
            sensor.record(1, now_ms)
            throttle = sensor.throttle_ms(ip_bound, now_ms)
            if throttle > 0:
                sensor.unrecord(1, now_ms)  # Kafka does not count a throttled connection
                return self._refuse(f"connection_creation_rate of {ip} over {ip_bound:g}/s",
                                    close_after_ms=throttle)
        delay = 0
        bound_ms = lim.window_num * lim.window_ms
        rate = lim.listener_creation_rates.get(listener)
        if rate is not None and rate < INT_MAX:
            sensor = self._listener_rates.get(listener)
            if sensor is None:
                sensor = self._listener_rates[listener] = self._new_rate()
            sensor.record(1, now_ms)
            delay = max(delay, min(bound_ms, sensor.throttle_ms(rate, now_ms)))
        if not exempt and lim.max_creation_rate < INT_MAX:
            self._broker_rate.record(1, now_ms)
            delay = max(delay, min(bound_ms,
                                   self._broker_rate.throttle_ms(lim.max_creation_rate,
                                                                 now_ms)))
        self.total += 1
        self.per_listener[listener] = self.per_listener.get(listener, 0) + 1
        self.per_ip[ip] = self.per_ip.get(ip, 0) + 1
        if delay > 0:
            self.delayed += 1
        return Admit(delay)

    def closed(self, listener: str, ip: str) -> None:
        """An admitted connection ended."""
        self.total -= 1
        left = self.per_listener.get(listener, 0) - 1
        if left > 0:
            self.per_listener[listener] = left
        else:
            self.per_listener.pop(listener, None)
        n = self.per_ip.get(ip, 0) - 1
        if n > 0:
            self.per_ip[ip] = n
        else:
            self.per_ip.pop(ip, None)

    def _counted_total(self, lim: ConnectionLimits) -> int:
        exempt = lim.exempt_listeners
        return self.total - sum(n for lst, n in self.per_listener.items() if lst in exempt)

    def _refuse(self, reason: str, close_after_ms: int = 0) -> Refuse:
        self.refused += 1
        return Refuse(reason, close_after_ms)


_DYNAMIC_FIELDS = {"max.connections": "max_connections",
                   "max.connections.per.ip": "max_per_ip",
                   "max.connection.creation.rate": "max_creation_rate"}


def with_dynamic(limits: ConnectionLimits, dynamic: Mapping[str, str]) -> ConnectionLimits:
    """`limits` with the dynamic broker configs that set them (values were validated by the
    controller; one that does not parse is skipped, keeping the static value)."""
    changes: dict[str, Any] = {}
    for key, attr in _DYNAMIC_FIELDS.items():
        raw = dynamic.get(key)
        if raw is not None:
            try:
                changes[attr] = int(raw)
            except ValueError:
                continue
    overrides = dynamic.get("max.connections.per.ip.overrides")
    if overrides is not None:
        with contextlib.suppress(ValueError):
            changes["per_ip_overrides"] = parse_ip_overrides(overrides)
    return dataclasses.replace(limits, **changes) if changes else limits


def ip_connection_rate(quotas: QuotaMap, ip: str) -> float | None:
    """The connection_creation_rate of `ip`: its own entity's, else the default ip
    entity's; None: unlimited (Kafka's default, Int.MaxValue)."""
    for name in (_normal(ip), None):
        values = quotas.get(make_entity([(IP, name)]))
        if values is not None and CONNECTION_CREATION_RATE in values:
            return values[CONNECTION_CREATION_RATE]
    return None


def _normal(ip: str) -> str:
    try:
        return str(ipaddress.ip_address(ip))
    except ValueError:
        return ip


def connection_limits(cfg: NodeConfig) -> ConnectionLimits:
    """The limits a node's config sets (raises nothing: the config was validated)."""
    return ConnectionLimits(
        max_connections=cfg["max.connections"],
        max_per_ip=cfg["max.connections.per.ip"],
        per_ip_overrides=parse_ip_overrides(cfg["max.connections.per.ip.overrides"] or ""),
        max_creation_rate=cfg["max.connection.creation.rate"],
        listener_max_connections=listener_scoped(cfg, "max.connections"),
        listener_creation_rates=listener_scoped(cfg, "max.connection.creation.rate"),
        exempt_listeners=frozenset([cfg.inter_broker_listener_name,
                                    *cfg.controller_listener_names]),
        window_num=cfg["quota.window.num"],
        window_ms=cfg["quota.window.size.seconds"] * 1000)


def limits_in_effect(limits: ConnectionLimits, dynamic: Mapping[str, str] | None,
                     quotas: QuotaMap) -> bool:
    """Whether any connection count or creation rate is bounded (statically, by a dynamic
    broker config, or by an ip entity's connection_creation_rate): a broker of several
    workers then keeps every connection in the process that counts them."""
    lim = limits if not dynamic else with_dynamic(limits, dynamic)
    if (lim.max_connections < INT_MAX or lim.max_per_ip < INT_MAX or lim.per_ip_overrides
            or lim.max_creation_rate < INT_MAX):
        return True
    if any(v < INT_MAX for v in (*lim.listener_max_connections.values(),
                                 *lim.listener_creation_rates.values())):
        return True
    return any(CONNECTION_CREATION_RATE in values for entity, values in quotas.items()
               if any(kind == IP for kind, _ in entity))
