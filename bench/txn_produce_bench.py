"""Transactional produce (a commit every --commit-ms) against idempotent non-transactional
produce, in one run on one node (run by hand).

One `skiff dev` node (broker/testing/node.py), a topic of --partitions partitions. librdkafka
(confluent-kafka) writes --messages records of --size bytes, round-robin over the
partitions, first as an idempotent producer (enable.idempotence=true, acks=all), then as a
transactional producer that commits every --commit-ms (begin, produce, commit_transaction,
begin, ...; the coordinator writes PrepareCommit, the markers and CompleteCommit for each).
--repeats rounds, alternating which goes first; the median records/s of each and their
ratio are printed (goal >= 0.8).

    python bench/txn_produce_bench.py --messages 300000 --repeats 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from broker.testing.node import SkiffNode

WAIT_S = 60.0


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(WAIT_S)


def run(bootstrap: str, topic: str, n: int, size: int, partitions: int,
        transactional: bool, commit_ms: int) -> tuple[float, int]:
    """(records/s, transactions committed)."""
    conf = {"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all",
            "enable.idempotence": True, "queue.buffering.max.messages": 500000,
            "log_level": 3}
    if transactional:
        conf["transactional.id"] = f"bench-{uuid.uuid4()}"
    p = Producer(conf)
    value = os.urandom(size)
    txns = 0
    if transactional:
        p.init_transactions(WAIT_S)
        p.begin_transaction()
    started = time.monotonic()
    next_commit = started + commit_ms / 1000
    for i in range(n):
        while True:
            try:
                p.produce(topic, value=value, partition=i % partitions)
                break
            except BufferError:
                p.poll(0.005)
        if i % 1000 == 0:
            p.poll(0)
        if transactional and time.monotonic() >= next_commit:
            p.commit_transaction(WAIT_S)
            txns += 1
            p.begin_transaction()
            next_commit = time.monotonic() + commit_ms / 1000
    if transactional:
        p.commit_transaction(WAIT_S)
        txns += 1
    else:
        assert p.flush(WAIT_S) == 0
    took = time.monotonic() - started
    return n / took, txns


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=300_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--commit-ms", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        node = SkiffNode(Path(tmp))
        node.start()
        try:
            node.wait_ready()
            idem: list[float] = []
            txn: list[float] = []
            commits: list[int] = []
            for r in range(args.repeats):
                order = (False, True) if r % 2 == 0 else (True, False)
                for transactional in order:
                    topic = f"bench-{'txn' if transactional else 'idem'}-{r}"
                    create_topic(node.bootstrap, topic, args.partitions)
                    rate, n_txns = run(node.bootstrap, topic, args.messages, args.size,
                                       args.partitions, transactional, args.commit_ms)
                    (txn if transactional else idem).append(rate)
                    if transactional:
                        commits.append(n_txns)
                    print(f"round {r}: {'transactional' if transactional else 'idempotent'}"
                          f" {rate:,.0f} records/s"
                          + (f" ({n_txns} commits)" if transactional else ""), flush=True)
            i, t = statistics.median(idem), statistics.median(txn)
            print(f"idempotent {i:,.0f} records/s, transactional (commit every "
                  f"{args.commit_ms} ms) {t:,.0f} records/s: ratio {t / i:.2f} (goal >= 0.8); "
                  f"load average {os.getloadavg()[0]:.1f}")
        finally:
            node.close()


if __name__ == "__main__":
    main()
