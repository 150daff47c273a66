"""Client for the node runner's line protocol (raft/tools/node.py)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from broker.util.tasks import ServiceTasks


class NotLeader(Exception):
    def __init__(self, leader_id: int, epoch: int) -> None:
        super().__init__(f"not leader (leader {leader_id}, epoch {epoch})")
        self.leader_id = leader_id
        self.epoch = epoch


class NodeClient:
    """One pipelined connection; answers come back in request order."""

    def __init__(self, port: int, host: str = "127.0.0.1") -> None:
        self.host = host
        self.port = port
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._lock = asyncio.Lock()
        self._waiters: asyncio.Queue[asyncio.Future[bytes]] = asyncio.Queue()
        self._tasks = ServiceTasks("raft_client")  # the read loop

    async def connect(self) -> None:
        self._reader, self._writer = await asyncio.open_connection(
            self.host, self.port, limit=1 << 22)
        self._tasks.start_soon(self._read_loop, name="raft_client_read")

    async def _read_loop(self) -> None:
        assert self._reader is not None
        try:
            while True:
                line = await self._reader.readline()
                fut = await self._waiters.get()
                if not line:
                    fut.set_exception(ConnectionResetError("closed"))
                    break
                fut.set_result(line)
        finally:
            while not self._waiters.empty():
                f = self._waiters.get_nowait()
                if not f.done():
                    f.set_exception(ConnectionResetError("closed"))

    async def _call(self, line: bytes) -> bytes:
        if self._writer is None:
            await self.connect()
        assert self._writer is not None
        fut: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._waiters.put_nowait(fut)
        self._writer.write(line)
        return await fut

    async def append(self, record: bytes) -> int:
        ans = (await self._call(b"APPEND " + record.hex().encode() + b"\n")).split()
        if ans[0] == b"OK":
            return int(ans[1])
        if len(ans) >= 4 and ans[1] == b"NOT_LEADER":
            raise NotLeader(int(ans[2]), int(ans[3]))
        raise RuntimeError(b" ".join(ans).decode())

    async def state(self) -> dict[str, Any]:
        st: dict[str, Any] = json.loads(await self._call(b"STATE\n"))
        return st

    async def read(self, start: int, count: int) -> list[tuple[int, bytes]]:
        rows = json.loads(await self._call(f"READ {start} {count}\n".encode()))
        return [(int(o), bytes.fromhex(h)) for o, h in rows]

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        await self._tasks.close()
