"""TLS and SASL_SSL cost against plaintext, in one run on one node (run by hand).

One combined Skiff node (broker/testing/cluster.py) with three client listeners on
127.0.0.1: PLAINTEXT, SSL (TLS 1.3, no client certificate) and SASL_SSL (SCRAM-SHA-512),
certificates from broker/testing/tls.py. For each listener in turn, librdkafka produces
--mb MiB of --size byte records (acks=1, lz4 off, linger 5 ms) to a topic of its own and
then consumes them from the beginning; the broker's CPU time (user+sys, psutil) is read
around each phase, and the consuming (this) process's own around each consume. Prints
MB/s, broker and client CPU seconds per GB, and ratios to plaintext.
Repeated --repeats times (alternating order); medians. Plaintext Fetch uses sendfile; TLS
copies through the transport in 256 KiB pieces (docs/security.md). With 1000 B records the
Python consume loop of the client is itself a limit (~70-150 MiB/s here); --size 16384 takes
most of the client's per-record cost out.

    python bench/security_bench.py --mb 512 --repeats 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from broker.testing.cluster import Cluster, free_ports
from broker.testing.tls import make_pki

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"


def produce(bootstrap: str, conf: dict[str, Any], topic: str, n: int, size: int) -> float:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": 1,
                  "batch.size": 1 << 20, "queue.buffering.max.kbytes": 1 << 20, **conf})
    value = b"x" * size
    t0 = time.perf_counter()
    for _ in range(n):
        while True:
            try:
                p.produce(topic, value)
                break
            except BufferError:
                p.poll(0.001)
    assert p.flush(120) == 0
    return time.perf_counter() - t0


def consume(bootstrap: str, conf: dict[str, Any], topic: str, n: int) -> float:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"b-{topic}",
                  "enable.auto.commit": False, "fetch.queue.backoff.ms": 1,
                  "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760, **conf})
    c.assign([TopicPartition(topic, 0, 0)])
    got = 0
    t0 = time.perf_counter()
    deadline = t0 + 300
    while got < n and time.perf_counter() < deadline:
        msgs = c.consume(10000, 0.5)
        got += sum(1 for m in msgs if m.error() is None)
    elapsed = time.perf_counter() - t0
    c.close()
    assert got >= n, f"consumed {got} of {n}"
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=256)
    ap.add_argument("--size", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    n = args.mb * (1 << 20) // args.size
    gb = n * args.size / 1e9
    base = Path(tempfile.mkdtemp(prefix="skiff-secbench-"))
    pki = make_pki(base / "pki")
    c = Cluster(base, controllers=1, brokers=0, combined=True,
                add_scram=["SCRAM-SHA-512=[name=bench,password=bench-secret]"], overrides={
        "listener.security.protocol.map":
            "PLAINTEXT:PLAINTEXT,TLS:SSL,SASLTLS:SASL_SSL,CONTROLLER:PLAINTEXT",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": pki.keystore("server"),
        "listener.name.sasltls.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.sasltls.scram-sha-512.sasl.jaas.config":
            f'{SCRAM} required username="bench" password="bench-secret";',
    })
    node = c.nodes[1]
    tls_port, sasl_port = free_ports(2)
    c.node_overrides[1] = {"listeners": (
        f"PLAINTEXT://127.0.0.1:{node.client_port},TLS://127.0.0.1:{tls_port},"
        f"SASLTLS://127.0.0.1:{sasl_port},CONTROLLER://127.0.0.1:{node.controller_port}")}
    cases: dict[str, tuple[str, dict[str, Any]]] = {
        "plaintext": (node.bootstrap, {}),
        "ssl": (f"127.0.0.1:{tls_port}", {"security.protocol": "ssl",
                                           "ssl.ca.location": pki.ca}),
        "sasl_ssl": (f"127.0.0.1:{sasl_port}", {
            "security.protocol": "sasl_ssl", "ssl.ca.location": pki.ca,
            "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": "bench",
            "sasl.password": "bench-secret"}),
    }
    results: dict[str, dict[str, list[float]]] = {
        k: {"p_mbs": [], "c_mbs": [], "p_cpu": [], "c_cpu": [], "cc_cpu": []} for k in cases}
    from confluent_kafka.admin import AdminClient, NewTopic

    print(f"load average at start: {os.getloadavg()[0]:.1f}", flush=True)
    with c:
        c.start()
        proc = psutil.Process(node.pid)
        admin = AdminClient({"bootstrap.servers": node.bootstrap})

        me = psutil.Process()

        def cpu() -> float:
            t = proc.cpu_times()
            return float(t.user + t.system)

        def client_cpu() -> float:  # this process: librdkafka's threads and the loop
            t = me.cpu_times()
            return float(t.user + t.system)

        for r in range(args.repeats):
            order = list(cases) if r % 2 == 0 else list(reversed(cases))
            for name in order:
                bootstrap, conf = cases[name]
                topic = f"bench-{name}-{r}"
                admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
                c0 = cpu()
                pt = produce(bootstrap, conf, topic, n, args.size)
                c1 = cpu()
                k1 = client_cpu()
                ct = consume(bootstrap, conf, topic, n)
                c2 = cpu()
                k2 = client_cpu()
                res = results[name]
                res["p_mbs"].append(args.mb / pt)
                res["c_mbs"].append(args.mb / ct)
                res["p_cpu"].append((c1 - c0) / gb)
                res["c_cpu"].append((c2 - c1) / gb)
                res["cc_cpu"].append((k2 - k1) / gb)
                print(f"round {r} {name:9s} produce {args.mb / pt:7.1f} MiB/s "
                      f"({(c1 - c0) / gb:5.1f} broker CPU s/GB)  consume {args.mb / ct:7.1f} "
                      f"MiB/s ({(c2 - c1) / gb:5.1f} CPU s/GB, client {(k2 - k1) / gb:5.1f})",
                      flush=True)
    print(f"load average at end: {os.getloadavg()[0]:.1f} (1 min), "
          f"{os.getloadavg()[1]:.1f} (5 min)")
    med = {k: {m: statistics.median(v) for m, v in d.items()} for k, d in results.items()}
    plain = med["plaintext"]
    print(f"\n{args.mb} MiB of {args.size} B records per phase, medians of {args.repeats}:")
    print(f"{'listener':10s} {'produce MiB/s':>14s} {'CPU s/GB':>9s} {'consume MiB/s':>14s} "
          f"{'CPU s/GB':>9s} {'client s/GB':>11s} {'produce x':>10s} {'consume x':>10s}")
    for k, m in med.items():
        print(f"{k:10s} {m['p_mbs']:14.1f} {m['p_cpu']:9.2f} {m['c_mbs']:14.1f} "
              f"{m['c_cpu']:9.2f} {m['cc_cpu']:11.2f} {m['p_mbs'] / plain['p_mbs']:10.2f} "
              f"{m['c_mbs'] / plain['c_mbs']:10.2f}")
    print("CPU s/GB: the broker's; client s/GB: the consuming process's own (librdkafka and "
          "the Python loop), consume phase")


if __name__ == "__main__":
    main()
