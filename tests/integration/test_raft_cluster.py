"""Three quorum voters as OS processes on 127.0.0.1 under continuous appends.

The leader is killed with SIGKILL repeatedly: a new leader must be elected, no
acknowledged (committed) record may be lost, and a restarted node must catch
up - through a snapshot (FetchSnapshot) when it fell behind the log start.
"""

from __future__ import annotations

import asyncio
import os
import pathlib
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from broker.testing.ports import free_ports
from raft.tools.client import NodeClient, NotLeader

ROOT = pathlib.Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(150)


class Cluster:
    def __init__(self, base: pathlib.Path, snapshot_bytes: int, log_store: str) -> None:
        self.log_store = log_store
        ports = free_ports(6)
        self.raft_ports = {i: ports[i - 1] for i in (1, 2, 3)}
        self.client_ports = {i: ports[i + 2] for i in (1, 2, 3)}
        self.voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in self.raft_ports.items())
        self.base = base
        self.snapshot_bytes = snapshot_bytes
        self.procs: dict[int, subprocess.Popen[bytes]] = {}

    def start(self, i: int) -> None:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        cmd = [
            sys.executable, "-m", "raft.tools.node", "--node-id", str(i),
            "--voters", self.voters, "--dir", str(self.base / f"n{i}"),
            "--client-port", str(self.client_ports[i]),
            "--set", f"metadata.log.max.record.bytes.between.snapshots={self.snapshot_bytes}",
            "--set", "controller.quorum.append.linger.ms=5",
            "--log-store", self.log_store,
        ]
        log = open(self.base / f"n{i}.log", "ab")  # noqa: SIM115 - owned by the process
        self.procs[i] = subprocess.Popen(cmd, env=env, stdout=log, stderr=log)

    def kill9(self, i: int) -> None:
        p = self.procs.pop(i)
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=10)

    def stop_all(self) -> None:
        for i in list(self.procs):
            self.kill9(i)


@pytest.fixture(params=["broker.metadata.log_store:MetadataLogStore", "file"],
                ids=["partition-log-store", "raft-file-store"])
def cluster(tmp_path: pathlib.Path, request: pytest.FixtureRequest) -> Iterator[Cluster]:
    c = Cluster(tmp_path, snapshot_bytes=16_000, log_store=request.param)
    try:
        yield c
    finally:
        c.stop_all()


async def state(port: int) -> dict[str, object] | None:
    c = NodeClient(port)
    try:
        return await asyncio.wait_for(c.state(), 1.0)
    except (OSError, TimeoutError, ConnectionError):
        return None
    finally:
        await c.close()


async def find_leader(c: Cluster, timeout_s: float, not_node: int | None = None) -> int:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        for i in list(c.procs):
            st = await state(c.client_ports[i])
            if st and st["role"] == "Leader" and st.get("ready") and i != not_node:
                return i
        await asyncio.sleep(0.05)
    raise AssertionError(f"no leader within {timeout_s}s")


class Writers:
    """Appenders that follow the leader; every acknowledged record is remembered."""

    def __init__(self, c: Cluster, n: int) -> None:
        self.c = c
        self.n = n
        self.acked: dict[bytes, int] = {}
        self.seq = 0
        self.stop = False
        self.leader: int | None = None
        self.last_ack = time.monotonic()

    async def run(self, w: int) -> None:
        client: NodeClient | None = None
        port = None
        while not self.stop:
            if self.leader is None or self.leader not in self.c.procs:
                await asyncio.sleep(0.05)
                continue
            if client is None or port != self.c.client_ports[self.leader]:
                if client is not None:
                    await client.close()
                port = self.c.client_ports[self.leader]
                client = NodeClient(port)
            self.seq += 1
            payload = f"w{w}-{self.seq}-".encode() + b"x" * 100
            try:
                off = await asyncio.wait_for(client.append(payload), 5)
                self.acked[payload] = off
                self.last_ack = time.monotonic()
            except (NotLeader, OSError, TimeoutError, ConnectionError, RuntimeError):
                if client is not None:
                    await client.close()
                client = None
                await asyncio.sleep(0.02)
        if client is not None:
            await client.close()

    async def track_leader(self) -> None:
        while not self.stop:
            try:
                self.leader = await find_leader(self.c, 5)
            except AssertionError:
                self.leader = None
            await asyncio.sleep(0.1)


