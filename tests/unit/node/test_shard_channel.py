"""broker/node/shard_channel.py: calls answered in any order, events in order, a frame over
the cap refused before it is read, a closed channel failing its calls."""

from __future__ import annotations

import asyncio
import shutil
import struct
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.node.shard_channel import (
    ChannelClosed,
    ShardCallFailed,
    ShardChannelClient,
    ShardChannelServer,
    ShardPeer,
)

_directories: list[str] = []


@pytest.fixture(autouse=True)
def _remove_socket_directories() -> Iterator[None]:
    yield
    while _directories:
        shutil.rmtree(_directories.pop(), ignore_errors=True)


def _path() -> str:
    # not tmp_path: a Unix socket's path must stay under 108 bytes
    _directories.append(tempfile.mkdtemp(prefix="skiff-chan-"))
    return str(Path(_directories[-1]) / "s.sock")


async def _pair(ops: dict[str, Any], **kw: Any) -> tuple[ShardChannelServer, ShardChannelClient,
                                                         list[Any]]:
    path = _path()
    server = ShardChannelServer(path, ops, **kw)
    await server.start()
    events: list[Any] = []
    client = await ShardChannelClient.connect(path, on_event=events.append)
    return server, client, events


def test_a_long_call_does_not_hold_up_the_calls_behind_it() -> None:
    async def main() -> None:
        release = asyncio.Event()
        started: list[str] = []

        async def slow(peer: ShardPeer) -> str:
            started.append("slow")
            await release.wait()
            return "slow"

        async def fast(peer: ShardPeer, x: int) -> int:
            started.append("fast")
            return x * 2

        server, client, _ = await _pair({"slow": slow, "fast": fast})
        first = client.call("slow")
        assert await client.call("fast", 21) == 42
        assert not first.done() and started == ["slow", "fast"]  # started in order
        release.set()
        assert await first == "slow"
        await client.close()
        await server.stop()

    asyncio.run(main())


def test_events_arrive_in_order_and_a_failing_op_fails_its_call_only() -> None:
    async def main() -> None:
        async def subscribe(peer: ShardPeer, n: int) -> bool:
            for i in range(n):
                peer.send_event(("e", i))
            return True

        async def broken(peer: ShardPeer) -> None:
            raise RuntimeError("no")

        server, client, events = await _pair({"sub": subscribe, "broken": broken})
        assert await client.call("sub", 50)
        assert events == [("e", i) for i in range(50)]
        with pytest.raises(ShardCallFailed, match="RuntimeError: no"):
            await client.call("broken")
        with pytest.raises(ShardCallFailed, match="no worker channel op"):
            await client.call("missing")
        assert await client.call("sub", 1)
        await client.close()
        await server.stop()

    asyncio.run(main())


def test_a_frame_over_the_cap_closes_the_connection_before_it_is_read() -> None:
    async def main() -> None:
        closed: list[ShardPeer] = []

        async def echo(peer: ShardPeer, x: Any) -> Any:
            return x

        path = _path()
        server = ShardChannelServer(path, {"echo": echo}, on_closed=closed.append,
                                    max_frame=1024)
        await server.start()
        reader, writer = await asyncio.open_unix_connection(path)
        writer.write(struct.pack(">IQBII", 1 << 30, 1, 1, 10, 0))  # claims 1 GiB, sends none
        await writer.drain()
        assert await asyncio.wait_for(reader.read(), 5) == b""  # closed, nothing answered
        assert len(closed) == 1
        client = await ShardChannelClient.connect(path)  # the server still serves others
        assert await client.call("echo", b"x" * 100) == b"x" * 100
        assert await client.call("echo", 5) == 5
        await client.close()
        await server.stop()

    asyncio.run(main())


def test_calls_of_a_gone_worker_fail_as_closed() -> None:
    async def main() -> None:
        async def never(peer: ShardPeer) -> None:
            await asyncio.Event().wait()

        async def ping(peer: ShardPeer) -> bool:
            return True

        server, client, _ = await _pair({"never": never, "ping": ping})
        assert await client.call("ping")
        pending = client.call("never")
        await server.stop()
        with pytest.raises(ChannelClosed):
            await asyncio.wait_for(pending, 5)
        await asyncio.wait_for(client.closed, 5)
        with pytest.raises(ChannelClosed):
            await client.call("never")

    asyncio.run(main())


def test_large_byte_strings_cross_out_of_band_and_in_order() -> None:
    """Records sent as PickleBuffers arrive whole (in frames bigger than the scratch
    buffer, split over many reads) and in the order sent, with small frames between."""
    import pickle

    async def main() -> None:
        async def echo(peer: ShardPeer, *args: Any) -> Any:
            return [bytes(a) if isinstance(a, memoryview) else a for a in args]

        server, client, _ = await _pair({"echo": echo})
        payloads = [bytes([i % 251]) * size for i, size in
                    enumerate([10, 70_000, 300_000, 5, 1_000_000, 256 * 1024, 0])]
        futures = [client.call("echo", i, pickle.PickleBuffer(memoryview(p)), "tail")
                   for i, p in enumerate(payloads)]
        for i, (future, p) in enumerate(zip(futures, payloads, strict=True)):
            assert await future == [i, p, "tail"]
        await client.close()
        await server.stop()

    asyncio.run(main())
