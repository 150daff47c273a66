"""Shared scenarios for the test_groups_*.py modules: consumer groups driven by real clients.

Each member runs in its own process (tests/compat/group_member.py for the Python clients,
tests/compat/js/group_member.js for kafkajs) and prints JSON lines of what its client's own
callbacks reported (see group_member.py). `GroupRun` starts members, stops them gracefully
(a line "stop" on stdin), kills them with SIGKILL by PID, and keeps one time-ordered event
log. `check_exclusive` replays that log: no partition is ever owned by two members at once,
eager clients revoke everything before the next assignment, and no record is handed to a
member outside the partitions it owns.

Scenarios (each test_groups_<client>.py runs them against one node of its own, started with
a 500 ms first-join delay and 6 s / 500 ms KIP-848 session / heartbeat):
    run_membership                   3 join, 1 leaves, 1 joins, 1 killed -9 (moves after the
                                     session), admin view (Describe/List/DeleteGroups)
    run_restart                      resume exactly at committed offsets after SIGTERM and
                                     kill -9 restarts of the node
    run_static                       every static member in turn returns without a rebalance
    run_membership_survives_restart  members keep running through a kill -9 / SIGTERM restart
                                     and keep their partitions, generation or member epoch
    run_regex_subscription, run_static_killed_kip848   KIP-848 only

Every wait is bounded; failures print the tail of the event log.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any
from unittest import mock

from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from broker.testing import admin as adm
from tests.support.node import REPO_ROOT, SkiffNode, ready

PARTITIONS = 6
SESSION_MS = 6000
HEARTBEAT_MS = 500
JOIN_TIMEOUT_S = 40.0
# what a Skiff node under these tests runs with: a short first-join delay and KIP-848
# session/heartbeat settings as small as the classic members' (Kafka's defaults are 45 s / 5 s)
NODE_ENV = {
    "SKIFF_GROUP_INITIAL_REBALANCE_DELAY_MS": "500",
    "SKIFF_GROUP_CONSUMER_SESSION_TIMEOUT_MS": str(SESSION_MS),
    "SKIFF_GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS": str(HEARTBEAT_MS),
    "SKIFF_OFFSETS_TOPIC_NUM_PARTITIONS": "8",
}
PY_MEMBER = Path(__file__).with_name("group_member.py")
JS_MEMBER = Path(__file__).with_name("js") / "group_member.js"

MemberCommand = Callable[[dict[str, Any]], list[str]]
# order of simultaneous events: ownership ends before it begins, records come last
_ORDER = {"killed": 0, "exited": 0, "closing": 0, "revoked": 0, "lost": 0, "assigned": 1,
          "msg": 2}


class GroupNode(SkiffNode):
    def start(self) -> None:
        with mock.patch.dict(os.environ, NODE_ENV):
            super().start()


def python_member(cfg: dict[str, Any]) -> list[str]:
    return [sys.executable, str(PY_MEMBER), json.dumps(cfg)]


def js_member(cfg: dict[str, Any]) -> list[str]:
    return ["node", str(JS_MEMBER), json.dumps(cfg)]


@dataclass
class Member:
    name: str
    proc: subprocess.Popen[str]
    reader: threading.Thread
    stderr: list[str] = field(default_factory=list)


class GroupRun:
    """Members of one group on one topic, and everything they reported, in time order."""

    def __init__(self, command: MemberCommand, base_cfg: dict[str, Any]) -> None:
        self.command = command
        self.base_cfg = base_cfg
        self.members: dict[str, Member] = {}
        self.events: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    # ---- processes -------------------------------------------------------------------------

    def start(self, name: str, **extra: Any) -> Member:
        cfg = {**self.base_cfg, "name": name, **extra}
        env = dict(os.environ)
        env["PYTHONPATH"] = str(REPO_ROOT)
        proc = subprocess.Popen(self.command(cfg), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env, cwd=REPO_ROOT)
        member = Member(name, proc, threading.Thread(target=lambda: None))
        member.reader = threading.Thread(target=self._read, args=(member,), daemon=True)
        member.reader.start()
        threading.Thread(target=self._read_stderr, args=(member,), daemon=True).start()
        self.members[name] = member
        return member

    def _read(self, m: Member) -> None:
        assert m.proc.stdout is not None
        for line in m.proc.stdout:
            try:
                ev = json.loads(line)
            except ValueError:
                ev = {"t": time.time(), "m": m.name, "ev": "noise", "line": line[:200]}
            self._add(ev)
        m.proc.wait()
        self._add({"t": time.time(), "m": m.name, "ev": "exited", "code": m.proc.returncode})

    def _read_stderr(self, m: Member) -> None:
        assert m.proc.stderr is not None
        for line in m.proc.stderr:
            if len(m.stderr) < 200:
                m.stderr.append(line.rstrip())

    def _add(self, ev: dict[str, Any]) -> None:
        with self._lock:
            self.events.append(ev)

    def stop(self, name: str, timeout: float = 30.0) -> None:
        """Graceful: the member closes its consumer (LeaveGroup, or a static member's leave)."""
        m = self.members[name]
        assert m.proc.stdin is not None
        try:
            m.proc.stdin.write("stop\n")
            m.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass
        try:
            m.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill(name)
            raise AssertionError(f"member {name} did not close within {timeout:.0f}s\n"
                                 + self.tail()) from None
        m.reader.join(timeout=5)

    def kill(self, name: str) -> float:
        """SIGKILL by PID: no LeaveGroup, no callbacks. Returns the time it was dead."""
        m = self.members[name]
        if m.proc.poll() is None:
            os.kill(m.proc.pid, signal.SIGKILL)
            m.proc.wait(timeout=10)
        t = time.time()
        self._add({"t": t, "m": name, "ev": "killed"})
        m.reader.join(timeout=5)
        return t

    def close(self) -> None:
        for name, m in list(self.members.items()):
            if m.proc.poll() is None:
                with contextlib.suppress(AssertionError):
                    self.stop(name, timeout=15)
            for stream in (m.proc.stdin, m.proc.stdout, m.proc.stderr):
                if stream is not None:
                    stream.close()

    def alive(self) -> list[str]:
        return [n for n, m in self.members.items() if m.proc.poll() is None]

    # ---- what the members reported ----------------------------------------------------------

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return sorted(self.events, key=lambda e: (e["t"], _ORDER.get(e["ev"], 3)))

    def owned(self) -> dict[str, set[int]]:
        """Each member's partitions as of now, from its own callbacks."""
        out: dict[str, set[int]] = {}
        for e in self.snapshot():
            owned = out.setdefault(e["m"], set())
            if e["ev"] == "assigned":
                owned |= set(e["parts"])
            elif e["ev"] in ("revoked", "lost"):
                owned -= set(e["parts"])
            elif e["ev"] in ("closing", "killed", "exited"):
                owned.clear()
        return out

    def tail(self, n: int = 60) -> str:
        lines = [json.dumps(e) for e in self.snapshot() if e["ev"] != "msg"][-n:]
        errs = [f"{name} stderr: {line}" for name, m in self.members.items()
                for line in m.stderr[-10:]]
        return "\n".join(["--- events ---", *lines, *errs])

    def wait(self, pred: Callable[[], bool], what: str, timeout: float = JOIN_TIMEOUT_S) -> float:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if pred():
                return time.time()
            for name, m in self.members.items():
                code = m.proc.poll()
                if code not in (None, 0, -signal.SIGKILL):
                    raise AssertionError(f"member {name} exited with {code} while waiting for "
                                         f"{what}\n{self.tail()}")
            time.sleep(0.05)
        raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}\n{self.tail()}")

    def wait_balanced(self, names: Sequence[str], timeout: float = JOIN_TIMEOUT_S) -> float:
        """Until `names` between them own all partitions, evenly, and nobody else owns any."""
        share = PARTITIONS // len(names)

        def balanced() -> bool:
            owned = self.owned()
            mine = [owned.get(n, set()) for n in names]
            others = [p for n, ps in owned.items() if n not in names for p in ps]
            return (not others and all(len(ps) == share for ps in mine)
                    and set().union(*mine) == set(range(PARTITIONS)))

        return self.wait(balanced, f"{list(names)} to own {share} partitions each", timeout)

    def records(self, since: float = 0.0) -> list[dict[str, Any]]:
        return [e for e in self.snapshot() if e["ev"] == "msg" and e["t"] >= since]

    def commits(self, since: float = 0.0) -> dict[int, int]:
        """The highest next offset each partition's members committed successfully."""
        out: dict[int, int] = {}
        for e in self.snapshot():
            if e["ev"] == "commit" and e["t"] >= since:
                out[e["p"]] = max(out.get(e["p"], 0), e["o"])
        return out


