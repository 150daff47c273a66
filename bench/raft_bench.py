"""Skiff's Raft metadata quorum against etcd 3.4, on this machine, in one run.

  python bench/raft_bench.py [--seconds 3] [--concurrency 1,16,64,256]
                             [--failovers 5] [--log-store file|module:Class] [--skip-etcd]

Three voters on 127.0.0.1 each (Skiff: `python -m raft.tools.node`; etcd: three
`etcd` members), records fsynced before commit on both.  One load generator
(this process, asyncio) drives both the same way: N closed-loop clients, each
with its own connection and one 256-byte write outstanding, against the
leader (Skiff: the node runner's line protocol; etcd: its native gRPC
`KV.Put`, one HTTP/2 channel per client; the JSON gateway only finds the
leader).  Reported: committed writes/s, latency p50/p99, and the
failover time after kill -9 of the leader (kill -> first write acknowledged by
a new leader), median of --failovers kills.  Ratios are Skiff / etcd.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pathlib
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable

import grpc

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from broker.testing.ports import free_ports  # noqa: E402
from raft.tools.client import NodeClient, NotLeader  # noqa: E402

VALUE = b"v" * 256


def pct(xs: list[float], p: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


# ---------------------------------------------------------------------- systems


class System:
    name = ""
    ids = (1, 2, 3)
    procs: dict[int, subprocess.Popen[bytes]]

    def start(self, i: int) -> None:
        raise NotImplementedError

    async def leader(self, timeout_s: float = 20) -> int:
        raise NotImplementedError

    def writer(self, i: int) -> Callable[[bytes], Awaitable[None]]:
        raise NotImplementedError

    async def close_writers(self) -> None:
        pass

    def kill9(self, i: int) -> None:
        p = self.procs.pop(i)
        os.kill(p.pid, signal.SIGKILL)
        p.wait(10)

    def stop(self) -> None:
        for i in list(self.procs):
            self.kill9(i)


class Skiff(System):
    name = "skiff"

    def __init__(self, base: pathlib.Path, log_store: str) -> None:
        ports = free_ports(6)
        self.raft = dict(zip(self.ids, ports[:3], strict=True))
        self.client = dict(zip(self.ids, ports[3:], strict=True))
        self.voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in self.raft.items())
        self.base = base
        self.log_store = log_store
        self.procs = {}
        self._clients: list[NodeClient] = []

    def start(self, i: int) -> None:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        log = open(self.base / f"skiff{i}.log", "ab")  # noqa: SIM115
        self.procs[i] = subprocess.Popen(
            [sys.executable, "-m", "raft.tools.node", "--node-id", str(i), "--voters",
             self.voters, "--dir", str(self.base / f"skiff{i}"), "--client-port",
             str(self.client[i]), "--log-store", self.log_store],
            env=env, stdout=log, stderr=log)

    async def _state(self, i: int) -> dict[str, object] | None:
        c = NodeClient(self.client[i])
        try:
            return await asyncio.wait_for(c.state(), 1)
        except (OSError, TimeoutError, ConnectionError):
            return None
        finally:
            await c.close()

    async def leader(self, timeout_s: float = 20) -> int:
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            for i in list(self.procs):
                st = await self._state(i)
                if st and st["role"] == "Leader" and st.get("ready"):
                    return i
            await asyncio.sleep(0.02)
        raise RuntimeError("skiff: no leader")

    def writer(self, i: int) -> Callable[[bytes], Awaitable[None]]:
        c = NodeClient(self.client[i])
        self._clients.append(c)

        async def write(v: bytes) -> None:
            await c.append(v)
        return write

    async def close_writers(self) -> None:
        for c in self._clients:
            await c.close()
        self._clients = []


class HttpConn:
    """A minimal keep-alive HTTP/1.1 client for etcd's JSON gateway."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.r: asyncio.StreamReader | None = None
        self.w: asyncio.StreamWriter | None = None

    async def post(self, path: str, body: dict[str, object]) -> dict[str, object]:
        if self.w is None:
            self.r, self.w = await asyncio.open_connection("127.0.0.1", self.port)
        assert self.r is not None
        data = json.dumps(body).encode()
        self.w.write(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                     f"application/json\r\nContent-Length: {len(data)}\r\n\r\n".encode() + data)
        status = await self.r.readline()
        length = 0
        while True:
            line = await self.r.readline()
            if line in (b"\r\n", b""):
                break
            k, _, v = line.decode().partition(":")
            if k.lower() == "content-length":
                length = int(v)
        payload = await self.r.readexactly(length)
        if b" 200 " not in status:
            raise RuntimeError(f"etcd: {status!r} {payload[:200]!r}")
        out: dict[str, object] = json.loads(payload)
        return out

    async def close(self) -> None:
        if self.w is not None:
            self.w.close()
            self.w = None


