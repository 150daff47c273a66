"""One consumer-group member in its own process, for the test_groups_*.py compat modules.

Usage: python group_member.py '<json config>'
Config: client (confluent | kafka-python | aiokafka), bootstrap, group, topic, name,
session_ms, heartbeat_ms, protocol (classic | consumer: librdkafka's group.protocol),
instance_id (group.instance.id or null); for confluent also remote_assignor
(group.remote.assignor), subscribe (a list of topics or
"^regex" patterns instead of [topic]) and topics (the topics a pattern may match, in order:
partition p of the i-th is reported as 1000 * i + p).

Prints one JSON object per line on stdout, each with "t" (wall clock, seconds), "m" (name)
and "ev":
    ready                  the consumer is subscribed
    assigned / revoked / lost  "parts": the partitions the client's own callback was given
    msg                    "p", "o", "v": a record handed to the application
    commit                 "p", "o": a synchronous commit of next offset o succeeded
    commit_failed          "p", "o", "err"
    closing / closed       around the client's close() (the application stops consuming
                           before "closing")
Records whose value starts with "c" are committed (offset + 1) right after they are handled;
others are not. A line "stop" on stdin closes the consumer (a graceful leave) and exits.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from typing import Any

CFG: dict[str, Any] = json.loads(sys.argv[1])
NAME: str = CFG["name"]
TOPIC: str = CFG["topic"]
STOP = threading.Event()
_out = threading.Lock()


def emit(ev: str, **fields: Any) -> None:
    line = json.dumps({"t": time.time(), "m": NAME, "ev": ev, **fields})
    with _out:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def _watch_stdin() -> None:
    for line in sys.stdin:
        if line.strip() == "stop":
            break
    STOP.set()  # "stop", or the harness went away


def run_confluent() -> None:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    conf: dict[str, Any] = {
        "bootstrap.servers": CFG["bootstrap"], "group.id": CFG["group"], "client.id": NAME,
        "enable.auto.commit": False, "auto.offset.reset": "earliest", "log_level": 3,
        "fetch.wait.max.ms": 100, "fetch.queue.backoff.ms": 1,
    }
    if CFG.get("protocol", "classic") == "consumer":
        conf["group.protocol"] = "consumer"
        if CFG.get("remote_assignor"):
            conf["group.remote.assignor"] = CFG["remote_assignor"]
    else:
        conf["session.timeout.ms"] = CFG["session_ms"]
        conf["heartbeat.interval.ms"] = CFG["heartbeat_ms"]
        if CFG.get("strategy"):
            conf["partition.assignment.strategy"] = CFG["strategy"]
    if CFG.get("instance_id"):
        conf["group.instance.id"] = CFG["instance_id"]
    c = Consumer(conf)

    def parts(ps: list[Any]) -> list[int]:
        # with a pattern subscription (several topics), partition p of topic i is 1000*i + p
        topics = CFG.get("topics") or [TOPIC]
        return sorted(topics.index(tp.topic) * 1000 + tp.partition for tp in ps)

    c.subscribe(CFG.get("subscribe") or [TOPIC],
                on_assign=lambda _c, ps: emit("assigned", parts=parts(ps)),
                on_revoke=lambda _c, ps: emit("revoked", parts=parts(ps)),
                on_lost=lambda _c, ps: emit("lost", parts=parts(ps)))
    emit("ready")
    while not STOP.is_set():
        msg = c.poll(0.1)
        if msg is None:
            continue
        if msg.error():
            emit("error", err=str(msg.error()))
            continue
        p, o, v = msg.partition(), msg.offset(), (msg.value() or b"").decode()
        if CFG.get("topics"):
            p += CFG["topics"].index(msg.topic()) * 1000
        emit("msg", p=p, o=o, v=v)
        if v.startswith("c"):
            try:
                c.commit(offsets=[TopicPartition(msg.topic(), msg.partition(), o + 1)],
                         asynchronous=False)
                emit("commit", p=p, o=o + 1)
            except KafkaException as exc:
                emit("commit_failed", p=p, o=o + 1, err=str(exc))
    emit("closing")
    c.close()
    emit("closed")


def run_kafka_python() -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer, TopicPartition
    from kafka.errors import KafkaError
    from kafka.structs import OffsetAndMetadata

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked: Any) -> None:
            emit("revoked", parts=sorted(tp.partition for tp in revoked))

        def on_partitions_assigned(self, assigned: Any) -> None:
            emit("assigned", parts=sorted(tp.partition for tp in assigned))

        def on_partitions_lost(self, lost: Any) -> None:
            emit("lost", parts=sorted(tp.partition for tp in lost))

    c = KafkaConsumer(
        bootstrap_servers=CFG["bootstrap"], group_id=CFG["group"], client_id=NAME,
        group_instance_id=CFG.get("instance_id"), enable_auto_commit=False,
        auto_offset_reset="earliest", session_timeout_ms=CFG["session_ms"],
        heartbeat_interval_ms=CFG["heartbeat_ms"], fetch_max_wait_ms=100,
    )
    c.subscribe([TOPIC], listener=Listener())
    emit("ready")
    while not STOP.is_set():
        batches = c.poll(timeout_ms=100)
        for tp, msgs in batches.items():
            for msg in msgs:
                p, o, v = tp.partition, msg.offset, (msg.value or b"").decode()
                emit("msg", p=p, o=o, v=v)
                if v.startswith("c"):
                    try:
                        c.commit({TopicPartition(TOPIC, p): OffsetAndMetadata(o + 1, "", -1)})
                        emit("commit", p=p, o=o + 1)
                    except KafkaError as exc:
                        emit("commit_failed", p=p, o=o + 1, err=repr(exc))
    emit("closing")
    c.close(autocommit=False)
    emit("closed")


async def run_aiokafka() -> None:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
    from aiokafka.errors import KafkaError

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        def on_partitions_revoked(self, revoked: Any) -> None:
            emit("revoked", parts=sorted(tp.partition for tp in revoked))

        def on_partitions_assigned(self, assigned: Any) -> None:
            emit("assigned", parts=sorted(tp.partition for tp in assigned))

    c = AIOKafkaConsumer(
        bootstrap_servers=CFG["bootstrap"], group_id=CFG["group"], client_id=NAME,
        group_instance_id=CFG.get("instance_id"), enable_auto_commit=False,
        auto_offset_reset="earliest", session_timeout_ms=CFG["session_ms"],
        heartbeat_interval_ms=CFG["heartbeat_ms"], fetch_max_wait_ms=100,
    )
    c.subscribe([TOPIC], listener=Listener())
    await c.start()
    emit("ready")
    try:
        while not STOP.is_set():
            batches = await c.getmany(timeout_ms=100)
            for tp, msgs in batches.items():
                for msg in msgs:
                    p, o, v = tp.partition, msg.offset, (msg.value or b"").decode()
                    emit("msg", p=p, o=o, v=v)
                    if v.startswith("c"):
                        try:
                            await c.commit({TopicPartition(TOPIC, p): o + 1})
                            emit("commit", p=p, o=o + 1)
                        except KafkaError as exc:
                            emit("commit_failed", p=p, o=o + 1, err=repr(exc))
    finally:
        emit("closing")
        await c.stop()
        emit("closed")


def main() -> None:
    threading.Thread(target=_watch_stdin, daemon=True).start()
    client = CFG["client"]
    if client == "confluent":
        run_confluent()
    elif client == "kafka-python":
        run_kafka_python()
    elif client == "aiokafka":
        asyncio.run(run_aiokafka())
    else:
        raise SystemExit(f"unknown client {client!r}")


if __name__ == "__main__":
    main()
