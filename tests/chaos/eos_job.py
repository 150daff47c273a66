"""The consume-transform-produce job of tests/chaos/test_eos.py, as a process of its own.

    python tests/chaos/eos_job.py BOOTSTRAP STATUS_FILE

It copies the input topic to the output topic exactly once (a read_committed consumer in a
group and a transactional producer; each batch read is written with the consumer's positions
in the same transaction, then committed), and writes its counts to STATUS_FILE (JSON) at
every step, with `done` true once every input record's offset is committed.

Why a process and not a thread of the test: some librdkafka calls block while holding
Python's GIL. One CI run (2026-12-06) had `Consumer.assignment()` wait forever for an answer
from librdkafka's main thread that never came (confluent-kafka calls rd_kafka_assignment
without releasing the GIL); every other thread of the pytest process, pytest-timeout's too,
then waited for the GIL, and the run hung until it was killed. Here such a hang stops only
this process: the test sees no step for a while, has faulthandler print where it is
(SIGUSR1), kills it and starts another, whose producer fences this one's and whose consumer
resumes from the committed offsets, as a restarted application would.
"""

from __future__ import annotations

import faulthandler
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

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

    def __init__(self, bootstrap: str, status: Path) -> None:
        self.bootstrap = bootstrap
        self.status = status
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

    def write_status(self) -> None:
        """What the supervising test reads: the counts, and when the job last moved."""
        status = {"pid": os.getpid(), "done": self.done.is_set(), "commits": self.commits,
                  "aborts": self.aborts, "restarts": self.restarts, "hangs": self.hangs,
                  "errors": self.errors[-20:], "idle_state": repr(self.idle_state),
                  "at": time.time()}
        tmp = self.status.with_suffix(".tmp")
        tmp.write_text(json.dumps(status))
        tmp.replace(self.status)

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
                        self.write_status()
                        continue
                    self._transaction(p, c, msgs)
                    self.commits += 1
                    self.write_status()
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
                    self.write_status()
                    time.sleep(0.2)
        finally:
            if c is not None:
                c.close()


def main(argv: list[str]) -> None:
    bootstrap, status = argv[1], Path(argv[2])
    stack_file = status.with_suffix(".stack").open("w")
    # Works while a thread holds the GIL: faulthandler dumps from its C signal handler.
    faulthandler.register(signal.SIGUSR1, file=stack_file, all_threads=True)
    job = EosJob(bootstrap, status)
    signal.signal(signal.SIGTERM, lambda *_: job.stop.set())
    job.write_status()
    job.run()
    job.write_status()
    sys.stdout.flush()
    # Destroying a producer a librdkafka bug left stuck (see `bounded`) may never return.
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv)
