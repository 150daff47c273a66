"""What the metrics cost on the produce path: one `skiff dev` node with metrics on (and
scraped every --scrape-interval seconds) against one with `metrics.listeners` empty (no
endpoint, no counters), in the same run, rounds alternating so drift hits both alike.

Per round: a fresh topic, --messages records of --size bytes produced by librdkafka
(acks=all, in its own process, as bench/perf.py does), the node's CPU seconds
(utime+stime from /proc) and the elapsed time around the produce. Printed per mode: the
median produce throughput and broker CPU-seconds per GB, and the ratios on/off.

A second figure does not depend on the machine's noise: the metrics work of a produce
request (server: request count, socket bytes, the timing coroutine around the handler and
its clock reads, six phase histograms; replica manager: the topic's counters), timed
in-process with timeit, times the produce requests the node served (read from its own
metrics), as a share of the CPU it spent. The producer is bench/perf.py's, with a chosen
batch.size.

    python bench/metrics_bench.py --messages 300000 --rounds 5
    python bench/metrics_bench.py --messages 500000 --rounds 8 --concurrent            # busy host
    python bench/metrics_bench.py --messages 500000 --rounds 8 --concurrent --control  # its noise
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import threading
import time
import timeit
import urllib.request
import uuid
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.perf import (  # noqa: E402
    broker_cpu_s,
    create_topic,
    producer_proc,
    run_in_process,
)
from broker.testing.node import SkiffNode  # noqa: E402


class Scraper:
    """GETs the node's /metrics every `interval` seconds on a thread."""

    def __init__(self, port: int, interval: float) -> None:
        self.url = f"http://127.0.0.1:{port}/metrics"
        self.interval = interval
        self.scrapes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            with urllib.request.urlopen(self.url, timeout=10) as resp:
                resp.read()
            self.scrapes += 1

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(15)


