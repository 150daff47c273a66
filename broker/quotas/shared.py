"""Client quotas of a broker of several worker processes (`skiff.broker.workers`).

Kafka's client quotas bound what a user or client-id takes from one broker. Each process of
a broker measures the connections it serves; alone it would let a client-id whose
connections reach N processes take N times its quota. So each process tells the others
what it counted, per quota and sensor, every SHARE_INTERVAL_S while anything is counted,
and counts what they tell it (`ClientQuotaManager.record_elsewhere`): every process then
measures the broker's rate, at most one interval late, and throttles its own connections
on it. Nothing is sent while no quota applies (the managers count nothing then).
"""

from __future__ import annotations

from collections.abc import Callable

from broker.quotas.core import ClientQuotaManager, Quotas

SHARE_INTERVAL_S = 0.05

# (quota key, sensor) -> value counted since the last share
Usage = list[tuple[str, tuple[str, str], float]]


class SharedQuotaUsage:
    """One process's side. `schedule(delay_s, fn)` runs fn later on the event loop;
    `send(usage)` gives it to every other process of the broker."""

    def __init__(self, quotas: Quotas, *, schedule: Callable[[float, Callable[[], None]], object],
                 send: Callable[[Usage], None]) -> None:
        self._managers: dict[str, ClientQuotaManager] = {m.key: m for m in quotas.managers()}
        self._schedule = schedule
        self._send = send
        self._pending: dict[tuple[str, tuple[str, str]], float] = {}
        for manager in self._managers.values():
            manager.on_record = self._counted

    def _counted(self, key: str, sensor: tuple[str, str], value: float) -> None:
        if not self._pending:
            self._schedule(SHARE_INTERVAL_S, self.flush)
        slot = (key, sensor)
        self._pending[slot] = self._pending.get(slot, 0.0) + value

    def flush(self) -> None:
        if not self._pending:
            return
        usage = [(key, sensor, value) for (key, sensor), value in self._pending.items()]
        self._pending.clear()
        self._send(usage)

    def counted_elsewhere(self, usage: Usage, now_ms: int) -> None:
        for key, sensor, value in usage:
            manager = self._managers.get(key)
            if manager is not None:
                manager.record_elsewhere(sensor, value, now_ms)
