"""The quota core: what a client is allowed and how long it must wait.

Entities, as Kafka's ClientQuotaRecord names them: one to three (type, name) pairs, type one
of "user", "client-id", "ip"; a name of None is that type's default entity. Stored as
`QuotaEntity`, a tuple of pairs sorted by type, so equal entities compare equal.

Which quota applies to a request of (user, client-id), for one key, is the first entity of
Kafka's precedence that sets that key (docs: "Quotas" in Kafka's operations guide):
  1 /config/users/<user>/clients/<client-id>
  2 /config/users/<user>/clients/<default>
  3 /config/users/<user>
  4 /config/users/<default>/clients/<client-id>
  5 /config/users/<default>/clients/<default>
  6 /config/users/<default>
  7 /config/clients/<client-id>
  8 /config/clients/<default>
The entity that matched also says who shares the quota (Kafka's quota metric tags): a match on
/config/users/<user> is shared by every client of that user; /config/users/<default> gives each
user a quota of its own; and so on. `Resolved.sensor` is that sharing key.

Rates are Kafka's `Rate` over a `SampledStat`: `samples` windows of `window_ms` each (Kafka's
quota.window.num, default 11, and quota.window.size.seconds, default 1). The rate is the sum
over the live windows divided by the elapsed time they span, counted as at least
(samples - 1) full windows. A request that takes the rate over the bound is throttled for
  (rate - bound) / bound * elapsed window time
(Kafka's QuotaUtils.throttleTime); request_percentage caps it at one window, as Kafka's
ClientRequestQuotaManager does.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

USER: Final = "user"
CLIENT_ID: Final = "client-id"
IP: Final = "ip"
ENTITY_TYPES: Final = (USER, CLIENT_ID, IP)

PRODUCER_BYTE_RATE: Final = "producer_byte_rate"
CONSUMER_BYTE_RATE: Final = "consumer_byte_rate"
REQUEST_PERCENTAGE: Final = "request_percentage"
CONTROLLER_MUTATION_RATE: Final = "controller_mutation_rate"
CONNECTION_CREATION_RATE: Final = "connection_creation_rate"

# key -> Kafka's ConfigDef type of it: "long" keys take whole numbers only.
USER_CLIENT_KEYS: Final[Mapping[str, str]] = {
    PRODUCER_BYTE_RATE: "long",
    CONSUMER_BYTE_RATE: "long",
    REQUEST_PERCENTAGE: "double",
    CONTROLLER_MUTATION_RATE: "double",
}
IP_KEYS: Final[Mapping[str, str]] = {CONNECTION_CREATION_RATE: "int"}

DEFAULT_WINDOW_NUM: Final = 11
DEFAULT_WINDOW_SIZE_S: Final = 1

QuotaEntity = tuple[tuple[str, str | None], ...]
QuotaMap = Mapping[QuotaEntity, Mapping[str, float]]


def entity(**parts: str | None) -> QuotaEntity:
    """entity(user="alice", client_id=None) -> (("client-id", None), ("user", "alice"))."""
    return make_entity((k.replace("_", "-"), v) for k, v in parts.items())


def make_entity(pairs: Iterable[tuple[str, str | None]]) -> QuotaEntity:
    return tuple(sorted(pairs, key=lambda p: p[0]))


def entity_text(e: QuotaEntity) -> str:
    """Kafka's ClientQuotaEntity text: user=alice, client-id=<default>."""
    return ", ".join(f"{t}={'<default>' if n is None else n}" for t, n in e)


def validate_entity(e: QuotaEntity) -> str | None:
    """Why an entity cannot hold quotas (Kafka's INVALID_REQUEST messages), or None."""
    if not e:
        return "Invalid empty client quota entity"
    types = [t for t, _ in e]
    if len(set(types)) != len(types):
        return f"Duplicate entity type in {entity_text(e)}"
    for t in types:
        if t not in ENTITY_TYPES:
            return f"Unhandled client quota entity type: {t}"
    if IP in types and len(types) > 1:
        return "Invalid quota entity combination, IP entity should not be combined with " \
               "User or ClientId"
    for t, n in e:
        if t == IP and n is not None and not _is_ip(n):
            return f"{n} is not a valid IP address"
    return None


def _is_ip(text: str) -> bool:
    import ipaddress

    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def validate_value(e: QuotaEntity, key: str, value: float) -> str | None:
    """Why `key` = `value` cannot be set on `e` (Kafka's messages), or None."""
    keys = IP_KEYS if any(t == IP for t, _ in e) else USER_CLIENT_KEYS
    kind = keys.get(key)
    if kind is None:
        return f"Invalid configuration key {key}"
    if not math.isfinite(value) or value <= 0.0:
        return f"Quota {key} must be greater than 0"
    if kind in ("long", "int"):
        if abs(round(value) - value) > 1e-6:
            return f"Configuration {key} must be a {'Long' if kind == 'long' else 'Integer'} " \
                   "value"
        if kind == "int" and value > 2**31 - 1:
            return f"Proposed value for {key} is too large for an INT"
    return None