def produce_requests(port: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    return sum(int(float(line.rsplit(" ", 1)[1])) for line in text.splitlines()
               if line.startswith('kafka_network_requestmetrics_requests_total{request="Produce"'))


def scrape_cost_s(node: SkiffNode, n: int = 50) -> float:
    """CPU seconds the node spends per scrape (collection on its loop plus encoding on the
    HTTP thread), measured on the idle node against its idle CPU."""
    time.sleep(1)
    c0 = broker_cpu_s(node.pid)
    time.sleep(3)
    c1 = broker_cpu_s(node.pid)
    assert c0 is not None and c1 is not None
    idle_per_s = (c1 - c0) / 3
    t0 = time.monotonic()
    for _ in range(n):
        with urllib.request.urlopen(f"http://127.0.0.1:{node.metrics_port}/metrics",
                                    timeout=10) as resp:
            resp.read()
    elapsed = time.monotonic() - t0
    c2 = broker_cpu_s(node.pid)
    assert c2 is not None
    return max(0.0, (c2 - c1) - idle_per_s * elapsed) / n


def bump_cost_s() -> float:
    """Seconds of the metrics work one single-partition produce request does: the counters
    (server: request count, socket bytes, six phase histograms; replica manager: the
    topic's counters) and the timing coroutine around the handler with its two clock reads
    (timed against running the handler's coroutine bare)."""
    from broker.metrics.stats import TASK_TIMING, NodeStats

    stats = NodeStats()
    server, topics = stats.server, stats.topics
    listener = server.listener("PLAINTEXT")

    def one_request() -> None:
        listener.bytes_in += 1000
        key = 0
        if key == 1:  # a Fetch is named by its sender
            key = -1
        server.requests[(key, 9)] += 1
        st = topics.topic("t")
        st.total_produce += 1
        st.messages_in += 10
        st.bytes_in += 1000
        listener.bytes_out += 60
        server.times(0, 1.0, 1.0001, 1.0003, 1.0004, 1.0005, 0.0)
        time.monotonic()  # the write loop's clock read for the answer taken

    class P:
        started = done = remote_from = 0.0

    async def handler() -> int:
        return 1

    async def timed(p: P) -> int:
        p.started = time.monotonic()
        TASK_TIMING[p] = p  # the server's registration of the task, and its removal
        TASK_TIMING.pop(p, None)
        try:
            return await handler()
        finally:
            p.done = time.monotonic()

    pending = P()

    def run_timed() -> None:
        with contextlib.suppress(StopIteration):
            timed(pending).send(None)

    def run_bare() -> None:
        with contextlib.suppress(StopIteration):
            handler().send(None)

    # CPU time, not wall time: the node's side of the ratio is CPU from /proc, and on a
    # loaded machine wall time also counts the slices other processes took
    n, cpu = 200_000, time.process_time
    counters = min(timeit.repeat(one_request, number=n, repeat=7, timer=cpu)) / n
    wrapper = (min(timeit.repeat(run_timed, number=n, repeat=7, timer=cpu))
               - min(timeit.repeat(run_bare, number=n, repeat=7, timer=cpu))) / n
    return counters + max(0.0, wrapper)


def one_round(node: SkiffNode, args: argparse.Namespace, scrape: bool) -> dict[str, float]:
    topic = f"mbench-{uuid.uuid4().hex[:8]}"
    create_topic(node.bootstrap, topic, args.partitions)
    scraper = Scraper(node.metrics_port, args.scrape_interval) if scrape else None
    try:
        cpu0 = broker_cpu_s(node.pid)
        prod = run_in_process(producer_proc, node.bootstrap, topic, args.partitions,
                              args.messages, args.size, "none",
                              kwargs={"batch_size": args.batch_size})
        cpu1 = broker_cpu_s(node.pid)
    finally:
        if scraper is not None:
            scraper.stop()
    if prod["undelivered"] or prod["errors"]:
        raise RuntimeError(f"produce: {prod}")
    assert cpu0 is not None and cpu1 is not None
    gb = args.messages * args.size / 1e9
    return {"msgs_s": args.messages / prod["elapsed_s"],
            "mb_s": args.messages * args.size / prod["elapsed_s"] / 1e6,
            "cpu_s_per_gb": (cpu1 - cpu0) / gb, "cpu_s": cpu1 - cpu0}


def both_at_once(nodes: dict[str, SkiffNode], args: argparse.Namespace,
                 order: tuple[str, str]) -> dict[str, dict[str, float]]:
    """One round of each node at the same time (a producer each, started in `order`): both
    see the same machine load, which on a shared machine drifts between rounds."""
    got: dict[str, dict[str, float]] = {}
    errors: list[BaseException] = []

    def run(mode: str) -> None:
        try:
            got[mode] = one_round(nodes[mode], args, scrape=mode == "on" and not args.control)
        except BaseException as exc:  # re-raised below, on the bench's thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(mode,)) for mode in order]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return got


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=300_000)
    ap.add_argument("--size", type=int, default=100, help="bytes per record value")
    ap.add_argument("--partitions", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=16384,
                    help="producer batch.size (16384, the Java client's default: many "
                         "requests; librdkafka's own default is 1000000)")
    ap.add_argument("--rounds", type=int, default=5, help="rounds per mode, alternating")
    ap.add_argument("--scrape-interval", type=float, default=15.0,
                    help="seconds between scrapes of the metrics-on node (15: Prometheus' "
                         "default)")
    ap.add_argument("--control", action="store_true",
                    help="A/A run: the 'on' node runs with metrics off too (and is not "
                         "scraped), to measure the bias between the two nodes themselves")
    ap.add_argument("--concurrent", action="store_true",
                    help="produce to both nodes at the same time in each round (pairs see the "
                         "same machine load; use on a shared, busy machine)")
    args = ap.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="skiff-mbench-") as tmp:
        on = SkiffNode(Path(tmp) / "on")
        off = SkiffNode(Path(tmp) / "off")
        off.metrics_port = 0  # `skiff dev --metrics-port 0`: metrics.listeners empty
        if args.control:
            on.metrics_port = 0
        nodes = {"on": on, "off": off}
        try:
            for n in nodes.values():
                n.start()
            for n in nodes.values():
                n.wait_ready()
            results: dict[str, list[dict[str, float]]] = {"on": [], "off": []}
            one_round(on, args, scrape=False)  # warm-up, both
            one_round(off, args, scrape=False)
            cpu_on = 0.0
            for i in range(args.rounds):
                order = ("on", "off") if i % 2 == 0 else ("off", "on")
                if args.concurrent:
                    got = both_at_once(nodes, args, order)
                else:
                    got = {mode: one_round(nodes[mode], args,
                                           scrape=mode == "on" and not args.control)
                           for mode in order}
                for mode in order:
                    r = got[mode]
                    results[mode].append(r)
                    if mode == "on":
                        cpu_on += r["cpu_s"]
                    print(f"round {i + 1} metrics {mode:3}: {r['msgs_s']:9.0f} msg/s "
                          f"{r['mb_s']:7.1f} MB/s  {r['cpu_s_per_gb']:6.1f} CPU-s/GB",
                          flush=True)
            if not args.control:
                requests = produce_requests(on.metrics_port)
                per_scrape = scrape_cost_s(on)
        finally:
            for n in nodes.values():
                n.close()

    med = {m: {k: statistics.median(r[k] for r in rs) for k in ("msgs_s", "mb_s",
                                                                 "cpu_s_per_gb")}
           for m, rs in results.items()}
    print(f"\n{args.rounds} rounds per mode, {args.messages} x {args.size} B, "
          f"{args.partitions} partition(s), acks=all, batch.size {args.batch_size}; "
          f"scrape every {args.scrape_interval} s")
    for m in ("off", "on"):
        print(f"metrics {m:3}: median {med[m]['msgs_s']:9.0f} msg/s  {med[m]['mb_s']:7.1f} MB/s"
              f"  {med[m]['cpu_s_per_gb']:6.1f} CPU-s/GB")
    print(f"on/off: throughput {med['on']['msgs_s'] / med['off']['msgs_s']:.3f}, "
          f"CPU per GB {med['on']['cpu_s_per_gb'] / med['off']['cpu_s_per_gb']:.3f}")
    # rounds paired as run (on and off back to back): drift between pairs cancels out
    pairs = [on_r["cpu_s_per_gb"] / off_r["cpu_s_per_gb"]
             for on_r, off_r in zip(results["on"], results["off"], strict=True)]
    quartiles = statistics.quantiles(pairs, n=4) if len(pairs) >= 2 else [pairs[0]] * 3
    print(f"paired rounds: CPU per GB on/off median {statistics.median(pairs):.3f}, "
          f"on above off in {sum(r > 1 for r in pairs)} of {len(pairs)}; spread "
          f"{min(pairs):.3f}-{max(pairs):.3f}, quartiles {quartiles[0]:.3f}-{quartiles[2]:.3f}"
          + ("  [control: both nodes metrics off]" if args.control else ""))
    print(f"load average at the end: {os.getloadavg()[0]:.1f} (1 min), "
          f"{os.getloadavg()[2]:.1f} (15 min)")
    if args.control:
        print("control: the spread above is this machine's noise floor for one pair; an on/off "
              "median inside it does not resolve the metrics' cost")
    if args.control:
        return 0
    cost = bump_cost_s()
    all_produce_requests = requests  # warm-up included, as is its CPU below
    print(f"counter work per produce request: {cost * 1e6:.2f} us (timeit, CPU time); the on node "
          f"served {all_produce_requests} produce requests in the measured rounds and the "
          f"warm-up")
    print(f"counter work / the on node's produce CPU (measured rounds): "
          f"{cost * all_produce_requests / cpu_on * 100:.2f}% (upper bound: warm-up requests "
          f"counted)")
    busy = med["on"]["cpu_s_per_gb"] * med["on"]["mb_s"] / 1000  # node CPU-s per second
    print(f"one scrape: {per_scrape * 1000:.1f} ms of node CPU (idle node, {args.rounds + 1} "
          f"topics); scraped every 15 s that is {per_scrape / 15 / busy * 100:.2f}% of the "
          f"node's CPU while producing at the median rate, every 1 s "
          f"{per_scrape / busy * 100:.2f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