class Etcd(System):
    name = "etcd"

    def __init__(self, base: pathlib.Path) -> None:
        ports = free_ports(6)
        self.peer = dict(zip(self.ids, ports[:3], strict=True))
        self.client = dict(zip(self.ids, ports[3:], strict=True))
        self.base = base
        self.procs = {}
        self._conns: list[HttpConn] = []
        self._channels: list[grpc.aio.Channel] = []
        self.binary = shutil.which("etcd") or "/usr/bin/etcd"

    def start(self, i: int) -> None:
        cluster = ",".join(f"m{j}=http://127.0.0.1:{p}" for j, p in self.peer.items())
        data = self.base / f"etcd{i}"
        state = "existing" if data.exists() else "new"
        log = open(self.base / f"etcd{i}.log", "ab")  # noqa: SIM115
        self.procs[i] = subprocess.Popen(
            [self.binary, "--name", f"m{i}", "--data-dir", str(data),
             "--listen-client-urls", f"http://127.0.0.1:{self.client[i]}",
             "--advertise-client-urls", f"http://127.0.0.1:{self.client[i]}",
             "--listen-peer-urls", f"http://127.0.0.1:{self.peer[i]}",
             "--initial-advertise-peer-urls", f"http://127.0.0.1:{self.peer[i]}",
             "--initial-cluster", cluster, "--initial-cluster-state", state,
             "--initial-cluster-token", "bench"],
            stdout=log, stderr=log, env=dict(os.environ, ETCD_UNSUPPORTED_ARCH="arm64"))

    async def leader(self, timeout_s: float = 20) -> int:
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            for i in list(self.procs):
                c = HttpConn(self.client[i])
                try:
                    st = await asyncio.wait_for(c.post("/v3/maintenance/status", {}), 1)
                    header = st.get("header")
                    if isinstance(header, dict) and str(st.get("leader")) == str(
                        header.get("member_id")
                    ):
                        return i
                except (OSError, TimeoutError, RuntimeError, ValueError):
                    pass
                finally:
                    await c.close()
            await asyncio.sleep(0.02)
        raise RuntimeError("etcd: no leader")

    def writer(self, i: int) -> Callable[[bytes], Awaitable[None]]:
        """etcd's own protocol: gRPC KV.Put, one channel (HTTP/2 connection) per client.
        The PutRequest is encoded by hand: key = field 1, value = field 2 (bytes)."""
        ch = grpc.aio.insecure_channel(f"127.0.0.1:{self.client[i]}")
        self._channels.append(ch)
        put = ch.unary_unary("/etcdserverpb.KV/Put")
        n = [0]

        def field(tag: int, data: bytes) -> bytes:
            ln, out = len(data), bytearray([tag])
            while ln >= 0x80:
                out.append((ln & 0x7F) | 0x80)
                ln >>= 7
            out.append(ln)
            return bytes(out) + data

        async def write(v: bytes) -> None:
            n[0] += 1
            key = f"k{id(ch)}-{n[0]}".encode()
            try:
                await put(field(0x0A, key) + field(0x12, v), timeout=5)
            except grpc.aio.AioRpcError as e:
                raise RuntimeError(f"etcd put: {e.code()}") from None
        return write

    async def close_writers(self) -> None:
        for c in self._conns:
            await c.close()
        self._conns = []
        for ch in self._channels:
            await ch.close()
        self._channels = []


# ------------------------------------------------------------------- measurements