def check_exclusive(events: Sequence[dict[str, Any]], *, eager: bool) -> None:
    """No partition owned by two members at once; eager members revoke all before an
    assignment; records reach a member only for partitions it owns."""
    owned: dict[str, set[int]] = {}
    closing: set[str] = set()  # the application stopped consuming; close() may still revoke
    problems: list[str] = []
    for e in events:
        m, ev = e["m"], e["ev"]
        mine = owned.setdefault(m, set())
        if m in closing and ev in ("revoked", "lost"):
            continue
        if ev == "assigned":
            parts = set(e["parts"])
            if eager and mine:
                problems.append(f"{e['t']:.3f} {m} assigned {sorted(parts)} while still owning "
                                f"{sorted(mine)} (eager: revoke before assign)")
            for other, theirs in owned.items():
                if other != m and parts & theirs:
                    problems.append(f"{e['t']:.3f} {m} assigned {sorted(parts & theirs)} still "
                                    f"owned by {other}")
            mine |= parts
        elif ev in ("revoked", "lost"):
            parts = set(e["parts"])
            if eager and ev == "revoked" and parts != mine:
                problems.append(f"{e['t']:.3f} {m} eager revoke of {sorted(parts)} but owns "
                                f"{sorted(mine)}")
            mine -= parts
        elif ev in ("closing", "killed", "exited"):
            mine.clear()
            closing.add(m)
        elif ev == "msg" and e["p"] not in mine:
            problems.append(f"{e['t']:.3f} {m} got a record of partition {e['p']} "
                            f"it does not own ({sorted(mine)})")
    assert not problems, "ownership violated:\n" + "\n".join(problems[:20])


