"""`skiff server start FILE` and `skiff dev`: run a node until SIGTERM or SIGINT."""

from __future__ import annotations

import argparse
import asyncio
import linecache
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

import anyio
import structlog

from broker.config import ConfigError, NodeConfig, env_key, load_config
from broker.logsetup import configure_logging
from broker.metadata.storage import (
    StorageError,
    format_storage,
    parse_initial_controllers,
    read_meta_properties,
)
from broker.node.shards import WORKERS_KEY
from broker.protocol.kafka_uuid import random_kafka_uuid
from raft import eventloop

log = structlog.get_logger(__name__)

# Read by `server start --auto-format` (as CLUSTER_ID is by the apache/kafka image); not a
# node property, so broker.config leaves it out of the SKIFF_<KEY> mapping.
ENV_CLUSTER_ID = "SKIFF_CLUSTER_ID"
# Read by --auto-format too: the KIP-853 initial voter set (`skiff kube cluster-secret`).
ENV_INITIAL_CONTROLLERS = "SKIFF_INITIAL_CONTROLLERS"
# `skiff dev` (--workers auto): a worker process per two CPUs, up to this many. A worker
# per CPU left nothing for the clients and the kernel on the same host: on 2 vCPUs two
# workers took 1.9x the CPU per GB of one process and gave 0.78x its replayed produce
# (docs/benchmarks.md, "How many workers skiff dev starts").
DEV_MAX_WORKERS = 4
DEV_CPUS_PER_WORKER = 2


def add_parsers(sub: Any) -> None:
    server = sub.add_parser("server", help="run a node from a Kafka-style properties file")
    ssub = server.add_subparsers(dest="server_command", metavar="COMMAND")
    start = ssub.add_parser("start", help="start a node")
    start.add_argument("config", help="the node's properties file")
    start.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                       help="set a property, over the file (repeatable)")
    start.add_argument("--auto-format", action="store_true",
                       help="format unformatted storage directories first (first start), with "
                            f"--cluster-id, else ${ENV_CLUSTER_ID}, else a random id when the "
                            "node is a single combined node that is its own only voter")
    start.add_argument("--cluster-id", default=None,
                       help=f"the cluster id --auto-format writes (default ${ENV_CLUSTER_ID})")
    start.add_argument("--initial-controllers", default=None, metavar="ID@HOST:PORT:DIRID,...",
                       help="KIP-853, for --auto-format of a controller with "
                            "controller.quorum.bootstrap.servers: the initial voter set "
                            f"(default ${ENV_INITIAL_CONTROLLERS}); a controller it does not "
                            "list is formatted to join later (skiff quorum add-controller)")
    start.add_argument("--add-scram", action="append", default=[], metavar="SCRAM",
                       help="for --auto-format: a SCRAM credential of the bootstrap metadata, "
                            "as `storage format --add-scram` (repeatable)")
    start.add_argument("--add-scram-file", action="append", default=[], metavar="FILE",
                       help="for --auto-format: --add-scram values, one a line (blank lines "
                            "and # comments skipped), e.g. a mounted Secret")
    server.set_defaults(handler=run_server)

    dev = sub.add_parser(
        "dev", help="one combined broker+controller on 127.0.0.1:9092, formatted on first start"
    )
    dev.add_argument("--data", default="./skiff-data", help="data directory (default ./skiff-data)")
    dev.add_argument("--port", type=int, default=9092, help="client listener port (9092)")
    dev.add_argument("--controller-port", type=int, default=9093,
                     help="controller listener port (9093)")
    dev.add_argument("--admin-port", type=int, default=9094, help="gRPC admin port (9094)")
    dev.add_argument("--metrics-port", type=int, default=9095,
                     help="Prometheus metrics port (9095; 0: off)")
    dev.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
    dev.add_argument("--workers", default=None, metavar="N|auto",
                     help="the broker's processes, skiff.broker.workers (default auto: one "
                          f"per {DEV_CPUS_PER_WORKER} CPUs this process may run on, at least "
                          f"1, at most {DEV_MAX_WORKERS}, unless the key is set by --override "
                          "or SKIFF_SKIFF_BROKER_WORKERS)")
    dev.add_argument("--release-version", metavar="VERSION", default=None,
                     help="the metadata.version the first start formats at, as `storage "
                          "format --release-version` (default the latest, 4.4)")
    dev.set_defaults(handler=run_dev)