async def load(sysm: System, concurrency: int, seconds: float) -> tuple[float, float, float]:
    leader = await sysm.leader()
    writers = [sysm.writer(leader) for _ in range(concurrency)]
    lat: list[float] = []
    done = 0
    stop_at = time.monotonic() + seconds
    warm_until = time.monotonic() + min(0.5, seconds / 4)

    async def client(w: Callable[[bytes], Awaitable[None]]) -> None:
        nonlocal done
        while time.monotonic() < stop_at:
            t = time.monotonic()
            await w(VALUE)
            now = time.monotonic()
            if t >= warm_until:
                lat.append(now - t)
                done += 1

    await asyncio.gather(*(client(w) for w in writers))
    await sysm.close_writers()
    span = stop_at - warm_until
    return done / span, pct(lat, 50) * 1000, pct(lat, 99) * 1000


async def failover(sysm: System) -> float:
    leader = await sysm.leader()
    sysm.kill9(leader)
    t0 = time.monotonic()
    survivors = [i for i in sysm.ids if i in sysm.procs]
    deadline = t0 + 30
    while time.monotonic() < deadline:
        for i in survivors:
            w = sysm.writer(i)
            try:
                await asyncio.wait_for(w(VALUE), 0.5)
                took = time.monotonic() - t0
                await sysm.close_writers()
                sysm.start(leader)
                await asyncio.sleep(2.0)  # let it rejoin before the next kill
                return took
            except (NotLeader, OSError, TimeoutError, RuntimeError, ConnectionError,
                    asyncio.IncompleteReadError, ValueError):
                await sysm.close_writers()
        await asyncio.sleep(0.01)
    raise RuntimeError(f"{sysm.name}: no write accepted within 30 s of the kill")


async def bench(sysm: System, conc: list[int], seconds: float,
                kills: int) -> dict[str, object]:
    for i in sysm.ids:
        sysm.start(i)
    try:
        await sysm.leader(30)
        await asyncio.sleep(1)
        rows = {}
        for c in conc:
            rows[c] = await load(sysm, c, seconds)
            print(f"  {sysm.name:6} c={c:<4} {rows[c][0]:8.0f} writes/s  p50 {rows[c][1]:6.1f} ms"
                  f"  p99 {rows[c][2]:6.1f} ms", flush=True)
        fo = [await failover(sysm) for _ in range(kills)]
        if fo:
            print(f"  {sysm.name:6} failovers {[round(x, 2) for x in fo]} median "
                  f"{statistics.median(fo):.2f} s", flush=True)
        return {"load": rows, "failover": fo}
    finally:
        sysm.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--concurrency", default="1,16,64,256")
    ap.add_argument("--failovers", type=int, default=5)
    ap.add_argument("--log-store", default="broker.metadata.log_store:MetadataLogStore")
    ap.add_argument("--skip-etcd", action="store_true")
    args = ap.parse_args()
    conc = [int(c) for c in args.concurrency.split(",")]
    base = pathlib.Path(tempfile.mkdtemp(prefix="raft-bench-"))
    try:
        print(f"skiff ({args.log_store}):", flush=True)
        sk = asyncio.run(bench(Skiff(base, args.log_store), conc, args.seconds, args.failovers))
        if args.skip_etcd:
            return
        print("etcd:", flush=True)
        et = asyncio.run(bench(Etcd(base), conc, args.seconds, args.failovers))
        print("\n| appenders | skiff writes/s | etcd writes/s | ratio | skiff p50/p99 ms "
              "| etcd p50/p99 ms |")
        print("|---|---|---|---|---|---|")
        sl: dict[int, tuple[float, float, float]] = sk["load"]  # type: ignore[assignment]
        el: dict[int, tuple[float, float, float]] = et["load"]  # type: ignore[assignment]
        for c in conc:
            s, e = sl[c], el[c]
            print(f"| {c} | {s[0]:.0f} | {e[0]:.0f} | {s[0] / e[0]:.2f} | {s[1]:.1f} / {s[2]:.1f}"
                  f" | {e[1]:.1f} / {e[2]:.1f} |")
        sf: list[float] = sk["failover"]  # type: ignore[assignment]
        ef: list[float] = et["failover"]  # type: ignore[assignment]
        if sf and ef:
            print(f"| failover median (s) | {statistics.median(sf):.2f} | "
                  f"{statistics.median(ef):.2f} | "
                  f"{statistics.median(sf) / statistics.median(ef):.2f} | | |")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