async def scenario(c: Cluster) -> dict[str, object]:
    for i in (1, 2, 3):
        c.start(i)
    first = await find_leader(c, 20)
    w = Writers(c, 4)
    w.leader = first
    tasks = [asyncio.create_task(w.run(k)) for k in range(w.n)]
    tasks.append(asyncio.create_task(w.track_leader()))
    failovers: list[float] = []
    snapshot_catchup = None
    try:
        await asyncio.sleep(2)
        for round_no in range(3):
            leader = await find_leader(c, 10)
            before = len(w.acked)
            c.kill9(leader)
            killed_at = time.monotonic()
            new = await find_leader(c, 15, not_node=leader)
            failovers.append(time.monotonic() - killed_at)
            w.leader = new
            # appends resume under the new leader
            for _ in range(300):  # up to 15 s
                if len(w.acked) > before + 20:
                    break
                await asyncio.sleep(0.05)
            assert len(w.acked) > before + 20, "appends did not resume after failover"
            if round_no == 1:
                # keep it down until the others' log start passes its log end
                laggard_end = max(o for o in w.acked.values()) + 1 if w.acked else 0
                end = time.monotonic() + 40
                survivors = list(c.procs)
                while time.monotonic() < end:
                    round_states = [await state(c.client_ports[i]) for i in survivors]
                    if all(
                        s and int(s["log_start"]) > laggard_end + 50  # type: ignore[call-overload]
                        for s in round_states
                    ):
                        break
                    await asyncio.sleep(0.2)
                snapshot_catchup = leader
            c.start(leader)
            await asyncio.sleep(1.5)
    finally:
        w.stop = True
        await asyncio.gather(*tasks, return_exceptions=True)

    # everyone converges to the leader's high watermark
    leader = await find_leader(c, 10)
    end = time.monotonic() + 30
    while True:
        sts = {i: await state(c.client_ports[i]) for i in (1, 2, 3)}
        hws = {i: int(s["hw"]) for i, s in sts.items() if s}  # type: ignore[call-overload]
        if len(hws) == 3 and len(set(hws.values())) == 1:
            break
        assert time.monotonic() < end, f"no convergence: {hws}"
        await asyncio.sleep(0.2)

    logs: dict[int, list[tuple[int, bytes]]] = {}
    for i in (1, 2, 3):
        cl = NodeClient(c.client_ports[i])
        rows: list[tuple[int, bytes]] = []
        while True:
            chunk = await cl.read(len(rows), 5000)
            if not chunk:
                break
            rows.extend(chunk)
        await cl.close()
        logs[i] = rows
    return {"acked": w.acked, "logs": logs, "failovers": failovers, "states": sts,
            "snapshot_node": snapshot_catchup, "leader": leader}


def test_kill9_leader_repeatedly_loses_no_committed_record(cluster: Cluster) -> None:
    r = asyncio.run(scenario(cluster))
    acked: dict[bytes, int] = r["acked"]  # type: ignore[assignment]
    logs: dict[int, list[tuple[int, bytes]]] = r["logs"]  # type: ignore[assignment]
    assert len(acked) > 200
    # identical committed logs on every node
    assert logs[1] == logs[2] == logs[3]
    committed = dict((p, o) for o, p in logs[1])
    offsets = [o for o, _ in logs[1]]
    assert offsets == sorted(set(offsets))
    lost = {p: o for p, o in acked.items() if committed.get(p) != o}
    assert not lost, f"{len(lost)} acknowledged records lost or moved"
    states = r["states"]
    snap_node = r["snapshot_node"]
    assert snap_node is not None
    assert int(states[snap_node]["snapshots_loaded"]) >= 1, states  # type: ignore[index]
    failovers: list[float] = r["failovers"]  # type: ignore[assignment]
    assert len(failovers) == 3 and max(failovers) < 10, failovers
    print(f"acked={len(acked)} failovers={[round(f, 2) for f in failovers]}")
