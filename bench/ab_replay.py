"""Skiff against Skiff: one `skiff dev` node from each of two checkouts, replayed produce
alternating between them in one run, the ratio B / A of requests/s and of broker CPU per
request. For "measure before and after": A is the code before a change, B after it.

Each case is PARTITIONSxRECORDSxSIZExINFLIGHT: one Produce request carries a batch of
RECORDS records of SIZE bytes for each of PARTITIONS partitions (of a 6-partition topic),
with INFLIGHT requests in flight on each of `--connections` connections (bench/replay.py,
acks=all; `--idempotent`: as Kafka's Java producer sends them, a producer id per
connection and consecutive sequences). Round 0 is a warm-up, not counted; the order
alternates between rounds; each case gets a fresh topic, deleted after it.

    PYTHONPATH=. python bench/ab_replay.py --a /path/to/checkout-before --b .
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

from bench import replay, vs_kafka
from bench.perf import broker_cpu_s

DEFAULT_CASES = "1x1x100x5,6x1x100x5,6x16x1000x5,1x1x100x1"


def start_node(repo: Path, data: Path, base_port: int) -> tuple[subprocess.Popen[bytes], str]:
    env = dict(os.environ, PYTHONPATH=str(repo), **vs_kafka.skiff_env())
    log = open(f"{data}.log", "wb")  # noqa: SIM115 - the process writes it until it ends
    proc = subprocess.Popen(
        [sys.executable, "-m", "broker.cli.main", "dev", "--data", str(data),
         "--port", str(base_port), "--controller-port", str(base_port + 1),
         "--admin-port", str(base_port + 2), "--metrics-port", str(base_port + 3)],
        cwd=repo, env=env, stdout=log, stderr=subprocess.STDOUT)
    return proc, f"127.0.0.1:{base_port}"


def running(proc: subprocess.Popen[bytes]) -> bool:
    return proc.poll() is None


def parse_case(text: str) -> tuple[int, int, int, int]:
    parts, records, size, inflight = (int(x) for x in text.split("x"))
    return parts, records, size, inflight


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", type=Path, required=True, help="checkout before")
    ap.add_argument("--b", type=Path, default=Path("."), help="checkout after")
    ap.add_argument("--cases", default=DEFAULT_CASES)
    ap.add_argument("--rounds", type=int, default=6, help="counted rounds per case")
    ap.add_argument("--seconds", type=float, default=4.0, help="per case and round")
    ap.add_argument("--connections", type=int, default=4)
    ap.add_argument("--ports", type=int, default=19500, help="A's first port; B's is +100")
    ap.add_argument("--idempotent", action="store_true",
                    help="batches with a producer id per connection and sequences (replay.py)")
    args = ap.parse_args(argv)
    cases = [parse_case(c) for c in args.cases.split(",")]
    work = Path(tempfile.mkdtemp(prefix="skiff-ab-"))
    nodes = {"A": start_node(args.a.resolve(), work / "a", args.ports),
             "B": start_node(args.b.resolve(), work / "b", args.ports + 100)}
    print(f"A: {args.a.resolve()}  B: {args.b.resolve()}  load {vs_kafka.load()}", flush=True)
    try:
        for proc, bootstrap in nodes.values():
            vs_kafka.wait_serving(bootstrap, functools.partial(running, proc))
        runs: dict[tuple[tuple[int, int, int, int], str], list[tuple[float, float]]] = {}
        for rnd in range(args.rounds + 1):
            for case in cases:
                parts, records, size, inflight = case
                for name in ("A", "B") if rnd % 2 == 0 else ("B", "A"):
                    proc, bootstrap = nodes[name]
                    topic = f"ab-{uuid.uuid4().hex[:8]}"
                    vs_kafka.create_topic(bootstrap, topic, 6)
                    replay.wait_writable(bootstrap, topic, range(6))
                    cpu0 = broker_cpu_s(proc.pid) or 0.0
                    r = replay.replay_produce(
                        bootstrap, topic, list(range(parts)), connections=args.connections,
                        inflight=inflight, records_per_batch=records, size=size, acks=-1,
                        seconds=args.seconds, idempotent=args.idempotent)
                    cpu1 = broker_cpu_s(proc.pid) or 0.0
                    vs_kafka.delete_topic(bootstrap, topic)
                    if r.errors:
                        print(f"{name} {case}: {r.errors[:3]}", flush=True)
                    if rnd and r.requests:
                        runs.setdefault((case, name), []).append(
                            (r.requests / r.wall_s, (cpu1 - cpu0) / r.requests * 1e6))
        print(f"{'case (parts x records x size x inflight)':42} {'A req/s':>9} {'B req/s':>9} "
              f"{'B/A':>6} {'A us/req':>9} {'B us/req':>9} {'B/A':>6}")
        for case in cases:
            a, b = runs[(case, "A")], runs[(case, "B")]
            ra, rb = (statistics.median(x[0] for x in v) for v in (a, b))
            ca, cb = (statistics.median(x[1] for x in v) for v in (a, b))
            label = "x".join(map(str, case))
            print(f"{label:42} {ra:9.0f} {rb:9.0f} {rb / ra:6.3f} {ca:9.1f} {cb:9.1f} "
                  f"{cb / ca:6.3f}   rounds A {[round(x[0]) for x in a]} "
                  f"B {[round(x[0]) for x in b]}", flush=True)
        print(f"load at the end {vs_kafka.load()}")
    finally:
        for proc, _ in nodes.values():
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
        for proc, _ in nodes.values():
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
