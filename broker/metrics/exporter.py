"""The metrics endpoint: `metrics.listeners` (default 127.0.0.1:9095, loopback only).

prometheus_client serves HTTP on its own thread (one thread per scrape) and negotiates the
format from the Accept header: the Prometheus text format, or OpenMetrics for scrapers that
ask for `application/openmetrics-text`. The node's state belongs to its event loop, so a
scrape does not read it from the HTTP thread: `LoopCollector` hands the collection to the
loop (`call_soon_threadsafe`) and waits for the families, which are then encoded on the HTTP
thread. The data path never waits for a scrape; a scrape waits for one turn of the loop.
Process metrics (CPU, RSS, open files, GC) are prometheus_client's own collectors.

A listener that cannot bind stops the node's start with a message naming the key; an empty
`metrics.listeners` turns the endpoint (and the counters on the data path) off.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import threading
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

import structlog
from prometheus_client import start_http_server
from prometheus_client.core import Metric
from prometheus_client.registry import Collector, CollectorRegistry

from broker.config.listeners import parse_host_ports

log = structlog.get_logger(__name__)

METRICS_LISTENERS_KEY = "metrics.listeners"
DEFAULT_METRICS_LISTENER = "127.0.0.1:9095"
SCRAPE_TIMEOUT_S = 10.0


def parse_metrics_listeners(value: str | Sequence[str] | None) -> list[tuple[str, int]]:
    """`metrics.listeners`: comma-separated `host:port` (`NAME://host:port` accepted; an
    empty host is every interface); empty: no endpoint. None: the default."""
    if value is None:
        value = [DEFAULT_METRICS_LISTENER]
    return [(host.strip("[]") or "0.0.0.0", port)
            for host, port in parse_host_ports(METRICS_LISTENERS_KEY, value)]


CollectOnLoop = Callable[[], list[Metric] | Awaitable[list[Metric]]]


class LoopCollector(Collector):
    """Runs `collect_on_loop` on `loop` and returns its families to the calling thread;
    when it returns an awaitable (a broker of several workers asks them), the scrape waits
    for it as a task of the loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop,
                 collect_on_loop: CollectOnLoop,
                 timeout_s: float = SCRAPE_TIMEOUT_S) -> None:
        self.loop = loop
        self.collect_on_loop = collect_on_loop
        self.timeout_s = timeout_s
        self.loop_thread = threading.get_ident()  # made on the loop's own thread

    def collect(self) -> Iterable[Metric]:
        if threading.get_ident() == self.loop_thread:
            # called on the loop itself (tests, in-process)
            families = self.collect_on_loop()
            if inspect.isawaitable(families):
                raise RuntimeError("an awaitable collection cannot be waited for on its loop")
            return families
        done: concurrent.futures.Future[list[Metric]] = concurrent.futures.Future()

        def finished(task: asyncio.Future[list[Metric]]) -> None:
            if task.cancelled():
                done.cancel()
            elif (exc := task.exception()) is not None:
                done.set_exception(exc)
            else:
                done.set_result(task.result())

        def run() -> None:
            if not done.set_running_or_notify_cancel():
                return
            try:
                families = self.collect_on_loop()
            except BaseException as exc:
                done.set_exception(exc)
                return
            if inspect.isawaitable(families):
                asyncio.ensure_future(families).add_done_callback(finished)
            else:
                done.set_result(families)

        self.loop.call_soon_threadsafe(run)
        try:
            return done.result(self.timeout_s)
        except concurrent.futures.TimeoutError as exc:
            done.cancel()
            raise TimeoutError(
                f"the event loop did not answer a scrape in {self.timeout_s}s") from exc


def build_registry(collector: Collector, *, process: bool = True) -> CollectorRegistry:
    """A registry of our own (never the global one): the node's families and, with
    `process`, prometheus_client's process, platform and GC collectors and the GC pauses
    (broker/util/gc_pauses.py)."""
    from prometheus_client import GC_COLLECTOR, PLATFORM_COLLECTOR, PROCESS_COLLECTOR

    from broker.util.gc_pauses import GC_PAUSES

    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    if process:
        for default in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR, GC_PAUSES):
            registry.register(default)
    return registry


class MetricsServer:
    """The HTTP endpoints of one node; `addresses` are the bound (host, port)s."""

    def __init__(self, listeners: Sequence[tuple[str, int]],
                 collect_on_loop: CollectOnLoop, *, process: bool = True) -> None:
        """`process`: add prometheus_client's process collectors to the registry (False
        when `collect_on_loop` gathers them itself, from every process of a broker)."""
        self.listeners = list(listeners)
        self.collect_on_loop = collect_on_loop
        self.process = process
        self.addresses: list[tuple[str, int]] = []
        self._servers: list[Any] = []

    def start(self) -> None:
        """Binds every listener now (the caller is on the node's loop); a port already in
        use raises OSError naming the listener and the key."""
        if not self.listeners:
            log.info("metrics_disabled", reason=f"{METRICS_LISTENERS_KEY} is empty")
            return
        registry = build_registry(LoopCollector(asyncio.get_running_loop(),
                                                self.collect_on_loop), process=self.process)
        try:
            for host, port in self.listeners:
                try:
                    server, _thread = start_http_server(port, addr=host, registry=registry)
                except OSError as exc:
                    raise OSError(
                        exc.errno, f"cannot bind the metrics listener {host}:{port} "
                        f"({METRICS_LISTENERS_KEY}): {exc.strerror}; give each node on a host "
                        f"its own port, or set {METRICS_LISTENERS_KEY}= (empty) to turn the "
                        "endpoint off") from exc
                self._servers.append(server)
                bound = server.server_address
                self.addresses.append((host, int(bound[1])))
        except BaseException:
            self._close_all()
            raise
        log.info("metrics_listening",
                 addresses=[f"http://{h}:{p}/metrics" for h, p in self.addresses])

    def _close_all(self) -> None:
        for server in self._servers:
            server.shutdown()
            server.server_close()
        self._servers = []

    async def stop(self) -> None:
        servers, self._servers = self._servers, []
        for server in servers:
            # shutdown() waits for serve_forever's poll (0.5 s): off the loop, so a scrape
            # waiting for the loop cannot deadlock it
            await asyncio.to_thread(server.shutdown)
            server.server_close()
