"""Pauses of Python's cyclic garbage collector, timed.

A collection stops the whole process, the event loop with it: a full (generation 2) one over
a large heap is a latency stall no request log shows. `GC_PAUSES.install()` times every
collection through `gc.callbacks`; one that takes longer than `LOG_PAUSE_S` is logged
(`gc_pause`, with the generation and what it collected), and all of them feed the
`skiff_gc_pause_seconds_total{generation}` and `skiff_gc_pause_max_seconds{generation}`
series of the metrics listener.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from typing import Any

import structlog
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

log = structlog.get_logger("skiff.gc")

LOG_PAUSE_S = 0.1
GENERATIONS = (0, 1, 2)


class GcPauses(Collector):
    """Per generation: collections timed, their total and longest pause (process-wide)."""

    def __init__(self) -> None:
        self.count = [0, 0, 0]
        self.seconds = [0.0, 0.0, 0.0]
        self.longest = [0.0, 0.0, 0.0]
        self._started: float | None = None
        self._installed = False

    def install(self) -> None:
        if not self._installed:
            gc.callbacks.append(self._callback)
            self._installed = True

    def uninstall(self) -> None:
        if self._installed:
            gc.callbacks.remove(self._callback)
            self._installed = False

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        if self._started is None:
            return
        pause = time.perf_counter() - self._started
        self._started = None
        self.observe(int(info.get("generation", 2)), pause, int(info.get("collected", 0)))

    def observe(self, generation: int, pause_s: float, collected: int = 0) -> None:
        if generation not in GENERATIONS:
            return
        self.count[generation] += 1
        self.seconds[generation] += pause_s
        self.longest[generation] = max(self.longest[generation], pause_s)
        if pause_s >= LOG_PAUSE_S:
            log.warning("gc_pause", generation=generation, pause_ms=round(pause_s * 1000, 1),
                        collected=collected, tracked_objects=len(gc.get_objects(generation)))

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        total = CounterMetricFamily(
            "skiff_gc_pause_seconds", "Time the process spent in Python's cyclic garbage "
            "collector, per generation collected", labels=["generation"])
        longest = GaugeMetricFamily(
            "skiff_gc_pause_max_seconds", "The longest single collection since the process "
            "started, per generation", labels=["generation"])
        for g in GENERATIONS:
            total.add_metric([str(g)], self.seconds[g])
            longest.add_metric([str(g)], self.longest[g])
        yield total
        yield longest


GC_PAUSES = GcPauses()
