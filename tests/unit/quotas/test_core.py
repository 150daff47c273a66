"""The pure quota core: Kafka's precedence of the 8 user/client-id entities, who shares a
quota, sampled rates and throttle times, and ClientQuota records in the image and snapshots."""

from __future__ import annotations

import math

import pytest

from broker.metadata import records as rec
from broker.metadata.delta import apply_records
from broker.metadata.image import MetadataImage
from broker.metadata.snapshot import decode_snapshot, encode_snapshot
from broker.quotas.core import (
    PRODUCER_BYTE_RATE,
    ClientQuotaManager,
    SampledRate,
    entity,
    resolve,
)

# The 8 entities in Kafka's precedence order, each with a distinct bound.
LEVELS = [
    (entity(user="alice", client_id="app"), ("alice", "app")),
    (entity(user="alice", client_id=None), ("alice", "app")),
    (entity(user="alice"), ("alice", "")),
    (entity(user=None, client_id="app"), ("alice", "app")),
    (entity(user=None, client_id=None), ("alice", "app")),
    (entity(user=None), ("alice", "")),
    (entity(client_id="app"), ("", "app")),
    (entity(client_id=None), ("", "app")),
]


@pytest.mark.parametrize("level", range(len(LEVELS)))
def test_precedence_first_entity_that_sets_the_key_wins(level: int) -> None:
    # Every entity from `level` down sets the key: the one at `level` must win.
    quotas = {e: {PRODUCER_BYTE_RATE: float(100 + i)} for i, (e, _) in enumerate(LEVELS)
              if i >= level}
    got = resolve(quotas, "alice", "app", PRODUCER_BYTE_RATE)
    assert got is not None
    assert got.bound == 100 + level
    assert got.entity == LEVELS[level][0]
    assert got.sensor == LEVELS[level][1]


def test_keys_resolve_independently_and_other_users_fall_through() -> None:
    quotas = {entity(user="alice"): {"consumer_byte_rate": 5.0},
              entity(client_id=None): {PRODUCER_BYTE_RATE: 7.0}}
    p = resolve(quotas, "alice", "x", PRODUCER_BYTE_RATE)
    assert p is not None and p.bound == 7.0 and p.sensor == ("", "x")
    assert resolve(quotas, "bob", "x", "consumer_byte_rate") is None
    assert resolve({}, "alice", "x", PRODUCER_BYTE_RATE) is None


def test_sampled_rate_counts_at_least_samples_minus_one_windows() -> None:
    r = SampledRate(samples=11, window_ms=1000)
    r.record(1000, now_ms=0)
    # one window so far: elapsed counts as 10 full windows
    assert r.elapsed_ms(0) == 10_000
    assert r.rate(0) == pytest.approx(100.0)
    for t in range(1, 20):
        r.record(1000, now_ms=t * 1000)
    # a steady 1000/s over the live windows (the oldest expired)
    assert r.rate(19_500) == pytest.approx(11 * 1000 / 10.5, rel=0.01)


def test_a_window_leaves_when_its_last_event_is_samples_windows_old() -> None:
    """Kafka >= 3.8 (apache/kafka#15889): the purge looks at a window's last event, and
    samples + 1 windows are kept."""
    r = SampledRate(samples=3, window_ms=1000)
    r.record(100, now_ms=0)
    r.record(100, now_ms=900)  # same window, started at 0
    # 3.1 s after the window began but 2.2 s after its last event: still counted, and
    # the span runs from its start
    assert r.total(3100) == 200
    assert r.elapsed_ms(3100) == 3100
    assert r.total(3900) == 0  # 3 windows after its last event: gone
    r = SampledRate(samples=2, window_ms=1000)
    for t in (0, 1000, 2000, 2999):
        r.record(1, now_ms=t)
    # windows began at 0, 1000, 2000; the one at 0 is 2999 ms past its only event
    # (>= 2 windows): it left, the ones at 1000 and 2000 remain
    assert r.total(2999) == 3
    assert r.elapsed_ms(2999) == 1999
    r = SampledRate(samples=2, window_ms=1000)
    for t in (0, 999, 1000, 1999, 2000):
        r.record(1, now_ms=t)
    # the window at 0 ended its events at 999: 2000 - 999 < 2000, so three windows
    # (samples + 1) are live and the span is measured from 0
    assert r.total(2000) == 5
    assert r.elapsed_ms(2000) == 2000


def test_throttle_time_is_kafkas_formula() -> None:
    r = SampledRate(samples=11, window_ms=1000)
    r.record(2000, now_ms=0)  # 200/s over the 10 s minimum
    assert r.throttle_ms(200, 0) == 0
    # (200 - 100) / 100 * 10_000 ms
    assert r.throttle_ms(100, 0) == 10_000
    # no cap for byte rates: a burst of 100 s of quota waits about 100 s
    r.record(100 * 100 - 2000, now_ms=0)
    assert r.throttle_ms(100, 0) == 90_000


def test_manager_shares_a_sensor_per_matched_entity() -> None:
    m = ClientQuotaManager(PRODUCER_BYTE_RATE)
    quotas = {entity(user="alice"): {PRODUCER_BYTE_RATE: 100.0}}
    # two clients of alice share /config/users/alice
    assert m.record(quotas, "alice", "a", 500, 0) == 0
    assert m.record(quotas, "alice", "b", 1000, 0) == 5000
    assert set(m.sensors) == {("alice", "")}
    # bob has no quota at all
    assert m.record(quotas, "bob", "a", 10**9, 0) == 0
    assert m.max_value_in_window(quotas, "alice", "a") == 1000.0
    assert math.isinf(m.max_value_in_window(quotas, "bob", "a"))
    m.unrecord(quotas, "alice", "b", 1000, 0)
    assert m.would_throttle_ms(quotas, "alice", "a", 0) == 0


def test_client_quota_records_image_and_snapshot() -> None:
    alice = entity(user="alice", client_id=None)
    records = [rec.client_quota_record(alice, PRODUCER_BYTE_RATE, 1024.0),
               rec.client_quota_record(alice, "consumer_byte_rate", 2048.0),
               rec.client_quota_record(entity(ip=None), "connection_creation_rate", 3.0),
               rec.client_quota_record(alice, "consumer_byte_rate", None)]
    image = apply_records(MetadataImage.empty("c"), [rec.decode(rec.encode(r))
                                                     for r in records])
    assert image.client_quotas == {alice: {PRODUCER_BYTE_RATE: 1024.0},
                                   entity(ip=None): {"connection_creation_rate": 3.0}}
    assert rec.client_quota_entity(rec.unwrap(records[0])) == alice
    again = decode_snapshot(encode_snapshot(image))
    assert again.client_quotas == image.client_quotas
    emptied = apply_records(image, [rec.client_quota_record(alice, PRODUCER_BYTE_RATE, None)])
    assert alice not in emptied.client_quotas