def _warn(message: str) -> None:
    log.warning("config_warning", message=message)


def _warn_later(message: str) -> None:
    """load_config's warnings are kept in NodeConfig.warnings; _run logs them once logging
    has the node's format (logging them here as well printed each twice)."""


def run_server(args: argparse.Namespace) -> int:
    if args.server_command != "start":
        print("usage: skiff server start FILE [--override KEY=VALUE ...]", file=sys.stderr)
        return 2
    try:
        cfg = load_config(args.config, args.override, os.environ, warn=_warn_later)
        if args.auto_format:
            configure_logging(cfg["log.format"], cfg["log.level"])  # its line in the node's format
            scram = list(args.add_scram)
            for path in args.add_scram_file:
                scram += read_scram_file(path)
            auto_format(cfg, args.cluster_id or os.environ.get(ENV_CLUSTER_ID) or None,
                        initial_controllers=args.initial_controllers
                        or os.environ.get(ENV_INITIAL_CONTROLLERS) or None,
                        add_scram=scram)
    except (ConfigError, StorageError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return _run(cfg)


def read_scram_file(path: str) -> list[str]:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise StorageError(f"--add-scram-file {path}: {exc.strerror or exc}") from None
    return [line.strip() for line in text.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def auto_format(cfg: NodeConfig, cluster_id: str | None, *,
                initial_controllers: str | None = None, add_scram: list[str] | None = None
                ) -> None:
    """Format the node's unformatted directories (a container's first start). Without a
    cluster id only a single combined node that is its own only voter may pick a random one:
    nodes of a cluster must share theirs, so they are refused with a clear message.

    `initial_controllers` (KIP-853) matters only to a controller that finds the quorum
    through controller.quorum.bootstrap.servers: one it lists is formatted with that voter
    set, any other to join later; a broker-only node or static voters ignore it.
    `add_scram`: SCRAM credentials of the bootstrap metadata (the first active controller
    writes them)."""
    unformatted = [d for d in cfg.all_directories()
                   if not (d.is_dir() and read_meta_properties(d) is not None)]
    if not unformatted:
        return
    if cluster_id is None:
        standalone = ("controller" in cfg.process_roles and "broker" in cfg.process_roles
                      and [v.node_id for v in cfg.voters] == [cfg.node_id])
        if not standalone:
            raise StorageError(
                f"{', '.join(map(str, unformatted))} not formatted and no cluster id: set "
                f"{ENV_CLUSTER_ID} (the same on every node; `skiff storage random-uuid` makes "
                "one) or --cluster-id")
        cluster_id = random_kafka_uuid()
    dynamic = cfg.is_controller and not cfg.voters and initial_controllers is not None
    listed = dynamic and any(
        node_id == cfg.node_id for node_id, *_ in parse_initial_controllers(
            initial_controllers or ""))
    log.info("formatting_storage", directories=[str(d) for d in unformatted],
             cluster_id=cluster_id, scram_credentials=len(add_scram or ()),
             initial_controllers=initial_controllers if listed else None,
             joins_quorum_later=dynamic and not listed)
    format_storage(cfg, cluster_id, ignore_formatted=True, add_scram=add_scram or (),
                   initial_controllers=initial_controllers if listed else None,
                   no_initial_controllers=dynamic and not listed)


def dev_workers(given: str | None, environ: Mapping[str, str],
                overrides: Sequence[str] = ()) -> str | None:
    """skiff.broker.workers of `skiff dev`: --workers (a count, or `auto`), else the key's
    own setting when given (--override, SKIFF_SKIFF_BROKER_WORKERS: None), else `auto`:
    one worker per DEV_CPUS_PER_WORKER CPUs this process may run on (os.sched_getaffinity,
    so taskset counts), at least 1, at most DEV_MAX_WORKERS."""
    if given is None:
        if env_key(WORKERS_KEY) in environ or any(
                item.partition("=")[0].strip() == WORKERS_KEY for item in overrides):
            return None
        given = "auto"
    if given == "auto":
        cpus = len(os.sched_getaffinity(0))
        return str(max(1, min(DEV_MAX_WORKERS, cpus // DEV_CPUS_PER_WORKER)))
    return given  # the config checks it (at least 1, at most 4 per core)


def run_dev(args: argparse.Namespace) -> int:
    from broker.node import data_dir_overrides

    data = Path(args.data).resolve()
    props = data_dir_overrides(data, args.port, args.controller_port)
    props["admin.listeners"] = f"127.0.0.1:{args.admin_port}"
    props["metrics.listeners"] = f"127.0.0.1:{args.metrics_port}" if args.metrics_port else ""
    workers = dev_workers(args.workers, os.environ, args.override)
    if workers is not None:
        props[WORKERS_KEY] = workers
    try:
        overrides = dict(props)
        for item in args.override:
            key, _, value = item.partition("=")
            overrides[key.strip()] = value
        cfg = load_config(None, overrides, os.environ, warn=_warn_later)
        if not any(d.is_dir() and read_meta_properties(d) is not None
                   for d in cfg.all_directories()):
            format_storage(cfg, random_kafka_uuid(), ignore_formatted=True,
                           release_version=args.release_version)
        elif args.release_version is not None:
            raise StorageError(
                f"{data} is already formatted: --release-version applies to the first start "
                "only (change levels with `skiff features upgrade`)")
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
    from broker.util.gc_pauses import GC_PAUSES

    GC_PAUSES.install()
    for warning in cfg.warnings:
        _warn(warning)
    from broker.node import RegistrationTimedOut

    try:
        eventloop.run(_serve(cfg))
    except RegistrationTimedOut as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except StorageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


def _dump_tasks() -> None:
    """SIGUSR1: every asyncio task's stack to stderr, to see what a stuck node waits on."""
    dump_tasks(sys.stderr)


def dump_tasks(out: TextIO, limit: int = 12) -> int:
    """Every task's stack, formatted here rather than by Task.print_stack: under uvloop a
    task may wait in a Cython frame (uvloop/server.pyx) whose f_lineno is None, and
    print_stack's linecache lookup then raises TypeError and prints nothing. Returns how
    many tasks were written."""
    tasks = sorted(asyncio.all_tasks(), key=lambda t: t.get_name())
    for task in tasks:
        print(f"--- task {task.get_name()} ({'done' if task.done() else 'pending'})",
              file=out)
        try:
            frames = task.get_stack(limit=limit)
        except Exception as exc:  # a loop's own task type may not give its stack
            print(f"  (no stack: {exc!r})", file=out)
            continue
        for frame in frames:
            code = frame.f_code
            lineno = frame.f_lineno
            print(f'  File "{code.co_filename}", line {lineno if lineno is not None else "?"}'
                  f", in {code.co_name}", file=out)
            if isinstance(lineno, int):
                text = linecache.getline(code.co_filename, lineno, frame.f_globals).strip()
                if text:
                    print(f"    {text}", file=out)
    out.flush()
    return len(tasks)


async def _serve(cfg: NodeConfig) -> None:
    from broker.node import Node

    stop = asyncio.Event()
    # Startup waits for the quorum and for unfencing; a signal meanwhile must still stop
    # the node, so it cancels the startup's scope (a no-op once started).
    starting = anyio.CancelScope()

    def stop_requested() -> None:
        stop.set()
        starting.cancel()

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop_requested)
    loop.add_signal_handler(signal.SIGUSR1, _dump_tasks)
    node = Node(cfg)
    try:
        with starting:
            await node.start()  # a startup failure surfaces here
        if starting.cancelled_caught:
            log.info("stop_requested_during_startup")
        else:
            log.info("skiff_ready", listeners=[str(lst) for lst in cfg.listeners])
            await stop.wait()
    finally:
        await node.stop()
