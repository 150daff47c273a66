"""A standalone quorum node for tests and benchmarks.

  python -m raft.tools.node --node-id 1 --voters 1@127.0.0.1:P1,2@...,3@... \\
      --dir D --client-port C [--set controller.quorum.append.linger.ms=5 ...]

Speaks the Raft RPCs (Kafka framing, kio messages) on its voter port, and a
line protocol for clients on --client-port:
  APPEND <hex>        -> OK <offset> | ERR NOT_LEADER <leader> <epoch> | ERR <why>
  STATE               -> one JSON line (role, epoch, leader, hw, log, counters)
  READ <index> <max>  -> one JSON line: [[offset, hex], ...] of committed records
The state machine is the list of committed (offset, record); its snapshot is
that list, length-prefixed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import json
import logging
import signal
import struct
import sys
from random import Random
from typing import Any

import structlog

from broker.protocol.transport import serve
from raft import eventloop
from raft.config import RaftConfig
from raft.core import NotLeaderError
from raft.driver import RaftDriver
from raft.kafka_messages import WireError, error_response
from raft.messages import Batch, SnapshotId
from raft.stores.file import FileLogStore, FileQuorumStateStore

MAX_LINE = 1 << 20


class ListStateMachine:
    def __init__(self) -> None:
        self.entries: list[tuple[int, bytes]] = []

    def on_commit(self, batches: list[Batch]) -> None:
        for b in batches:
            if b.control:
                continue
            for i, r in enumerate(b.records):
                self.entries.append((b.base_offset + i, r))

    def on_snapshot_load(self, snapshot_id: SnapshotId, data: bytes) -> None:
        entries = []
        pos = 0
        while pos < len(data):
            if pos + 12 > len(data):
                raise ValueError("truncated snapshot")
            off, n = struct.unpack_from(">qi", data, pos)
            pos += 12
            if n < 0 or pos + n > len(data):
                raise ValueError("bad record length in snapshot")
            entries.append((off, data[pos : pos + n]))
            pos += n
        self.entries = entries

    def on_leader_change(self, leader_id: int, epoch: int) -> None:
        pass

    def snapshot(self, end_offset: int) -> bytes:
        return b"".join(struct.pack(">qi", o, len(r)) + r for o, r in self.entries
                        if o < end_offset)


async def client_session(driver: RaftDriver, sm: ListStateMachine,
                         reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    inflight: asyncio.Queue[asyncio.Future[bytes] | None] = asyncio.Queue()

    async def answer(line: bytes) -> bytes:
        parts = line.split()
        if not parts:
            return b"ERR empty\n"
        cmd = parts[0]
        if cmd == b"APPEND" and len(parts) == 2:
            try:
                off = await driver.append([bytes.fromhex(parts[1].decode())])
            except NotLeaderError as e:
                return f"ERR NOT_LEADER {e.leader_id} {e.epoch}\n".encode()
            except ValueError as e:
                return f"ERR {e}\n".encode()
            return f"OK {off}\n".encode()
        if cmd == b"STATE":
            st = {
                "node": driver.config.node_id, "role": type(driver.core.role).__name__,
                "ready": driver.leader_ready,
                "epoch": driver.core.epoch, "leader": driver.core.leader_id,
                "hw": driver.high_watermark, "log_start": driver.log.log_start_offset,
                "log_end": driver.log.end_offset, "applied": len(sm.entries),
                "snapshots_loaded": driver.stats.snapshots_loaded,
                "snapshots_created": driver.stats.snapshots_created,
            }
            return json.dumps(st).encode() + b"\n"
        if cmd == b"READ" and len(parts) == 3:
            start, count = int(parts[1]), min(int(parts[2]), 100_000)
            rows = [[o, r.hex()] for o, r in sm.entries[start : start + count]]
            return json.dumps(rows).encode() + b"\n"
        return b"ERR unknown command\n"

    async def writer_loop() -> None:
        while True:
            fut = await inflight.get()
            if fut is None:
                return
            writer.write(await fut)
            await writer.drain()

    wtask = asyncio.create_task(writer_loop())
    try:
        while True:
            line = await reader.readline()
            if not line or len(line) > MAX_LINE:
                break
            inflight.put_nowait(asyncio.ensure_future(answer(line)))
    except (OSError, asyncio.LimitOverrunError, ValueError):
        pass
    finally:
        inflight.put_nowait(None)
        with contextlib.suppress(OSError, ConnectionError):
            await wtask
        writer.close()


def open_log_store(spec: str, log_dir: str) -> Any:
    """`file` (raft's own simple store) or `module:Class` taking the log dir, e.g.
    broker.metadata.log_store:MetadataLogStore (named, not imported: raft/ never
    depends on broker/)."""
    if spec == "file":
        return FileLogStore(log_dir)
    module, _, cls = spec.partition(":")
    return getattr(importlib.import_module(module), cls)(log_dir)


async def run(args: argparse.Namespace) -> None:
    props = {
        "node.id": str(args.node_id),
        "controller.quorum.voters": args.voters,
        "metadata.log.dir": args.dir,
    }
    for kv in args.set or []:
        k, _, v = kv.partition("=")
        props[k] = v
    config = RaftConfig.from_properties(props)
    log_store = open_log_store(args.log_store, config.log_dir)
    driver = RaftDriver(config, log_store, FileQuorumStateStore(config.log_dir),
                        rng=Random(args.seed) if args.seed is not None else None)
    sm = ListStateMachine()
    driver.register(sm)
    driver.snapshot_provider = sm.snapshot
    await driver.start()

    def on_error(api_key: int, version: int, e: BaseException) -> Any:
        code = e.error if isinstance(e, WireError) else None
        from kio.schema.errors import ErrorCode
        return error_response(api_key, version, code or ErrorCode.unknown_server_error)

    servers = []
    me = config.voters.get(config.node_id)
    if me is not None:
        servers.append(await serve(driver.handle_request, me.host, me.port, on_error))
    servers.append(await asyncio.start_server(
        lambda r, w: client_session(driver, sm, r, w), "127.0.0.1", args.client_port,
        limit=MAX_LINE))
    print(f"ready node={config.node_id}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        for s in servers:
            s.close()
        await driver.stop()
        log_store.close()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--node-id", type=int, required=True)
    ap.add_argument("--voters", required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--client-port", type=int, required=True)
    ap.add_argument("--seed", type=int)
    ap.add_argument("--log-store", default="file",
                    help="file, or module:Class, e.g. broker.metadata.log_store:MetadataLogStore")
    ap.add_argument("--set", action="append", help="KEY=VALUE config property")
    ap.add_argument("--log-level", default="WARNING")
    args = ap.parse_args(argv)
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(
            getattr(logging, args.log_level.upper(), logging.WARNING)),
        logger_factory=structlog.WriteLoggerFactory(sys.stderr),
    )
    with contextlib.suppress(KeyboardInterrupt):
        eventloop.run(run(args))


if __name__ == "__main__":
    main()
