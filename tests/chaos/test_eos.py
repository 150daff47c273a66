"""Exactly-once consume-transform-produce under faults (issue 22).

Three combined nodes; an input topic and an output topic (3 partitions, RF=3,
min.insync.replicas=2). One EOS job (librdkafka: a read_committed consumer in a group and a
transactional producer; each batch read is written to the output with the consumer's
positions sent in the same transaction, then committed) copies the input while a fault
thread kills with -9 and pauses, in turn, the broker coordinating the job's transactional
id, a partition leader of the output topic and the active controller, restarting or
resuming each. The job does what librdkafka asks: an abortable error aborts the
transaction and rewinds the consumer to its committed offsets; a fatal one starts a new
producer (which fences the old one). A producer call that does not return by its own
timeout is a known librdkafka hang (see `bounded`): the job leaves that producer to its
blocked thread and goes on as after a fatal error. At the end a read_committed reader of
the output finds every input record exactly once, and nothing else.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
import traceback
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import pytest
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import NewTopic
from kio.schema.errors import ErrorCode

from broker.protocol.transport import KafkaConnection
from broker.testing.cluster import Cluster

pytestmark = [
    pytest.mark.timeout(600), pytest.mark.slow,
]
PARTITIONS = 3
RECORDS = 6000
BATCH = 20  # records per transaction: the job lasts through the faults
PACE_S = 0.05
SRC, DST = "eos-in", "eos-out"
TID = "eos-job"
GROUP = "eos-job-group"
TXN_TIMEOUT_S = 30.0
RUN_LIMIT_S = 300.0
API_TIMEOUT_S = 10.0  # each transactional call's own timeout
HANG_GRACE_S = 5.0  # how long past its own timeout a librdkafka call may take (see bounded)
T = TypeVar("T")


def coordinator_of(c: Cluster, tid: str) -> int:
    from kio.schema.find_coordinator.v4 import request as fc

    async def ask(port: int) -> Any:
        conn = KafkaConnection("127.0.0.1", port, "eos-chaos")
        try:
            return await conn.request(10, 4, fc.FindCoordinatorRequest(
                key_type=1, coordinator_keys=(tid,)), 5.0)
        finally:
            await conn.close()

    for i in c.broker_ids:
        node = c.nodes[i]
        if node.running and node.client_port is not None:
            try:
                [co] = asyncio.run(ask(node.client_port)).coordinators
            except Exception:
                continue
            if co.error_code is ErrorCode.none:
                return int(co.node_id)
    return -1


class ClientHang(Exception):
    """A librdkafka call still running HANG_GRACE_S after its own timeout."""


def bounded(call: Callable[[], T], timeout_s: float, what: str) -> T:
    """`call()`, a librdkafka call given `timeout_s`, on a thread of its own; ClientHang
    when it has not returned HANG_GRACE_S after that timeout.

    librdkafka (2.16) can block in send_offsets_to_transaction() past its timeout, for good:
    the TxnOffsetCommit waits for the group coordinator's broker handle to change state,
    and the client decommissioned that handle when a Metadata answer left the broker out
    (a fenced broker is left out, by Kafka and Skiff alike: here, the killed or paused
    coordinator's broker); its thread is gone, so no change comes, and the request's own
    timeout is never checked (confluentinc/librdkafka#5456, #5511). The producer is then
    stuck, not failed. The thread is left behind with it; the job goes on with a new one."""
    out: list[Any] = []
    done = threading.Event()

    def target() -> None:
        try:
            out.append(("ok", call()))
        except BaseException as exc:  # handed to the caller
            out.append(("error", exc))
        finally:
            done.set()

    threading.Thread(target=target, name=f"eos-{what}", daemon=True).start()
    if not done.wait(timeout_s + HANG_GRACE_S):
        raise ClientHang(f"{what} still blocked {timeout_s + HANG_GRACE_S:.0f} s "
                         f"after it was called with a {timeout_s:.0f} s timeout")
    kind, value = out[0]
    if kind == "error":
        raise value
    return value  # type: ignore[no-any-return]


class EosJob:
    """The consume-transform-produce loop, in a thread."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.errors: list[str] = []
        self.hangs: list[str] = []
        # every producer made, kept until drop_producers: none is destroyed on this thread
        self.producers: list[Producer] = []
        self.commits = 0
        self.aborts = 0
        self.restarts = 0
        self.done = threading.Event()
        self.idle_state: Any = None  # what the consumer saw when it last had nothing
        self.stop = threading.Event()

    def _producer(self) -> Producer:
        p = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": TID,
                      "transaction.timeout.ms": int(TXN_TIMEOUT_S * 1000), "linger.ms": 5,
                      "log_level": 0})
        self.producers.append(p)
        bounded(partial(p.init_transactions, API_TIMEOUT_S * 2), API_TIMEOUT_S * 2,
                "init_transactions")
        return p

    def _consumer(self) -> Consumer:
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": GROUP,
                      "isolation.level": "read_committed", "enable.auto.commit": False,
                      "auto.offset.reset": "earliest", "session.timeout.ms": 10000,
                      "fetch.queue.backoff.ms": 1, "log_level": 0})
        c.subscribe([SRC])
        return c

    @staticmethod
    def _rewind(c: Consumer) -> None:
        assignment = c.assignment()
        if not assignment:
            return
        for tp in c.committed(assignment, 30):
            c.seek(TopicPartition(tp.topic, tp.partition,
                                  tp.offset if tp.offset >= 0 else 0))

    def _finished(self, c: Consumer) -> bool:
        assignment = c.assignment()
        if len(assignment) != PARTITIONS:
            self.idle_state = ("assignment", [(tp.topic, tp.partition) for tp in assignment])
            return False
        committed = c.committed(assignment, 10)
        if all(tp.offset == RECORDS // PARTITIONS for tp in committed):
            return True
        positions = c.position(assignment)
        marks = [c.get_watermark_offsets(tp, timeout=5, cached=False) for tp in assignment]
        self.idle_state = (
            "committed", [(tp.partition, tp.offset, str(tp.error)) for tp in committed],
            "positions", [(tp.partition, tp.offset) for tp in positions],
            "watermarks(LSO)", marks)
        return False

    def _transaction(self, p: Producer, c: Consumer, msgs: list[Message]) -> None:
        """One input batch to the output, with the consumer's positions, committed."""
        p.begin_transaction()
        for m in msgs:
            p.produce(DST, key=m.key(), value=m.value(), partition=m.partition())
        positions = c.position(c.assignment())
        metadata = c.consumer_group_metadata()
        bounded(partial(p.send_offsets_to_transaction, positions, metadata, API_TIMEOUT_S),
                API_TIMEOUT_S, "send_offsets_to_transaction")
        bounded(partial(p.commit_transaction, API_TIMEOUT_S), API_TIMEOUT_S,
                "commit_transaction")

    def run(self) -> None:
        deadline = time.monotonic() + RUN_LIMIT_S
        p: Producer | None = None
        c: Consumer | None = None
        rewind = False  # back to the committed offsets before the next batch
        try:
            while not self.stop.is_set() and time.monotonic() < deadline:
                try:
                    if p is None:
                        # fences the previous producer: its transaction is aborted first
                        p = self._producer()
                    if c is None:
                        c = self._consumer()  # starts from the committed offsets
                        rewind = False
                    if rewind:
                        try:
                            self._rewind(c)
                        except KafkaException:
                            c.close()
                            c = None
                            continue
                        rewind = False
                    msgs = [m for m in c.consume(num_messages=BATCH, timeout=0.5)
                            if m.error() is None]
                    if not msgs:
                        if self._finished(c):
                            self.done.set()
                            return
                        continue
                    self._transaction(p, c, msgs)
                    self.commits += 1
                    time.sleep(PACE_S)
                except (KafkaException, ClientHang) as exc:
                    err = exc.args[0]
                    keep = False
                    if isinstance(exc, ClientHang):
                        self.hangs.append(str(err))
                    else:
                        self.errors.append(str(err))
                    if p is not None and isinstance(err, KafkaError) and err.txn_requires_abort():
                        try:
                            bounded(partial(p.abort_transaction, API_TIMEOUT_S),
                                    API_TIMEOUT_S, "abort_transaction")
                            self.aborts += 1
                            keep = True
                        except (KafkaException, ClientHang):
                            pass
                    if p is not None and not keep:
                        # fatal, unknown or stuck: the next producer fences this one
                        p = None
                        self.restarts += 1
                    rewind = True
                    time.sleep(0.2)
        finally:
            if c is not None:
                c.close()


def drop_producers(job: EosJob) -> None:
    """Destroy the job's producers on a thread of their own: destroying a librdkafka handle
    waits for its broker threads, and one it decommissioned may never end (the librdkafka
    bugs in `bounded`). One stuck in a call stays with that call's thread."""
    threading.Thread(target=job.producers.clear, name="eos-drop", daemon=True).start()


def job_stack(worker: threading.Thread) -> str:
    """Where the job's thread is now (a call that does not return shows here)."""
    frame = sys._current_frames().get(worker.ident or 0)
    return "".join(traceback.format_stack(frame)) if frame is not None else "(not running)"


def read_output(bootstrap: str) -> list[bytes]:
    cons = Consumer({"bootstrap.servers": bootstrap, "group.id": "eos-checker",
                     "isolation.level": "read_committed", "enable.auto.commit": False,
                     "enable.partition.eof": True, "log_level": 0})
    out: list[bytes] = []
    try:
        cons.assign([TopicPartition(DST, p, 0) for p in range(PARTITIONS)])
        eof: set[int] = set()
        deadline = time.monotonic() + 60
        while len(eof) < PARTITIONS and time.monotonic() < deadline:
            for m in cons.consume(num_messages=1000, timeout=0.5):
                if m.error() is not None:
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        eof.add(m.partition())
                    continue
                eof.discard(m.partition())
                out.append(m.value())
    finally:
        cons.close()
    return out


def test_eos_job_under_kills_and_pauses(tmp_path: Path) -> None:
    with Cluster(tmp_path, controllers=3, combined=True) as c:
        admin = c.admin(c.broker_ids[0])
        for name in (SRC, DST):
            admin.create_topics([NewTopic(name, PARTITIONS, 3,
                                          config={"min.insync.replicas": "2"})],
                                operation_timeout=20)[name].result(30)
        feed = Producer({"bootstrap.servers": c.bootstrap_servers, "acks": "all",
                         "enable.idempotence": True, "log_level": 0})
        for i in range(RECORDS):
            feed.produce(SRC, value=b"rec-%05d" % i, partition=i % PARTITIONS)
        assert feed.flush(60) == 0

        job = EosJob(c.bootstrap_servers)
        worker = threading.Thread(target=job.run, name="eos-job", daemon=True)
        worker.start()
        faults: list[str] = []
        try:
            time.sleep(2.0)
            for round_ in range(3):
                if job.done.is_set():
                    break
                coord = coordinator_of(c, TID)
                if coord > 0:
                    faults.append(f"kill coordinator {coord}")
                    c.kill(coord)
                    time.sleep(3.0)
                    c.restart(coord, wait=True)
                leaders = c.partition_leaders(DST)
                leader = leaders.get(round_ % PARTITIONS, -1)
                if leader > 0 and not job.done.is_set():
                    faults.append(f"pause leader {leader}")
                    c.pause(leader)
                    time.sleep(4.0)
                    c.resume(leader)
                controller = c.active_controller()
                if controller > 0 and not job.done.is_set():
                    faults.append(f"kill controller {controller}")
                    c.kill(controller)
                    time.sleep(2.0)
                    c.restart(controller, wait=True)
                time.sleep(1.0)
            worker.join(RUN_LIMIT_S)
        finally:
            where = job_stack(worker) if not job.done.is_set() else ""
            job.stop.set()
            worker.join(30)
            drop_producers(job)
        assert job.done.is_set(), (
            f"the job did not finish: faults {faults}, commits {job.commits}, aborts "
            f"{job.aborts}, restarts {job.restarts}, hangs {job.hangs}, last errors "
            f"{job.errors[-10:]}, idle state {job.idle_state}; the job thread was at:\n{where}")
        print(f"eos job: faults {faults}, commits {job.commits}, aborts {job.aborts}, "
              f"restarts {job.restarts}, hangs {job.hangs}, errors {job.errors}")
        got = read_output(c.live_bootstrap())
        expected = [b"rec-%05d" % i for i in range(RECORDS)]
        missing = set(expected) - set(got)
        dupes = len(got) - len(set(got))
        assert not missing and dupes == 0 and set(got) == set(expected), (
            f"missing {len(missing)}, duplicated {dupes}, faults {faults}, commits "
            f"{job.commits}, aborts {job.aborts}, restarts {job.restarts}, hangs {job.hangs}")
