"""How closely Kafka's windowed rate holds a greedy producer, simulated (run by hand).

A producer with one request of --batch bytes in flight sends its next request when the
answer to the last has come back (--rtt ms) and the throttle time it carried has passed
(KIP-219: the broker mutes the connection that long; the client waits as well). The broker
records each request against a producer_byte_rate of --rate bytes/s and answers the throttle
time of Kafka's QuotaUtils.throttleTime, (rate - bound) / bound x Rate.windowSize.

Three rate keepers measure the same stream of requests:
  * kafka<3.8: Kafka's SampledStat before apache/kafka#15889: a ring of `samples` windows, a
    window obsolete once it *began* `samples` windows ago;
  * kafka>=3.8: after it: `samples + 1` windows, obsolete once its *last event* is that old;
  * skiff: broker/quotas/core.py's SampledRate.
Both Kafka models are written here from Kafka's documented semantics (SampledStat, Rate,
QuotaUtils), as a reference for Skiff's. Prints the acknowledged rate over consecutive
--span second spans, as multiples of the bound, for 2 and 11 windows of 1 s.

    python bench/quota_window_sim.py
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Protocol

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from broker.quotas.core import SampledRate


class Keeper(Protocol):
    def record(self, value: float, now_ms: int) -> None: ...

    def throttle_ms(self, bound: float, now_ms: int) -> int: ...


class KafkaModel:
    """A ring of windows [start, last event, value]; `ring` slots; obsolete by `by`."""

    def __init__(self, samples: int, window_ms: int, *, ring: int, by_last_event: bool) -> None:
        self.samples, self.window_ms, self.ring = samples, window_ms, ring
        self.by_last_event = by_last_event
        self.windows: list[list[float]] = []
        self.current = 0

    def record(self, value: float, now_ms: int) -> None:
        if not self.windows:
            self.windows.append([now_ms, now_ms, 0.0])
        w = self.windows[self.current]
        if now_ms - w[0] >= self.window_ms:
            self.current = (self.current + 1) % self.ring
            if self.current >= len(self.windows):
                self.windows.append([now_ms, now_ms, 0.0])
            else:
                self.windows[self.current][:] = [now_ms, now_ms, 0.0]
            w = self.windows[self.current]
        w[2] += value
        w[1] = now_ms

    def _purge(self, now_ms: int) -> None:
        for w in self.windows:
            age = now_ms - (w[1] if self.by_last_event else w[0])
            if age >= self.samples * self.window_ms:
                w[:] = [now_ms, now_ms, 0.0]

    def _window_size(self, now_ms: int) -> float:
        self._purge(now_ms)
        elapsed = now_ms - min(w[0] for w in self.windows)
        full = int(elapsed // self.window_ms)
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return max(elapsed, 1)

    def throttle_ms(self, bound: float, now_ms: int) -> int:
        size = self._window_size(now_ms)
        rate = sum(w[2] for w in self.windows) * 1000.0 / size
        return 0 if rate <= bound else round((rate - bound) / bound * size)


def simulate(keeper: Keeper, rate: float, batch: int, rtt_ms: int, until_s: float,
             span_s: float) -> list[float]:
    acked: list[tuple[int, int]] = []
    t = 0
    while t < until_s * 1000:
        keeper.record(batch, t)
        throttle = keeper.throttle_ms(rate, t)
        acked.append((t + rtt_ms, batch))
        t += rtt_ms + throttle
    spans = int(until_s // span_s)
    out = []
    for i in range(spans):
        lo, hi = i * span_s * 1000, (i + 1) * span_s * 1000
        out.append(sum(b for at, b in acked if lo <= at < hi) / span_s / rate)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", type=float, default=100_000)
    ap.add_argument("--batch", type=int, default=16384)
    ap.add_argument("--rtt", type=int, default=2)
    ap.add_argument("--span", type=float, default=20.0)
    ap.add_argument("--until", type=float, default=120.0)
    args = ap.parse_args()
    print(f"greedy producer, {args.batch} B requests, one in flight, rtt {args.rtt} ms, "
          f"bound {args.rate:.0f} B/s; acknowledged rate / bound per {args.span:.0f} s span")
    for samples in (2, 11):
        keepers: dict[str, Keeper] = {
            "kafka<3.8": KafkaModel(samples, 1000, ring=samples, by_last_event=False),
            "kafka>=3.8": KafkaModel(samples, 1000, ring=samples + 1, by_last_event=True),
            "skiff": SampledRate(samples, 1000),
        }
        for name, k in keepers.items():
            spans = simulate(k, args.rate, args.batch, args.rtt, args.until, args.span)
            print(f"quota.window.num={samples:2d} {name:10s} "
                  + " ".join(f"{x:5.3f}" for x in spans))


if __name__ == "__main__":
    main()