# -- precedence -----------------------------------------------------------------------

# (user part, client part) of the 8 entities in precedence order: "name" = the actual name,
# None = the default entity, "-" = the type is absent from the entity.
_PRECEDENCE: Final[tuple[tuple[str, str], ...]] = (
    ("name", "name"), ("name", "default"), ("name", "-"),
    ("default", "name"), ("default", "default"), ("default", "-"),
    ("-", "name"), ("-", "default"),
)


@dataclass(frozen=True, slots=True)
class Resolved:
    """The quota bound for one key and the key of the sensor that counts against it:
    (user or "", client-id or "") as Kafka's quota metric tags put it."""

    bound: float
    sensor: tuple[str, str]
    entity: QuotaEntity


def resolve(quotas: QuotaMap, user: str, client_id: str, key: str) -> Resolved | None:
    """The quota of `key` that applies to (user, client_id), or None when none does."""
    if not quotas:
        # No client quota at all (the common case): every Produce and Fetch asks, and
        # building the eight candidate entities cost ~4 us a call.
        return None
    for u, c in _PRECEDENCE:
        pairs: list[tuple[str, str | None]] = []
        if u != "-":
            pairs.append((USER, user if u == "name" else None))
        if c != "-":
            pairs.append((CLIENT_ID, client_id if c == "name" else None))
        e = make_entity(pairs)
        values = quotas.get(e)
        if values is not None and key in values:
            return Resolved(values[key], (user if u != "-" else "", client_id if c != "-" else ""),
                            e)
    return None


# -- sampled rate ---------------------------------------------------------------------

@dataclass(slots=True)
class _Sample:
    start_ms: int
    last_ms: int
    value: float = 0.0


@dataclass(slots=True)
class SampledRate:
    """Kafka's Rate over a SampledStat of `samples` windows of `window_ms` each, as Kafka
    keeps them since 3.8 (apache/kafka#15889, "Fix rate metric spikes"): one window more
    than `samples` is kept, and a window leaves when its last event, not its start, is
    `samples` windows old, so a window still written to is never dropped mid-measure."""

    samples: int = DEFAULT_WINDOW_NUM
    window_ms: int = DEFAULT_WINDOW_SIZE_S * 1000
    _windows: list[_Sample] = field(default_factory=list)

    def record(self, value: float, now_ms: int) -> None:
        self._purge(now_ms)
        if not self._windows or now_ms - self._windows[-1].start_ms >= self.window_ms:
            self._windows.append(_Sample(now_ms, now_ms))
            if len(self._windows) > self.samples + 1:
                del self._windows[0]
        current = self._windows[-1]
        current.value += value
        current.last_ms = now_ms

    def _purge(self, now_ms: int) -> None:
        # Windows are in time order, each one's events before the next one's start.
        horizon = self.samples * self.window_ms
        while self._windows and now_ms - self._windows[0].last_ms >= horizon:
            del self._windows[0]

    def elapsed_ms(self, now_ms: int) -> int:
        """Kafka's Rate.windowSize: time since the oldest live window began, counted as at
        least samples - 1 full windows."""
        self._purge(now_ms)
        elapsed = now_ms - self._windows[0].start_ms if self._windows else 0
        full = elapsed // self.window_ms
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return max(1, elapsed)

    def total(self, now_ms: int) -> float:
        self._purge(now_ms)
        return sum(w.value for w in self._windows)

    def rate(self, now_ms: int) -> float:
        """Per second."""
        return self.total(now_ms) * 1000.0 / self.elapsed_ms(now_ms)

    def throttle_ms(self, bound: float, now_ms: int) -> int:
        """How long to wait until the rate is back at `bound` (0 when within it)."""
        r = self.rate(now_ms)
        if r <= bound:
            return 0
        return round((r - bound) / bound * self.elapsed_ms(now_ms))

    def unrecord(self, value: float, now_ms: int) -> None:
        """Take back a value recorded in the current window (a throttled Fetch sends no
        data, as Kafka's unrecordQuotaSensor does)."""
        if self._windows:
            self._windows[-1].value -= value


# -- the quota manager of one key -----------------------------------------------------

