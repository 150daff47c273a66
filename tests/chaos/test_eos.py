"""Exactly-once consume-transform-produce under faults (issue 22).

Three combined nodes; an input topic and an output topic (3 partitions, RF=3,
min.insync.replicas=2). One EOS job (tests/chaos/eos_job.py, a process of its own:
librdkafka, a read_committed consumer in a group and a transactional producer; each batch
read is written to the output with the consumer's positions sent in the same transaction,
then committed) copies the input while a fault thread kills with -9 and pauses, in turn, the
broker coordinating the job's transactional id, a partition leader of the output topic and
the active controller, restarting or resuming each. The job does what librdkafka asks: an
abortable error aborts the transaction and rewinds the consumer to its committed offsets; a
fatal one starts a new producer (which fences the old one). A producer call that does not
return by its own timeout is a known librdkafka hang (eos_job.py `bounded`): the job leaves
that producer to its blocked thread and goes on as after a fatal error; a job process stuck
in a call that holds the GIL is killed and started again (eos_job.py, top). At the end a
read_committed reader of the output finds every input record exactly once, and nothing else.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import NewTopic
from kio.schema.errors import ErrorCode

from broker.protocol.transport import KafkaConnection
from broker.testing.cluster import Cluster

pytestmark = [
    pytest.mark.timeout(600), pytest.mark.slow,
]
JOB = Path(__file__).with_name("eos_job.py")
# The constants the job runs with (eos_job.py, which the test does not import: it is run).
PARTITIONS = 3
RECORDS = 6000
SRC, DST = "eos-in", "eos-out"
TID = "eos-job"
RUN_LIMIT_S = 300.0
# A live job writes its status at least every ~35 s (its longest bounded call is 30 s).
STALL_S = 60.0
MAX_EXITS = 5  # job processes that may end before they are done


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


class JobProcesses:
    """Runs tests/chaos/eos_job.py until it reports done, one process at a time. A process
    that writes no status for STALL_S is stuck (see eos_job.py): its threads' stacks are
    kept, it is killed and another is started; one that exits before it is done is replaced
    too. A thread of the test watches, so it goes on during the faults."""

    def __init__(self, bootstrap: str, work: Path) -> None:
        self.bootstrap, self.work = bootstrap, work
        work.mkdir(parents=True, exist_ok=True)
        self.done = threading.Event()
        self.stalls: list[str] = []  # stacks of the processes killed as stuck
        self.exits: list[str] = []  # processes that ended before they were done
        self.statuses: list[dict[str, Any]] = []  # each process's last status
        self._proc: subprocess.Popen[bytes] | None = None
        self._stop = threading.Event()
        self._watcher = threading.Thread(target=self._watch, name="eos-watch", daemon=True)

    def start(self) -> None:
        self._spawn()
        self._watcher.start()

    def _status_path(self, n: int) -> Path:
        return self.work / f"job-{n}.json"

    def _spawn(self) -> None:
        n = len(self.statuses)
        self.statuses.append({})
        out = (self.work / f"job-{n}.log").open("wb")
        self._proc = subprocess.Popen(
            [sys.executable, str(JOB), self.bootstrap, str(self._status_path(n))],
            stdout=out, stderr=subprocess.STDOUT)
        out.close()

    @property
    def _current(self) -> int:
        """The index of the running job process (its status, log and stack files)."""
        return len(self.statuses) - 1

    def _read(self) -> dict[str, Any]:
        n = self._current
        try:
            status: dict[str, Any] = json.loads(self._status_path(n).read_text())
        except (OSError, ValueError):
            return self.statuses[n]
        self.statuses[n] = status
        return status

    def _watch(self) -> None:
        last_at, moved = 0.0, time.monotonic()
        while not self._stop.is_set():
            proc = self._proc
            assert proc is not None
            status = self._read()
            if status.get("done"):
                self.done.set()
                return
            if status.get("at", 0.0) != last_at:
                last_at, moved = status.get("at", 0.0), time.monotonic()
            if proc.poll() is not None:
                self.exits.append(f"pid {proc.pid} exited {proc.returncode}: "
                                  f"{self._tail(self._current)}")
                if len(self.exits) >= MAX_EXITS:
                    return  # a job that cannot start: the test fails with the exits
                self._spawn()
                last_at, moved = 0.0, time.monotonic()
            elif time.monotonic() - moved > STALL_S:
                n = self._current
                proc.send_signal(signal.SIGUSR1)
                time.sleep(1.0)
                stack = self._status_path(n).with_suffix(".stack")
                self.stalls.append(f"pid {proc.pid}, no step for {STALL_S:.0f} s:\n"
                                   + (stack.read_text() if stack.exists() else "(no stack)"))
                proc.kill()
                proc.wait(10)
                self._spawn()
                last_at, moved = 0.0, time.monotonic()
            time.sleep(0.2)

    def _tail(self, n: int) -> str:
        log = self.work / f"job-{n}.log"
        return log.read_text(errors="replace")[-2000:] if log.exists() else ""

    def stop(self) -> None:
        self._stop.set()
        self._watcher.join(10)
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)

    def summary(self) -> str:
        total = {k: sum(int(s.get(k, 0)) for s in self.statuses)
                 for k in ("commits", "aborts", "restarts")}
        hangs = [h for s in self.statuses for h in s.get("hangs", [])]
        errors = [e for s in self.statuses for e in s.get("errors", [])]
        last = self.statuses[-1] if self.statuses else {}
        return (f"processes {len(self.statuses)}, {total}, hangs {hangs}, last errors "
                f"{errors[-10:]}, idle state {last.get('idle_state')}, exits {self.exits}, "
                f"stalls {self.stalls}")


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

        jobs = JobProcesses(c.bootstrap_servers, tmp_path / "job")
        jobs.start()
        faults: list[str] = []
        try:
            time.sleep(2.0)
            for round_ in range(3):
                if jobs.done.is_set():
                    break
                coord = coordinator_of(c, TID)
                if coord > 0:
                    faults.append(f"kill coordinator {coord}")
                    c.kill(coord)
                    time.sleep(3.0)
                    c.restart(coord, wait=True)
                leaders = c.partition_leaders(DST)
                leader = leaders.get(round_ % PARTITIONS, -1)
                if leader > 0 and not jobs.done.is_set():
                    faults.append(f"pause leader {leader}")
                    c.pause(leader)
                    time.sleep(4.0)
                    c.resume(leader)
                controller = c.active_controller()
                if controller > 0 and not jobs.done.is_set():
                    faults.append(f"kill controller {controller}")
                    c.kill(controller)
                    time.sleep(2.0)
                    c.restart(controller, wait=True)
                time.sleep(1.0)
            jobs.done.wait(RUN_LIMIT_S)
        finally:
            jobs.stop()
        assert jobs.done.is_set(), f"the job did not finish: faults {faults}, {jobs.summary()}"
        print(f"eos job: faults {faults}, {jobs.summary()}")
        got = read_output(c.live_bootstrap())
        expected = [b"rec-%05d" % i for i in range(RECORDS)]
        missing = set(expected) - set(got)
        dupes = len(got) - len(set(got))
        assert not missing and dupes == 0 and set(got) == set(expected), (
            f"missing {len(missing)}, duplicated {dupes}, faults {faults}, {jobs.summary()}")
