"""`skiff server start FILE` and `skiff dev`: run a node until SIGTERM or SIGINT."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
from pathlib import Path
from typing import Any

import structlog

from broker.cli.storage import StorageError, format_storage, random_kafka_uuid, read_meta_properties
from broker.config import ConfigError, NodeConfig, load_config
from broker.logsetup import configure_logging
from raft import eventloop

log = structlog.get_logger(__name__)


def add_parsers(sub: Any) -> None:
    server = sub.add_parser("server", help="run a node from a Kafka-style properties file")
    ssub = server.add_subparsers(dest="server_command", metavar="COMMAND")
    start = ssub.add_parser("start", help="start a node")
    start.add_argument("config", help="the node's properties file")
    start.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                       help="set a property, over the file (repeatable)")
    server.set_defaults(handler=run_server)

    dev = sub.add_parser(
        "dev", help="one combined broker+controller on 127.0.0.1:9092, formatted on first start"
    )
    dev.add_argument("--data", default="./skiff-data", help="data directory (default ./skiff-data)")
    dev.add_argument("--port", type=int, default=9092, help="client listener port (9092)")
    dev.add_argument("--controller-port", type=int, default=9093,
                     help="controller listener port (9093)")
    dev.add_argument("--admin-port", type=int, default=9094, help="gRPC admin port (9094)")
    dev.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
    dev.set_defaults(handler=run_dev)


def _warn(message: str) -> None:
    log.warning("config_warning", message=message)


def run_server(args: argparse.Namespace) -> int:
    if args.server_command != "start":
        print("usage: skiff server start FILE [--override KEY=VALUE ...]", file=sys.stderr)
        return 2
    try:
        cfg = load_config(args.config, args.override, os.environ, warn=_warn)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return _run(cfg)


def run_dev(args: argparse.Namespace) -> int:
    from broker.node import data_dir_overrides

    data = Path(args.data).resolve()
    props = data_dir_overrides(data, args.port, args.controller_port)
    props["admin.listeners"] = f"127.0.0.1:{args.admin_port}"
    try:
        overrides = dict(props)
        for item in args.override:
            key, _, value = item.partition("=")
            overrides[key.strip()] = value
        cfg = load_config(None, overrides, os.environ, warn=_warn)
        if not any(d.is_dir() and read_meta_properties(d) is not None
                   for d in cfg.all_directories()):
            format_storage(cfg, random_kafka_uuid(), ignore_formatted=True)
    except (ConfigError, StorageError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return _run(cfg)


def _run(cfg: NodeConfig) -> int:
    from broker.security.sasl_config import check_sasl
    from broker.security.tls import check_tls

    try:
        check_tls(cfg)  # every key and trust store loads, before anything starts
        check_sasl(cfg)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    configure_logging(cfg["log.format"], cfg["log.level"])
    for warning in cfg.warnings:
        _warn(warning)
    try:
        eventloop.run(_serve(cfg))
    except StorageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


def _dump_tasks() -> None:
    """SIGUSR1: every asyncio task's stack to stderr, to see what a stuck node waits on."""
    for task in asyncio.all_tasks():
        print(f"--- task {task.get_name()}", file=sys.stderr)
        task.print_stack(limit=12, file=sys.stderr)
    sys.stderr.flush()


async def _serve(cfg: NodeConfig) -> None:
    from broker.node import Node

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    loop.add_signal_handler(signal.SIGUSR1, _dump_tasks)
    node = Node(cfg)
    # Startup waits for the quorum and for unfencing; a signal meanwhile must still stop
    # the node, so start() races the stop event instead of blocking it.
    starting = asyncio.create_task(node.start())
    stopping = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if starting.done():
            starting.result()  # a startup failure surfaces here
            log.info("skiff_ready", listeners=[str(lst) for lst in cfg.listeners])
            await stopping
        else:
            log.info("stop_requested_during_startup")
            starting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await starting
    finally:
        stopping.cancel()
        await node.stop()