@dataclass
class ClientQuotaManager:
    """One quota type (producer bytes, consumer bytes, request time, controller mutations):
    a sensor per sharing key, each measured against the bound that applies now."""

    key: str
    samples: int = DEFAULT_WINDOW_NUM
    window_ms: int = DEFAULT_WINDOW_SIZE_S * 1000
    sensors: dict[tuple[str, str], SampledRate] = field(default_factory=dict)
    max_throttle_ms: int | None = None  # request_percentage: one window
    throttled: int = 0  # responses throttled so far (metrics)
    throttle_ms_total: int = 0
    # told of every value counted (key, sensor, value; negative when taken back), for the
    # other processes of a broker of several workers (broker/quotas/shared.py)
    on_record: Callable[[str, tuple[str, str], float], None] | None = None

    def _sensor(self, key: tuple[str, str]) -> SampledRate:
        s = self.sensors.get(key)
        if s is None:
            s = self.sensors[key] = SampledRate(self.samples, self.window_ms)
        return s

    def record(self, quotas: QuotaMap, user: str, client_id: str, value: float,
               now_ms: int) -> int:
        """Count `value` and answer the throttle time in ms (0: within quota or no quota)."""
        q = resolve(quotas, user, client_id, self.key)
        if q is None:
            return 0
        s = self._sensor(q.sensor)
        s.record(value, now_ms)
        if self.on_record is not None and value:
            self.on_record(self.key, q.sensor, value)
        t = s.throttle_ms(q.bound, now_ms)
        if self.max_throttle_ms is not None:
            t = min(t, self.max_throttle_ms)
        if t > 0:
            self.throttled += 1
            self.throttle_ms_total += t
        return t

    def unrecord(self, quotas: QuotaMap, user: str, client_id: str, value: float,
                 now_ms: int) -> None:
        q = resolve(quotas, user, client_id, self.key)
        if q is not None:
            self._sensor(q.sensor).unrecord(value, now_ms)
            if self.on_record is not None and value:
                self.on_record(self.key, q.sensor, -value)

    def record_elsewhere(self, sensor: tuple[str, str], value: float, now_ms: int) -> None:
        """What another process of this broker counted against `sensor` (taken back when
        negative): it counts here too, so each process throttles on the broker's rate."""
        s = self._sensor(sensor)
        if value >= 0:
            s.record(value, now_ms)
        else:
            s.unrecord(-value, now_ms)

    def max_value_in_window(self, quotas: QuotaMap, user: str, client_id: str) -> float:
        """Kafka's getMaxValueInQuotaWindow: bound x (samples - 1) windows, so one Fetch
        cannot return more than the consumer may have in a window; inf without a quota."""
        q = resolve(quotas, user, client_id, self.key)
        if q is None:
            return math.inf
        return q.bound * (self.samples - 1) * self.window_ms / 1000.0

    def headroom(self, quotas: QuotaMap, user: str, client_id: str, now_ms: int) -> float:
        """What may still be taken now without going over the bound: bound x elapsed
        window time - what the sensor holds, at most max_value_in_window; inf without a
        quota. A Fetch is sized to it, so a consumer is held to its rate by the size of
        its answers rather than by throttled empty ones."""
        q = resolve(quotas, user, client_id, self.key)
        if q is None:
            return math.inf
        cap = q.bound * (self.samples - 1) * self.window_ms / 1000.0
        s = self.sensors.get(q.sensor)
        if s is None:
            return cap
        room = q.bound * s.elapsed_ms(now_ms) / 1000.0 - s.total(now_ms)
        return max(0.0, min(cap, room))

    def would_throttle_ms(self, quotas: QuotaMap, user: str, client_id: str,
                          now_ms: int) -> int:
        """The throttle time the sensor owes right now, recording nothing (KIP-599's strict
        check before a mutation is accepted)."""
        q = resolve(quotas, user, client_id, self.key)
        if q is None:
            return 0
        s = self.sensors.get(q.sensor)
        return 0 if s is None else s.throttle_ms(q.bound, now_ms)


@dataclass
class Quotas:
    """The broker's four quota managers over the metadata image's client quotas."""

    samples: int = DEFAULT_WINDOW_NUM
    window_ms: int = DEFAULT_WINDOW_SIZE_S * 1000
    mutation_samples: int = DEFAULT_WINDOW_NUM
    mutation_window_ms: int = DEFAULT_WINDOW_SIZE_S * 1000
    produce: ClientQuotaManager = field(init=False)
    fetch: ClientQuotaManager = field(init=False)
    request: ClientQuotaManager = field(init=False)
    controller_mutation: ClientQuotaManager = field(init=False)

    def __post_init__(self) -> None:
        def m(key: str) -> ClientQuotaManager:
            return ClientQuotaManager(key, self.samples, self.window_ms)

        self.produce = m(PRODUCER_BYTE_RATE)
        self.fetch = m(CONSUMER_BYTE_RATE)
        self.request = m(REQUEST_PERCENTAGE)
        self.request.max_throttle_ms = self.window_ms
        self.controller_mutation = ClientQuotaManager(
            CONTROLLER_MUTATION_RATE, self.mutation_samples, self.mutation_window_ms)

    def managers(self) -> tuple[ClientQuotaManager, ...]:
        return (self.produce, self.fetch, self.request, self.controller_mutation)

    @staticmethod
    def any_set(quotas: QuotaMap, key: str) -> bool:
        """Whether some entity sets `key` (no need to measure otherwise)."""
        return any(key in v for v in quotas.values())


def user_of(principal: str) -> str:
    """The quota user of a principal "User:alice" -> "alice" (Kafka takes the principal's
    name, whatever its type)."""
    _, sep, name = principal.partition(":")
    return name if sep else principal
