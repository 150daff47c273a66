"""The worker processes of a broker with several (`skiff.broker.workers`,
broker/node/shards.py), as the node process (worker 0) runs them, and the channels between
all of them.

The node makes a private directory (mode 0700) for the workers' Unix sockets, serves its
own channel there, starts workers 1..N-1 (`python -m broker.node.worker`, given the node's
config on stdin) and waits until each has loaded its logs and followed the metadata the
node streams to it, before it opens the client port. The node alone accepts connections,
and hands them to the workers in turn (ConnectionHandOff: the socket goes over a Unix
socket with SCM_RIGHTS before anything is read from it), so each process serves an equal
share of the connections; with SO_REUSEPORT the kernel's hash of a few connections often
left one process with most of them. A worker that exits while the node runs is started
again after a second; its partitions answer
NOT_LEADER_OR_FOLLOWER meanwhile, which clients retry. On stop the node asks each worker
to stop (SIGTERM: it closes its logs cleanly) and kills one that has not within 10 s; a
node that ends otherwise (kill -9) takes its workers with it, as the kernel kills each when
its parent ends (broker/node/worker.py, PR_SET_PDEATHSIG). The socket directory of a node
that was killed so stays behind: its name carries the node's PID, and the next node started
by the same user removes the directories of PIDs no longer running whose node socket no
longer accepts.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pickle
import shutil
import signal
import socket
import stat
import sys
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import structlog

from broker.node.shard_channel import ShardChannelClient, ShardChannelServer, ShardPeer
from broker.node.shards import ShardLayout
from broker.quotas.core import Quotas
from broker.quotas.shared import SharedQuotaUsage, Usage

log = structlog.get_logger(__name__)
WORKER_START_TIMEOUT_S = 120.0
WORKER_STOP_TIMEOUT_S = 10.0
RESTART_DELAY_S = 1.0
RECONNECT_DELAY_S = 0.2
# the checkout this module runs from: the workers import the same code
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def socket_path(directory: str, index: int) -> str:
    return os.path.join(directory, f"w{index}.sock")


def hand_off_path(directory: str, index: int) -> str:
    return os.path.join(directory, f"w{index}.conns.sock")


class ConnectionHandOff:
    """Server.hand_off of the node: each accepted connection goes to the next process in
    turn; a worker's share is sent to it (SCM_RIGHTS) and closed here. A worker that cannot
    take it now (gone, its socket full) leaves the connection with the node."""

    def __init__(self, count: int, keep_all: Callable[[], bool] = lambda: False) -> None:
        """`keep_all()`: connection limits are in effect (max.connections and the like,
        broker/quotas/connections.py), which the node counts for the connections it
        holds, so it holds them all meanwhile and the workers serve none."""
        self.count = count
        self.keep_all = keep_all
        self._next = 0
        self._sockets: dict[int, socket.socket] = {}

    def connect(self, index: int, path: str) -> None:
        self.drop(index)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        sock.connect(path)
        sock.setblocking(False)
        self._sockets[index] = sock

    def drop(self, index: int) -> None:
        sock = self._sockets.pop(index, None)
        if sock is not None:
            sock.close()

    def __call__(self, listener_name: str, transport: asyncio.Transport) -> bool:
        if self.keep_all():
            return False
        self._next = (self._next + 1) % self.count
        target = self._next
        sock = self._sockets.get(target)
        conn = transport.get_extra_info("socket")
        if target == 0 or sock is None or conn is None:
            return False
        try:
            socket.send_fds(sock, [listener_name.encode()], [conn.fileno()])
        except OSError as exc:
            if not isinstance(exc, BlockingIOError):
                log.warning("connection_not_handed_off", worker=target, error=str(exc))
                self.drop(target)
            return False
        transport.abort()  # the worker holds the connection now: closing here ends nothing
        return True

    def close(self) -> None:
        for index in list(self._sockets):
            self.drop(index)


class ConnectionReceiver:
    """A worker's side of the hand-off: `on_socket(listener name, socket)` for each
    connection the node sends."""

    def __init__(self, path: str, on_socket: Callable[[str, socket.socket], None]) -> None:
        self.path, self.on_socket = path, on_socket
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._conns: list[socket.socket] = []

    def start(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)  # a worker before this one was killed and left it
        self._listener.bind(self.path)
        self._listener.listen(4)
        self._listener.setblocking(False)
        asyncio.get_running_loop().add_reader(self._listener.fileno(), self._accept)

    def _accept(self) -> None:
        try:
            conn, _ = self._listener.accept()
        except BlockingIOError:
            return
        conn.setblocking(False)
        self._conns.append(conn)
        asyncio.get_running_loop().add_reader(conn.fileno(), self._receive, conn)

    def _receive(self, conn: socket.socket) -> None:
        while True:
            try:
                msg, fds, _flags, _addr = socket.recv_fds(conn, 1024, 16)
            except BlockingIOError:
                return
            except OSError:
                msg, fds = b"", []
            if not msg and not fds:
                asyncio.get_running_loop().remove_reader(conn.fileno())
                self._conns.remove(conn)
                conn.close()
                return
            for fd in fds:
                self.on_socket(msg.decode(), socket.socket(fileno=fd))

    def close(self) -> None:
        loop = asyncio.get_running_loop()
        for conn in self._conns:
            loop.remove_reader(conn.fileno())
            conn.close()
        loop.remove_reader(self._listener.fileno())
        self._listener.close()


class ShardPeers:
    """This worker's connections to the others' channels, each kept open (reconnected
    when it drops) until `close`."""

    def __init__(self, layout: ShardLayout, directory: str, *,
                 on_event: Callable[[int, Any], None] = lambda index, event: None) -> None:
        self.layout, self.directory, self.on_event = layout, directory, on_event
        self._channels: dict[int, ShardChannelClient] = {}
        self._keepers: list[asyncio.Task[None]] = []
        self._connected: dict[int, asyncio.Event] = {}

    def channel_of(self, index: int) -> ShardChannelClient | None:
        channel = self._channels.get(index)
        return None if channel is None or channel.closed.done() else channel

    def start(self, indexes: list[int]) -> None:
        for index in indexes:
            self._connected[index] = asyncio.Event()
            self._keepers.append(asyncio.ensure_future(self._keep(index)))

    def _events_of(self, index: int) -> Callable[[Any], None]:
        def on_event(event: Any) -> None:
            self.on_event(index, event)
        return on_event

    async def connected(self, index: int) -> ShardChannelClient:
        await self._connected[index].wait()
        channel = self.channel_of(index)
        assert channel is not None
        return channel

    async def _keep(self, index: int) -> None:
        path = socket_path(self.directory, index)
        while True:
            try:
                channel = await ShardChannelClient.connect(path,
                                                           on_event=self._events_of(index))
            except OSError:
                await asyncio.sleep(RECONNECT_DELAY_S)
                continue
            self._channels[index] = channel
            self._connected[index].set()
            await asyncio.shield(channel.closed)  # a cancelled keeper leaves it be
            self._connected[index].clear()
            self._channels.pop(index, None)
            await asyncio.sleep(RECONNECT_DELAY_S)

    async def close(self) -> None:
        for task in self._keepers:
            task.cancel()
        for channel in list(self._channels.values()):
            with contextlib.suppress(Exception):
                await channel.close()
        self._channels.clear()


_DIRECTORY_PREFIX = "skiff-workers-"


def socket_directory(base: str | None = None) -> str:
    """A new private directory (mode 0700) for this node's sockets, named after its PID,
    made after removing those of this user's nodes that no longer run."""
    remove_stale_socket_directories(base)
    return tempfile.mkdtemp(prefix=f"{_DIRECTORY_PREFIX}{os.getpid()}-", dir=base)


