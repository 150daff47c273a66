"""Metadata scale, in-process: what 10,000s of partitions cost the controller and the image.

Run by hand:  python bench/metadata_scale.py [--partitions 10000] [--brokers 6]

Prints: controller time to turn CreateTopics into records; time to apply them to an
image; image memory per 10,000 partitions (tracemalloc, after dropping the records);
snapshot size and encode/decode time (what a restart or a new broker pays);
fencing a broker (ISR and leader moves for its share of partitions); and the cost
of one small delta on the big image. No network, no disk.
"""

from __future__ import annotations

import argparse
import gc
import random
import sys
import time
import tracemalloc
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from broker.controller import (
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    Controller,
    ControllerSettings,
    CreatableTopic,
)
from broker.metadata import MetadataImage, apply_records
from broker.metadata import records as rec
from broker.metadata.snapshot import decode_snapshot, encode_snapshot


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=10_000)
    ap.add_argument("--per-topic", type=int, default=100)
    ap.add_argument("--brokers", type=int, default=6)
    ap.add_argument("--rf", type=int, default=3)
    a = ap.parse_args()

    c = Controller(ControllerSettings(cluster_id="bench"), random.Random(1))
    img = MetadataImage.empty("bench")
    for b in range(a.brokers):
        r = c.register_broker(img, BrokerRegistrationRequest(
            b, "bench", uuid.UUID(int=b + 1), [("PLAINTEXT", "127.0.0.1", 9092 + b, "PLAINTEXT")],
            rack=f"r{b % 3}"), 0)
        img = apply_records(img, r.records, img.offset + len(r.records), 1)
    for b in range(a.brokers):
        r = c.broker_heartbeat(img, BrokerHeartbeatRequest(b, img.brokers[b].epoch, img.offset), 0)
        img = apply_records(img, r.records, img.offset + len(r.records), 1)

    topics = [CreatableTopic(f"topic-{i}", a.per_topic, a.rf)
              for i in range(a.partitions // a.per_topic)]
    t0 = time.perf_counter()
    result = c.create_topics(img, topics)
    t_ctrl = time.perf_counter() - t0
    n_records = len(result.records)
    encoded = rec.encode_all(result.records)
    t0 = time.perf_counter()
    decoded = [rec.decode(b) for b in encoded]
    t_decode = time.perf_counter() - t0
    del encoded

    t0 = time.perf_counter()
    big = apply_records(img, decoded, img.offset + n_records, 1)
    t_apply = time.perf_counter() - t0
    del big
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    big = apply_records(img, decoded, img.offset + n_records, 1)
    del decoded, result
    gc.collect()
    image_bytes = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()

    t0 = time.perf_counter()
    snap = encode_snapshot(big)
    t_snap_enc = time.perf_counter() - t0
    t0 = time.perf_counter()
    again = decode_snapshot(snap)
    t_snap_dec = time.perf_counter() - t0
    assert again == big

    t0 = time.perf_counter()
    fence = c.tick(big, 0)  # starts every session
    fence = c.tick(big, 10**6)  # every session expired: fence all brokers, one by one
    t_fence = time.perf_counter() - t0

    t0 = time.perf_counter()
    for i in range(100):
        t = big.topic(f"topic-{i % len(topics)}")
        assert t is not None
        big = apply_records(big, [rec.config_record(rec.RESOURCE_TOPIC, t.name, "retention.ms",
                                                    str(i))], big.offset + 1, 1)
    t_small = (time.perf_counter() - t0) / 100

    p = big.partition_count
    per10k = 10_000 / p
    print(f"partitions={p} brokers={a.brokers} rf={a.rf} records={n_records}")
    print(f"controller CreateTopics -> records: {t_ctrl:.3f} s ({t_ctrl * per10k:.3f} s/10k)")
    print(f"decode records from bytes:          {t_decode:.3f} s")
    print(f"apply records to the image:         {t_apply:.3f} s ({t_apply * per10k:.3f} s/10k)")
    print(f"image memory:                       {image_bytes / 1e6:.2f} MB "
          f"({image_bytes * per10k / 1e6:.2f} MB/10k partitions)")
    print(f"snapshot: {len(snap) / 1e6:.2f} MB, encode {t_snap_enc:.3f} s, "
          f"decode+rebuild {t_snap_dec:.3f} s")
    print(f"fence all {a.brokers} brokers (records for ISR/leader moves): {t_fence:.3f} s, "
          f"{len(fence)} records")
    print(f"one small delta on the big image:   {t_small * 1e3:.3f} ms")


if __name__ == "__main__":
    main()
