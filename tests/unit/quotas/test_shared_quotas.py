"""Client quotas over the processes of a broker of several workers (broker/quotas/shared.py):
what one process counted counts in the others, so each throttles on the broker's rate."""

from __future__ import annotations

from collections.abc import Callable

from broker.quotas.core import PRODUCER_BYTE_RATE, Quotas, entity
from broker.quotas.shared import SHARE_INTERVAL_S, SharedQuotaUsage, Usage

QUOTAS = {entity(client_id="c"): {PRODUCER_BYTE_RATE: 1000.0}}
T = 1_000_000


class Pair:
    """Two processes' quotas, each sending to the other when its timer fires."""

    def __init__(self) -> None:
        self.timers: list[tuple[float, Callable[[], None]]] = []
        self.a, self.b = Quotas(), Quotas()
        self.share_b = SharedQuotaUsage(self.b, schedule=self._later,
                                        send=lambda u: self.share_a.counted_elsewhere(u, T))
        self.share_a = SharedQuotaUsage(self.a, schedule=self._later,
                                        send=lambda u: self.share_b.counted_elsewhere(u, T))

    def _later(self, delay: float, fn: Callable[[], None]) -> None:
        assert delay == SHARE_INTERVAL_S
        self.timers.append((delay, fn))

    def fire(self) -> None:
        timers, self.timers = self.timers, []
        for _, fn in timers:
            fn()


def test_what_one_process_counted_throttles_in_the_other() -> None:
    pair = Pair()
    # 10 s of the quota's rate, in one process: its windows (11 of 1 s) are full
    assert pair.a.produce.record(QUOTAS, "", "c", 10_000, T) == 0
    assert len(pair.timers) == 1  # one share per interval, however many records
    assert pair.a.produce.record(QUOTAS, "", "c", 10, T) > 0
    assert len(pair.timers) == 1
    # alone, the other process would let the client-id take its quota again
    alone = Quotas()
    assert alone.produce.record(QUOTAS, "", "c", 500, T) == 0
    pair.fire()
    assert pair.b.produce.record(QUOTAS, "", "c", 500, T) > 0


def test_a_value_taken_back_is_taken_back_everywhere() -> None:
    pair = Pair()
    pair.a.fetch.record({entity(client_id="c"): {"consumer_byte_rate": 1000.0}}, "", "c",
                        10_500, T)
    pair.a.fetch.unrecord({entity(client_id="c"): {"consumer_byte_rate": 1000.0}}, "", "c",
                          10_500, T)
    pair.fire()
    assert pair.b.fetch.sensors[("", "c")].total(T) == 0


def test_nothing_is_sent_while_no_quota_applies() -> None:
    sent: list[Usage] = []
    quotas = Quotas()
    SharedQuotaUsage(quotas, schedule=lambda _d, fn: fn(), send=sent.append)
    assert quotas.produce.record({}, "", "c", 10_000, T) == 0
    assert sent == []
