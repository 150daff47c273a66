"""Broker CPU per idle fetch round over many partitions, with and without incremental fetch
sessions (KIP-227).

One `skiff dev` process (a combined node on loopback, uvloop) holds a topic of --partitions
partitions with one record each. A consumer-shaped client (Fetch v16, replica_id -1) sends
rounds in which nothing is new (fetch offsets at the log ends):

- sessionless: every round a full Fetch naming every partition (session epoch -1), answered
  with every partition;
- session: one full Fetch with epoch 0 opens a session, then every round an incremental
  Fetch naming no partition, answered with none (the broker still reads every partition of
  the session to find what changed).

The broker's CPU (utime + stime of its process, /proc) is read around each run, and its idle
CPU rate, measured over a quiet stretch in the same run, is subtracted for the run's wall
time (heartbeats, the metadata quorum, the metrics thread). The client's own CPU is not
counted. It prints the CPU per round of both, and the ratio.

    python bench/fetch_session_bench.py --partitions 2000 --rounds 300
    python bench/fetch_session_bench.py --partitions 2000 --rounds 300 --max-wait-ms 100
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from broker.protocol.fetch_codec import (  # noqa: E402
    PartitionFetch,
    TopicFetch,
    encode_fetch_request_body,
)
from broker.protocol.transport import KafkaConnection  # noqa: E402
from broker.testing.node import SkiffNode  # noqa: E402

FETCH = 1
VERSION = 16
TOPIC = "fetch-session-bench"
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def prepare(bootstrap: str, partitions: int) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(TOPIC, partitions, 1)]).values():
        f.result(60)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # every partition led before producing
        md = admin.list_topics(TOPIC, timeout=30).topics[TOPIC]
        if len(md.partitions) == partitions and all(p.leader >= 0
                                                    for p in md.partitions.values()):
            break
        time.sleep(1)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "log_level": 3})
    for i in range(partitions):
        producer.produce(TOPIC, b"v", partition=i)
    assert producer.flush(180) == 0, "records not acknowledged"


def request(topic_id: Any, partitions: int, *, session_id: int, epoch: int, max_wait_ms: int,
            named: bool) -> bytes:
    parts = [PartitionFetch(i, -1, 1, -1, -1, 1 << 20) for i in range(partitions)] \
        if named else []
    topics = [TopicFetch(TOPIC, topic_id, parts)] if parts else []
    return encode_fetch_request_body(
        VERSION, replica_id=-1, replica_epoch=-1, max_wait_ms=max_wait_ms, min_bytes=1,
        max_bytes=50 << 20, topics=topics, session_id=session_id, session_epoch=epoch)


async def topic_id_of(conn: KafkaConnection) -> Any:
    import importlib

    m = importlib.import_module("kio.schema.metadata.v12.request")
    reply = await conn.request(3, 12, m.MetadataRequest(
        topics=(m.MetadataRequestTopic(name=TOPIC, topic_id=None),),
        allow_auto_topic_creation=False, include_topic_authorized_operations=False), 30)
    return reply.topics[0].topic_id


async def run_mode(conn: KafkaConnection, pid: int, topic_id: Any, args: argparse.Namespace,
                   sessions: bool) -> tuple[float, float, int]:
    """(broker CPU seconds, wall seconds, partitions answered per round) over args.rounds."""
    n, wait = args.partitions, args.max_wait_ms
    full = request(topic_id, n, session_id=0, epoch=0 if sessions else -1,
                   max_wait_ms=wait, named=True)
    reply = await conn.request(FETCH, VERSION, full, 60)
    assert sum(len(t.partitions) for t in reply.responses) == n
    session_id, epoch = int(reply.session_id), 1
    if sessions:
        assert session_id != 0, "the broker opened no session"

    def next_request() -> bytes:
        nonlocal epoch
        if not sessions:
            return full
        body = request(topic_id, n, session_id=session_id, epoch=epoch, max_wait_ms=wait,
                       named=False)
        epoch += 1
        return body

    for _ in range(args.warmup):
        await conn.request(FETCH, VERSION, next_request(), 60)
    answered = 0
    cpu0, wall0 = cpu_s(pid), time.monotonic()
    for _ in range(args.rounds):
        reply = await conn.request(FETCH, VERSION, next_request(), 60)
        assert reply.error_code == 0, reply.error_code
        answered = sum(len(t.partitions) for t in reply.responses)
    return cpu_s(pid) - cpu0, time.monotonic() - wall0, answered


async def bench(node: SkiffNode, args: argparse.Namespace) -> None:
    conn = KafkaConnection("127.0.0.1", node.port, client_id="fetch-session-bench")
    try:
        topic_id = await topic_id_of(conn)
        await asyncio.sleep(2)
        idle0, t0 = cpu_s(node.pid), time.monotonic()
        await asyncio.sleep(args.idle_s)
        idle_rate = (cpu_s(node.pid) - idle0) / (time.monotonic() - t0)
        results = {}
        for sessions in (False, True):
            cpu, wall, answered = await run_mode(conn, node.pid, topic_id, args, sessions)
            net = max(cpu - idle_rate * wall, 0.0)
            results[sessions] = net / args.rounds
            name = "session" if sessions else "sessionless"
            print(f"{name:12s} rounds={args.rounds} wall={wall:.2f}s broker_cpu={cpu:.2f}s "
                  f"(idle share {idle_rate * wall:.2f}s) -> {1000 * net / args.rounds:.2f} ms "
                  f"CPU/round, {wall / args.rounds * 1000:.2f} ms wall/round, "
                  f"{answered} partitions answered per round")
        print(f"broker idle CPU rate {idle_rate * 100:.1f}% of a core")
        print(f"ratio sessionless/session: {results[False] / max(results[True], 1e-9):.1f}x")
    finally:
        await conn.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--max-wait-ms", type=int, default=0,
                    help="Fetch max_wait_ms (0: answered at once; >0 adds the long poll)")
    ap.add_argument("--idle-s", type=float, default=5.0)
    args = ap.parse_args()
    print(f"load average before: {os.getloadavg()}, cpus {os.cpu_count()}")
    with tempfile.TemporaryDirectory() as tmp:
        node = SkiffNode(Path(tmp) / "skiff")
        node.start()
        try:
            node.wait_ready()
            prepare(node.bootstrap, args.partitions)
            asyncio.run(bench(node, args))
        finally:
            node.close()
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