def remove_stale_socket_directories(base: str | None = None) -> list[str]:
    """Removes the socket directories whose node (the PID in the name) has ended: a node
    killed with kill -9 cannot remove its own. Returns the directories removed."""
    removed = []
    for path in Path(base or tempfile.gettempdir()).glob(f"{_DIRECTORY_PREFIX}*-*"):
        pid = path.name[len(_DIRECTORY_PREFIX):].split("-", 1)[0]
        try:
            st = path.lstat()
        except OSError:
            continue
        # lstat: a symlink is not a directory here, whatever it points to
        if (not pid.isdigit() or not stat.S_ISDIR(st.st_mode)
                or st.st_uid != os.getuid() or _running(int(pid)) or _served(path)):
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(str(path))
    return removed


def _served(directory: Path) -> bool:
    """Whether a node still accepts on its socket there: one in another PID namespace
    sharing this /tmp has a PID this process cannot see."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        try:
            probe.connect(socket_path(str(directory), 0))
        except OSError:
            return False
    return True


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class NodeWorkers:
    """The node's side: its channel server, the worker processes and the metadata it
    streams to them."""

    def __init__(self, layout: ShardLayout, config: Any,
                 ops: Mapping[str, Callable[..., Awaitable[Any]]], *,
                 snapshot: Callable[[], bytes],
                 keep_connections: Callable[[], bool] = lambda: False) -> None:
        self.layout = layout
        self.config = config
        self.directory = socket_directory()
        self.peers = ShardPeers(layout, self.directory)
        self._snapshot = snapshot
        self._subscribers: list[ShardPeer] = []
        self._ready: dict[int, asyncio.Event] = {
            i: asyncio.Event() for i in range(1, layout.count)}
        self._processes: dict[int, asyncio.subprocess.Process] = {}
        self._supervisors: list[asyncio.Task[None]] = []
        self._stopping = False
        self.hand_off = ConnectionHandOff(layout.count, keep_connections)
        self.server = ShardChannelServer(
            socket_path(self.directory, 0),
            {**ops, "subscribe_metadata": self._subscribe, "worker_ready": self._worker_ready},
            on_closed=self._peer_closed)

    @property
    def pids(self) -> dict[int, int]:
        return {i: p.pid for i, p in self._processes.items() if p.returncode is None}

    def channel_of(self, index: int) -> ShardChannelClient | None:
        return self.peers.channel_of(index)

    async def start(self, listeners: list[tuple[str, str, int]]) -> None:
        """Starts the workers and returns once every one serves (RuntimeError if one cannot
        within WORKER_START_TIMEOUT_S)."""
        await self.server.start()
        self.peers.start(list(range(1, self.layout.count)))
        for index in range(1, self.layout.count):
            self._supervisors.append(asyncio.ensure_future(self._supervise(index, listeners)))
        try:
            async with asyncio.timeout(WORKER_START_TIMEOUT_S):
                for index, event in self._ready.items():
                    await event.wait()
                    await self.peers.connected(index)
        except TimeoutError:
            raise RuntimeError(
                f"the broker's workers did not all start within {WORKER_START_TIMEOUT_S:.0f} s "
                f"(ready: {sorted(i for i, e in self._ready.items() if e.is_set())})") from None
        log.info("workers_started", workers=self.layout.count, pids=self.pids)

    async def _spawn(self, index: int, listeners: list[tuple[str, str, int]]
                     ) -> asyncio.subprocess.Process:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (_ROOT, env.get("PYTHONPATH", "")) if p)
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "broker.node.worker", stdin=asyncio.subprocess.PIPE, env=env,
            start_new_session=True)  # a ^C reaches the node, which stops its workers in order
        assert process.stdin is not None
        process.stdin.write(pickle.dumps({
            "config": self.config, "index": index, "count": self.layout.count,
            "directory": self.directory, "listeners": listeners, "parent": os.getpid()}))
        await process.stdin.drain()
        process.stdin.close()
        return process

    async def _supervise(self, index: int, listeners: list[tuple[str, str, int]]) -> None:
        while not self._stopping:
            process = self._processes[index] = await self._spawn(index, listeners)
            code = await process.wait()
            self.hand_off.drop(index)
            if self._stopping:
                return
            self._ready[index].clear()
            log.error("worker_exited", worker=index, pid=process.pid, returncode=code,
                      restart_in_s=RESTART_DELAY_S)
            await asyncio.sleep(RESTART_DELAY_S)

    async def _subscribe(self, peer: ShardPeer, index: int) -> bool:
        """A worker follows the metadata: the current image now, then each change in
        order (the tap below); both go out as events on the same connection."""
        peer.name = f"worker-{index}"
        peer.send_event(("snapshot", self._snapshot()))
        self._subscribers.append(peer)
        return True

    def tap(self, change: tuple[Any, ...]) -> None:
        """MetadataPublisher.taps: what the node applied, to every worker."""
        if not self._subscribers:
            return
        if change[0] == "snapshot":
            from broker.metadata.snapshot import encode_snapshot

            change = ("snapshot", encode_snapshot(change[1]))
        for peer in list(self._subscribers):
            try:
                peer.send_event(change)
            except (ConnectionError, ValueError) as exc:
                log.warning("worker_metadata_not_sent", worker=peer.name, error=str(exc))

    async def _worker_ready(self, peer: ShardPeer, index: int) -> bool:
        log.info("worker_ready", worker=index)
        self.hand_off.connect(index, hand_off_path(self.directory, index))
        self._ready[index].set()
        return True

    def _peer_closed(self, peer: ShardPeer) -> None:
        if peer in self._subscribers:
            self._subscribers.remove(peer)

    async def stop(self) -> None:
        self._stopping = True
        for process in self._processes.values():
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    process.send_signal(signal.SIGTERM)
        for index, process in self._processes.items():
            try:
                await asyncio.wait_for(process.wait(), WORKER_STOP_TIMEOUT_S)
            except TimeoutError:
                log.warning("worker_killed", worker=index, pid=process.pid)
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()
        for task in self._supervisors:
            task.cancel()
        self.hand_off.close()
        await self.peers.close()
        await self.server.stop()
        shutil.rmtree(self.directory, ignore_errors=True)


def share_quota_usage(quotas: Quotas, layout: ShardLayout,
                      channel_of: Callable[[int], ShardChannelClient | None],
                      now_ms: Callable[[], int],
                      ) -> tuple[SharedQuotaUsage, Callable[..., Awaitable[None]]]:
    """This process's client quota counts told to the broker's other processes
    (broker/quotas/shared.py), and the channel op ("quota_usage") that takes theirs."""
    loop = asyncio.get_running_loop()

    def send(usage: Usage) -> None:
        for index in range(layout.count):
            channel = None if index == layout.index else channel_of(index)
            if channel is None:
                continue
            try:
                future = channel.call("quota_usage", usage)
            except (ConnectionError, ValueError):
                continue  # a worker being replaced: it starts counting afresh
            future.add_done_callback(_retrieved)

    shared = SharedQuotaUsage(quotas, schedule=loop.call_later, send=send)

    async def counted_elsewhere(peer: ShardPeer, usage: Usage) -> None:
        shared.counted_elsewhere(usage, now_ms())

    return shared, counted_elsewhere


def _retrieved(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()