# ---- producing and reading back ------------------------------------------------------------


def produce(bootstrap: str, topic: str, per_partition: Sequence[str]) -> None:
    """For every partition, one record per value in `per_partition`, acks=all, in order."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                  "log_level": 3, "enable.idempotence": True})
    errors: list[str] = []

    def cb(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    for part in range(PARTITIONS):
        for i, v in enumerate(per_partition):
            p.produce(topic, value=f"{v}-{part}-{i}".encode(), partition=part, on_delivery=cb)
    left = p.flush(30)
    assert left == 0 and not errors, f"produce failed: {left} unsent, {errors[:3]}"


def committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    """The group's committed offsets as OffsetFetch answers them (librdkafka's admin)."""
    from confluent_kafka import ConsumerGroupTopicPartitions

    a = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p)
                                               for p in range(PARTITIONS)])
    fut = a.list_consumer_group_offsets([req], request_timeout=15)[group]
    res = fut.result(timeout=20)
    return {tp.partition: tp.offset for tp in res.topic_partitions}


def describe(bootstrap: str, group: str) -> Any:
    a = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    return a.describe_consumer_groups([group], request_timeout=15)[group].result(timeout=20)


def check_described_stable(bootstrap: str, group: str, topic: str, names: Sequence[str],
                           *, kip848: bool) -> None:
    """librdkafka's admin view (DescribeGroups, or ConsumerGroupDescribe for KIP-848 groups)
    agrees with the members: Stable, these members, every partition assigned once."""
    from confluent_kafka import ConsumerGroupState, ConsumerGroupType

    desc = describe(bootstrap, group)
    assert desc.state == ConsumerGroupState.STABLE, desc.state
    assert desc.type == (ConsumerGroupType.CONSUMER if kip848 else ConsumerGroupType.CLASSIC), (
        desc.type)
    assert sorted(m.client_id for m in desc.members) == sorted(names), (
        [m.client_id for m in desc.members])
    parts = [tp.partition for m in desc.members for tp in m.assignment.topic_partitions
             if tp.topic == topic]
    assert sorted(parts) == list(range(PARTITIONS)), parts
    a = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    listed = a.list_consumer_groups(request_timeout=15,
                                    states={ConsumerGroupState.STABLE}).result(timeout=20)
    assert group in {g.group_id for g in listed.valid}, listed.valid


def check_empty_then_delete(bootstrap: str, group: str, topic: str) -> None:
    """Everyone left: the group is Empty, DeleteGroups removes it and its offsets."""
    from confluent_kafka import ConsumerGroupState

    desc = describe(bootstrap, group)
    assert desc.state == ConsumerGroupState.EMPTY and not desc.members, (desc.state,
                                                                        desc.members)
    a = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    a.delete_consumer_groups([group], request_timeout=15)[group].result(timeout=20)
    gone = committed(bootstrap, group, topic)
    assert all(o < 0 for o in gone.values()), f"offsets left after DeleteGroups: {gone}"


def create_topic(bootstrap: str, topic: str) -> None:
    adm.create_topic(bootstrap, topic, PARTITIONS)
    adm.wait_topic_ready(bootstrap, topic, PARTITIONS)


# ---- the scenarios ------------------------------------------------------------------------


@dataclass(frozen=True)
class Client:
    """How one client library is driven, and what it can do."""

    command: MemberCommand
    base: dict[str, Any]
    eager: bool
    classic: bool = True  # the classic protocol (session expiry by the members' own timeout)
    describe: bool = True  # check librdkafka's admin view of the group too


def run_membership(client: Client, bootstrap: str, topic: str, group: str) -> dict[str, float]:
    """3 members join; one leaves; another joins; one is killed and its partitions move after
    the session timeout. Returns how long each step took (seconds)."""
    run = GroupRun(client.command, {**client.base, "bootstrap": bootstrap, "group": group,
                                    "topic": topic, "session_ms": SESSION_MS,
                                    "heartbeat_ms": HEARTBEAT_MS})
    took: dict[str, float] = {}
    try:
        produce(bootstrap, topic, ["c"] * 5)  # committed: DeleteGroups must remove them
        t0 = time.time()
        for name in ("a", "b", "c"):
            run.start(name)
        took["3 join"] = run.wait_balanced(["a", "b", "c"]) - t0
        run.wait(lambda: len({(e["p"], e["o"]) for e in run.records()}) == 5 * PARTITIONS,
                 "every record consumed")
        if client.describe:
            check_described_stable(bootstrap, group, topic, ["a", "b", "c"],
                                   kip848=not client.classic)

        t0 = time.time()
        run.stop("c")
        took["1 leaves"] = run.wait_balanced(["a", "b"]) - t0

        t0 = time.time()
        run.start("d")
        took["1 joins"] = run.wait_balanced(["a", "b", "d"]) - t0
        produce(bootstrap, topic, ["n"] * 2)  # records flow to the new owners too
        run.wait(lambda: len({(e["p"], e["o"]) for e in run.records()}) == 7 * PARTITIONS,
                 "records after the join consumed")

        b_parts = run.owned()["b"]
        killed_at = run.kill("b")
        moved_at = run.wait_balanced(["a", "d"], timeout=SESSION_MS / 1000 + 30)
        took["killed member's partitions moved"] = moved_at - killed_at
        # they moved because the session expired, not before
        firsts = [e["t"] for e in run.snapshot() if e["ev"] == "assigned"
                  and e["t"] > killed_at and set(e["parts"]) & b_parts]
        assert firsts and min(firsts) - killed_at >= SESSION_MS / 1000 - 1.5, (
            f"b's partitions {sorted(b_parts)} moved {min(firsts) - killed_at:.1f}s after the "
            f"kill, before its {SESSION_MS} ms session could expire\n{run.tail()}")
        for name in run.alive():
            run.stop(name)
        check_exclusive(run.snapshot(), eager=client.eager)
        if client.describe:
            check_empty_then_delete(bootstrap, group, topic)
    finally:
        run.close()
    return took


def _offsets(parts: range, first: dict[int, int] | int, end: int) -> set[tuple[int, int]]:
    lo = first if isinstance(first, dict) else dict.fromkeys(parts, first)
    return {(p, o) for p in parts for o in range(lo[p], end)}


def _restart_round(run: GroupRun, bootstrap: str, topic: str, start: int, end: int,
                   first_round: bool) -> None:
    """Members resume at `start`; records start..end-6 are committed, end-5..end-1 are not."""
    parts = range(PARTITIONS)
    if first_round:
        run.wait(lambda: all(run.commits().get(p, 0) >= start + 10 for p in parts),
                 "the first records committed")
        start_at = 0
    else:
        start_at = start
    produce(bootstrap, topic, ["c"] * 5 + ["n"] * 5)
    target = end - 5
    wanted = _offsets(parts, start_at, end)
    run.wait(lambda: {(e["p"], e["o"]) for e in run.records()} >= wanted,
             f"offsets {start_at}-{end - 1} consumed")
    run.wait(lambda: all(run.commits().get(p, 0) == target for p in parts),
             f"offset {target} committed on every partition")
    seen: dict[int, list[int]] = {}
    for e in run.records():
        seen.setdefault(e["p"], []).append(e["o"])
    events = run.snapshot()
    for p in parts:
        got = seen.get(p, [])
        assert min(got) == start_at, (
            f"partition {p} resumed at {min(got)}, committed {start_at}\n{run.tail()}")
        assert set(got) == set(range(start_at, end)), (
            f"partition {p} gap or extra: {sorted(set(got))}")
        violations = committed_rereads(events, p)
        assert not violations, (
            f"partition {p} re-read committed records {violations}\n{run.tail()}")


def committed_rereads(events: list[dict[str, Any]], partition: int) -> list[int]:
    """Offsets of `partition` read again after a successful commit had covered them, in
    the members' time-ordered events; a record whose own commit failed may be read again.

    A record counts as committed only once a commit covers it. Until then a rebalance may
    hand its partition to another member, which resumes below it: after a restart the
    first records read may be "n" records that only a later commit covers, while members
    are still joining."""
    failed = {e["o"] - 1 for e in events
              if e["ev"] == "commit_failed" and e.get("p") == partition}
    committed_to = 0
    read: set[int] = set()
    violations: set[int] = set()
    for e in events:
        if e.get("p") != partition:
            continue
        if e["ev"] == "commit":
            committed_to = max(committed_to, e["o"])
        elif e["ev"] == "msg":
            if e["o"] in read and e["o"] < committed_to and e["o"] not in failed:
                violations.add(e["o"])
            read.add(e["o"])
    return sorted(violations)


def _wait_committed(bootstrap: str, group: str, topic: str, want: int, what: str) -> None:
    deadline = time.monotonic() + 20
    while True:
        try:
            got = committed(bootstrap, group, topic)
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    assert got == dict.fromkeys(range(PARTITIONS), want), f"{what}: committed {got}"


def run_restart(client: Client, node: SkiffNode, topic: str, group: str) -> None:
    """Commits survive a SIGTERM restart and a kill -9 of the node: the group resumes exactly
    at its committed offsets, re-reading only records it never committed.

    Round 1: offsets 0-9 and 10-14 committed, 15-19 read but not committed; SIGTERM restart.
    Round 2 resumes at 15: 15-19 again, 20-24 committed, 25-29 not; kill -9 restart.
    Then the group resumes at 25 and reads exactly 25-29."""
    base = {**client.base, "bootstrap": node.bootstrap, "group": group, "topic": topic,
            "session_ms": SESSION_MS, "heartbeat_ms": HEARTBEAT_MS}
    names = ("a", "b", "c")
    bootstrap = node.bootstrap
    produce(bootstrap, topic, ["c"] * 10)
    for start, end, restart, how in ((0, 20, node.stop, "SIGTERM"), (15, 30, node.kill, "kill -9")):
        run = GroupRun(client.command, base)
        try:
            for name in names:
                run.start(name)
            _restart_round(run, bootstrap, topic, start, end, first_round=start == 0)
            for name in names:
                run.stop(name)
            check_exclusive(run.snapshot(), eager=client.eager)
        finally:
            run.close()
        _wait_committed(bootstrap, group, topic, end - 5, "before the restart")
        restart()
        node.start()
        node.wait_ready()
        # the offsets are back before any member returns
        _wait_committed(bootstrap, group, topic, end - 5, f"after the {how} restart")
    run = GroupRun(client.command, base)
    try:
        for name in names:
            run.start(name)
        wanted = _offsets(range(PARTITIONS), 25, 30)
        run.wait(lambda: {(e["p"], e["o"]) for e in run.records()} >= wanted,
                 "the uncommitted records 25-29 read again")
        got = {(e["p"], e["o"]) for e in run.records()}
        assert got == wanted, (f"resumed outside 25-29 after the kill -9 restart: "
                               f"{sorted(got - wanted)}")
        for name in names:
            run.stop(name)
        check_exclusive(run.snapshot(), eager=client.eager)
    finally:
        run.close()


def run_static(client: Client, bootstrap: str, topic: str, group: str, *,
               kill: bool) -> float:
    """Static members: each in turn goes away (SIGKILL, or a close that keeps its membership)
    and comes back with the same group.instance.id; it gets its old partitions back and the
    others see no revocation or assignment. Every member is restarted once, so the leader is
    one of them. Returns the longest return (seconds)."""
    run = GroupRun(client.command, {**client.base, "bootstrap": bootstrap, "group": group,
                                    "topic": topic, "session_ms": 30000,
                                    "heartbeat_ms": HEARTBEAT_MS})
    try:
        current = {k: k for k in ("a", "b", "c")}  # instance -> the process serving it now
        for k in current:
            run.start(k, instance_id=f"{group}-{k}")
        run.wait_balanced(list(current.values()))
        took = 0.0
        for k in ("a", "b", "c"):
            time.sleep(HEARTBEAT_MS / 1000)  # settled: no rebalance pending
            old = current[k]
            before = run.owned()
            quiet_from = time.time()
            if kill:
                run.kill(old)
            else:
                run.stop(old)
            t0 = time.time()
            new = current[k] = f"{k}{len(run.members)}"
            run.start(new, instance_id=f"{group}-{k}")
            want = before[old]
            run.wait(partial(_owns, run, new, want),
                     f"{new} to own {sorted(want)} again, as {old} did", timeout=25)
            took = max(took, time.time() - t0)
            time.sleep(2 * HEARTBEAT_MS / 1000)  # a rebalance would reach the others by now
            others = [n for i, n in current.items() if i != k]
            noisy = [e for e in run.snapshot() if e["t"] >= quiet_from and e["m"] in others
                     and e["ev"] in ("assigned", "revoked", "lost")]
            assert not noisy, f"{old}'s static return rebalanced the others: {noisy}\n{run.tail()}"
            assert all(run.owned()[n] == before[n] for n in others)
        for name in run.alive():
            run.stop(name)
        check_exclusive(run.snapshot(), eager=client.eager)
        return took
    finally:
        run.close()


def _owns(run: GroupRun, name: str, want: set[int]) -> bool:
    return run.owned().get(name) == want


def unique(label: str) -> str:
    return f"g-{label}-{time.time_ns() % 10**10}"


def node_fixture(tmp_path_factory: Any) -> Iterator[SkiffNode]:
    node = ready(GroupNode(tmp_path_factory.mktemp("groups-node")))
    try:
        yield node
    finally:
        node.close()


def run_membership_survives_restart(client: Client, node: SkiffNode, topic: str, group: str,
                                    *, kill: bool) -> None:
    """The members keep running while the node restarts: their membership (ids, epochs,
    assignments) is reloaded from __consumer_offsets, so no client sees its partitions
    revoked, lost or assigned again, and consumption continues with the same owners."""
    # classic clients give their partitions up by themselves when no heartbeat succeeds for a
    # session: a restart on a loaded machine must not take that long
    run = GroupRun(client.command, {**client.base, "bootstrap": node.bootstrap, "group": group,
                                    "topic": topic, "session_ms": 20_000,
                                    "heartbeat_ms": HEARTBEAT_MS})
    try:
        for name in ("a", "b", "c"):
            run.start(name)
        run.wait_balanced(["a", "b", "c"])
        time.sleep(2 * HEARTBEAT_MS / 1000)
        before = run.owned()
        since = time.time()
        if kill:
            node.kill()
        else:
            node.stop()
        node.start()
        node.wait_ready()
        produce(node.bootstrap, topic, ["c"] * 3)
        wanted = _offsets(range(PARTITIONS), 0, 3)
        run.wait(lambda: {(e["p"], e["o"]) for e in run.records()} >= wanted,
                 "records produced after the restart consumed")
        # committed with the generation / member epoch the members held before the restart
        run.wait(lambda: all(run.commits().get(p, 0) == 3 for p in range(PARTITIONS)),
                 "the records committed after the restart")
        failed = [e for e in run.snapshot() if e["ev"] == "commit_failed"]
        assert not failed, f"commits refused after the restart: {failed[:3]}"
        time.sleep(3 * HEARTBEAT_MS / 1000)
        churn = [e for e in run.snapshot() if e["t"] >= since
                 and e["ev"] in ("assigned", "revoked", "lost")]
        assert not churn, f"membership did not survive the restart: {churn}\n{run.tail()}"
        assert run.owned() == before
        by_owner = {e["p"]: e["m"] for e in run.records()}
        assert all(p in before[m] for p, m in by_owner.items()), by_owner
        for name in run.alive():
            run.stop(name)
        check_exclusive(run.snapshot(), eager=client.eager)
    finally:
        run.close()


def run_regex_subscription(client: Client, bootstrap: str, prefix: str, group: str) -> float:
    """Two members subscribed to `^prefix-.*` (KIP-848 SubscribedTopicRegex, resolved by the
    coordinator): the matching topics are shared, a non-matching one is not, and a matching
    topic created later is assigned too. Returns how long that took (seconds)."""
    topics = [f"{prefix}-a", f"{prefix}-b", f"{prefix}-c"]
    for t in [*topics[:2], f"x{prefix}-a"]:
        adm.create_topic(bootstrap, t, 2)
        adm.wait_topic_ready(bootstrap, t, 2)
    run = GroupRun(client.command, {**client.base, "bootstrap": bootstrap, "group": group,
                                    "topic": topics[0], "subscribe": [f"^{prefix}-.*"],
                                    "topics": topics, "session_ms": SESSION_MS,
                                    "heartbeat_ms": HEARTBEAT_MS})
    try:
        run.start("a")
        run.start("b")
        want = {0, 1, 1000, 1001}  # partitions 0-1 of the first two topics

        def shared(want: set[int]) -> Callable[[], bool]:
            def pred() -> bool:
                owned = run.owned()
                return (set().union(*owned.values()) == want
                        and sum(len(v) for v in owned.values()) == len(want)
                        and all(len(owned.get(n, ())) >= len(want) // 2 for n in ("a", "b")))
            return pred

        run.wait(shared(want), "the two matching topics shared")
        adm.create_topic(bootstrap, topics[2], 2)
        t0 = time.time()
        took = run.wait(shared(want | {2000, 2001}), "the new matching topic assigned") - t0
        for name in ("a", "b"):
            run.stop(name)
        check_exclusive(run.snapshot(), eager=False)
        return took
    finally:
        run.close()


def run_static_killed_kip848(client: Client, bootstrap: str, topic: str, group: str) -> None:
    """KIP-848 (as Kafka): a static member killed without its epoch -2 leave is still a
    member, so a successor with its instance id is refused with UNRELEASED_INSTANCE_ID
    (fatal to librdkafka); the killed member's partitions move when its session expires."""
    run = GroupRun(client.command, {**client.base, "bootstrap": bootstrap, "group": group,
                                    "topic": topic, "session_ms": SESSION_MS,
                                    "heartbeat_ms": HEARTBEAT_MS})
    try:
        for name in ("a", "b", "c"):
            run.start(name, instance_id=f"{group}-{name}")
        run.wait_balanced(["a", "b", "c"])
        killed_at = run.kill("b")
        run.start("b2", instance_id=f"{group}-b")
        run.wait(lambda: any(e["m"] == "b2" and e["ev"] == "error"
                             and "instance ID is still used" in e["err"]
                             for e in run.snapshot()),
                 "the successor refused with UNRELEASED_INSTANCE_ID", timeout=20)
        moved = run.wait(lambda: set().union(*[run.owned().get(n, set()) for n in "ac"])
                         == set(range(PARTITIONS)), "b's partitions moved to a and c")
        assert moved - killed_at >= SESSION_MS / 1000 - 1.5, (
            f"b's partitions moved {moved - killed_at:.1f}s after the kill\n{run.tail()}")
        assert not run.owned().get("b2"), run.owned()
        for name in ("a", "c"):
            run.stop(name)
        check_exclusive(run.snapshot(), eager=False)
    finally:
        run.close()
