"""GC pause timing (broker/util/gc_pauses.py): what is counted, logged and exported."""

from __future__ import annotations

import gc

import structlog

from broker.util.gc_pauses import LOG_PAUSE_S, GcPauses


def _samples(pauses: GcPauses) -> dict[tuple[str, str], float]:
    return {(s.name, s.labels["generation"]): s.value
            for family in pauses.collect() for s in family.samples}


def test_every_collection_is_timed_per_generation() -> None:
    pauses = GcPauses()
    pauses.install()
    try:
        gc.collect(0)
        gc.collect()
    finally:
        pauses.uninstall()
    assert pauses.count[0] >= 1 and pauses.count[2] >= 1
    assert pauses.seconds[2] > 0 and pauses.longest[2] <= pauses.seconds[2]
    before = pauses.count[2]
    gc.collect()  # uninstalled: no longer counted
    assert pauses.count[2] == before


def test_a_long_pause_is_logged_and_exported() -> None:
    pauses = GcPauses()
    with structlog.testing.capture_logs() as logs:
        pauses.observe(1, LOG_PAUSE_S / 10, collected=3)
        pauses.observe(2, LOG_PAUSE_S * 3, collected=7)
    assert [(e["event"], e["generation"], e["collected"]) for e in logs] == [
        ("gc_pause", 2, 7)]
    assert logs[0]["pause_ms"] == round(LOG_PAUSE_S * 3000, 1)
    samples = _samples(pauses)
    assert samples[("skiff_gc_pause_seconds_total", "2")] == LOG_PAUSE_S * 3
    assert samples[("skiff_gc_pause_max_seconds", "1")] == LOG_PAUSE_S / 10
    assert samples[("skiff_gc_pause_seconds_total", "0")] == 0
