"""The Kafka network server: listeners, connections, in-order pipelining, dispatch.

Per connection, a FrameReader protocol (broker/protocol/frame_reader.py) receives
size-prefixed frames (the size is checked against `socket.request.max.bytes` before anything
is read or allocated; a frame over 64 KiB is received straight into a buffer of its own),
parses the header,
starts the handler as its own task, and queues it. One task, the writer, takes queued
requests in order of arrival, awaits each handler and writes its response, so responses
leave in request order while handlers run concurrently. Handlers are started in arrival
order and each runs up to its first await before the next one starts, so work a handler
does before its first await (a Produce append) keeps arrival order. Produce and Fetch
handlers take that first step at once, as their frame is read, and get a task only if
they wait (_start_eagerly). Answers ready one after another are held and leave in one
writev, before the writer waits for anything (a handler, the next request, a mute, a
sendfile, flow control).

At most `max_inflight_requests` requests per connection, holding at most
`max_inflight_bytes` of request frames (one frame of any allowed size is always let in), are
queued or running; at either cap the reader pauses the socket and TCP pushes back on the
client. When the peer shuts its side down, the answers already owed are still written.
A connection with nothing in flight and no bytes moved for `connections.max.idle.ms` is closed.

Quotas (KIP-219): an answer that carries a throttle time (a kio response's throttle_time,
ResponseChunks.throttle_ms, NoResponse for acks=0) is sent at once, then the connection is
muted for that long: nothing more is read and nothing more is written. With a
request_percentage quota in force for the request (`request_quota`), the handler's time on
the event loop is measured step by step (_Timed) and its throttle time, when larger,
replaces a kio response's throttle_time (ResponseChunks keep theirs; the mute is the larger).

Kafka's answers to bad requests: an ApiVersions request of an unsupported version gets a v0
ApiVersions response with UNSUPPORTED_VERSION and our ranges; any other unknown API key,
unsupported version or unparseable frame is logged and the connection is closed (after the
responses to its earlier requests). A handler that fails closes its connection only.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import itertools
import logging
import os
import socket
import ssl
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import structlog

import broker.metrics.stats as metrics_stats
from broker.errors import KafkaError
from broker.metrics.stats import (
    FETCH_API_KEY,
    TASK_TIMING,
    ServerStats,
    fetch_metric_key,
)
from broker.protocol import api
from broker.protocol.api import ApiTable
from broker.protocol.durations import duration, to_ms
from broker.protocol.frame_reader import FrameReader, Http2PrefaceError
from broker.protocol.frames import (
    OFFLOAD_MIN,
    ResponseChunks,
    SenderPool,
    ZeroCopyWriter,
    native_senders_missing,
)
from broker.protocol.headers import (
    ApiPeek,
    FrameError,
    encode_response,
    frame_prefix,
    parse_request,
    peek_api,
)
from broker.quotas.connections import ConnectionQuotas, Refuse
from broker.quotas.core import QuotaMap
from broker.security import sasl
from broker.security.plugins import PrincipalBuilderHook, PrincipalError
from broker.security.principal import ANONYMOUS, MappingRuleError, x500_name
from broker.security.sasl import SaslConfig
from broker.security.tls import ServerTls, log_fetch_path_once
from broker.server.context import RequestContext
from broker.server.dispatch import BoundDispatcher, BoundEntry, NoResponse, RequestQuota
from broker.server.old_versions import OldVersionLog
from broker.util.tasks import ServiceTasks

log = structlog.get_logger("skiff.server")


DEFAULT_SOCKET_REQUEST_MAX_BYTES: Final = 104857600
DEFAULT_CONNECTIONS_MAX_IDLE_MS: Final = 600000
DEFAULT_MAX_INFLIGHT_REQUESTS: Final = 100
DEFAULT_MAX_INFLIGHT_BYTES: Final = 104857600
TLS_HANDSHAKE_TIMEOUT_S: Final = 10.0
# Answers ready one after another leave in one writev, up to this many bytes: on loopback
# each send also runs the peer's receive and may wake it.
HOLD_MAX_BYTES: Final = 1 << 20
MAX_NETWORK_THREADS: Final = 64  # broker/protocol/_sendpool.c's MAX_THREADS
SASL_SERVER_MAX_RECEIVE_SIZE: Final = 524288  # Kafka's sasl.server.max.receive.size default


@dataclass(frozen=True)
class ServerConfig:
    socket_request_max_bytes: int = DEFAULT_SOCKET_REQUEST_MAX_BYTES
    connections_max_idle_ms: int = DEFAULT_CONNECTIONS_MAX_IDLE_MS
    max_inflight_requests: int = DEFAULT_MAX_INFLIGHT_REQUESTS
    max_inflight_bytes: int = DEFAULT_MAX_INFLIGHT_BYTES
    # Kafka's socket.send.buffer.bytes / socket.receive.buffer.bytes (-1: the OS's sizing)
    # and socket.listen.backlog.size
    send_buffer_bytes: int = 100 * 1024
    receive_buffer_bytes: int = 100 * 1024
    listen_backlog: int = 50
    # Kafka's num.network.threads: here the native threads that send large zero-copy
    # answers (broker/protocol/frames.py, SenderPool); the event loop reads every request.
    network_threads: int = 3

    def __post_init__(self) -> None:
        if self.socket_request_max_bytes < 8:
            raise ValueError("socket.request.max.bytes must be at least 8")
        if self.connections_max_idle_ms <= 0:
            raise ValueError("connections.max.idle.ms must be positive")
        if self.max_inflight_requests < 1:
            raise ValueError("max_inflight_requests must be at least 1")
        if self.max_inflight_bytes < 1:
            raise ValueError("max_inflight_bytes must be at least 1")
        for name, size in (("socket.send.buffer.bytes", self.send_buffer_bytes),
                           ("socket.receive.buffer.bytes", self.receive_buffer_bytes)):
            if size != -1 and size < 1:
                raise ValueError(f"{name} must be -1 (the OS default) or at least 1")
        if self.listen_backlog < 1:
            raise ValueError("socket.listen.backlog.size must be at least 1")
        if not 1 <= self.network_threads <= MAX_NETWORK_THREADS:
            raise ValueError(f"num.network.threads must be 1 to {MAX_NETWORK_THREADS}")


@dataclass(frozen=True)
class ListenerSpec:
    """One entry of `listeners`: its name, where it binds, what it serves."""

    name: str
    host: str
    port: int
    apis: ApiTable
    dispatcher: BoundDispatcher = field(compare=False)
    """The handlers with their services bound (Dispatcher.bind)."""
    tls: ServerTls | None = field(default=None, compare=False)
    """Serve TLS on this listener (SSL, SASL_SSL): broker/security/tls.py."""
    sasl: SaslConfig | None = field(default=None, compare=False)
    """Authenticate with SASL first (SASL_PLAINTEXT, SASL_SSL): broker/security/sasl.py."""
    principal_builder: PrincipalBuilderHook | None = field(default=None, compare=False)
    """`principal.builder.class` when it is a Python plugin: broker/security/plugins.py."""


class _Close:
    """Queued after the last request to answer: close once earlier responses are written."""

    def __init__(self, reason: str) -> None:
        self.reason = reason


class _Timed:
    """Wraps a handler's coroutine and adds up the time each of its steps runs on the loop
    (the time Kafka's request quota counts on an IO thread; waits are not counted)."""

    __slots__ = ("busy", "coro")

    def __init__(self, coro: Any) -> None:
        self.coro = coro
        self.busy = 0.0

    def __await__(self) -> Any:
        coro = self.coro
        value: Any = None
        error: BaseException | None = None
        while True:
            t0 = time.perf_counter()
            try:
                step = coro.throw(error) if error is not None else coro.send(value)
            except StopIteration as stop:
                self.busy += time.perf_counter() - t0
                return stop.value
            except BaseException:
                self.busy += time.perf_counter() - t0
                raise
            self.busy += time.perf_counter() - t0
            try:
                value, error = (yield step), None
            except BaseException as e:  # delivered into the coroutine at its next step
                value, error = None, e


class _Finished:
    """What `_Connection._eager` yields once its handler has returned: the handler's value,
    handed to the driver (`_step`, `_Resumed`) as a step. A coroutine that returns
    raises StopIteration into its caller, and catching that in compiled code (a traceback
    entry, the exception state saved and restored) cost ~2.4% of a small idempotent
    produce's CPU (docs/benchmarks.md, "Server machinery per request"). The coroutine is
    never resumed after it."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __await__(self) -> Any:
        yield self


class _Answered:
    """A handler's outcome when it finished in its first step: what a done future would
    hold, without making one (`done()` for the answer queue, `outcome()` for the write
    loop)."""

    __slots__ = ("error", "value")

    def __init__(self, value: Any, error: BaseException | None = None) -> None:
        self.value = value
        self.error = error

    def done(self) -> bool:
        return True

    def outcome(self) -> Any:
        """The value, or raises the handler's exception."""
        if self.error is not None:
            raise self.error
        return self.value


def _finished(pending: _Pending, task: object) -> None:
    pending.done_at = time.monotonic()
    if pending.received:  # timed (metrics on): registered in TASK_TIMING
        TASK_TIMING.pop(task, None)


async def _awaited(awaitable: _Timed | _Resumed) -> Any:
    """A task's coroutine for an awaitable that drives a handler (a task needs a coroutine)."""
    return await awaitable


class _Resumed:
    """A coroutine that took its first step outside a task, driven on from the awaitable
    it yielded by the task that awaits this (Python 3.11, which has no eager tasks)."""

    __slots__ = ("coro", "step")

    def __init__(self, coro: Any, step: Any) -> None:
        self.coro = coro
        self.step = step

    def __await__(self) -> Any:
        coro, step = self.coro, self.step
        self.step = None
        while True:
            try:
                value = yield step
            except BaseException as e:  # delivered into the coroutine
                try:
                    step = coro.throw(e)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    step = coro.send(value)
                except StopIteration as stop:
                    return stop.value
            if type(step) is _Finished:
                return step.value


def _step(coro: Any) -> asyncio.Future[Any] | _Answered:
    """Run `coro` up to its first wait now: its outcome when it returned (or yielded a
    `_Finished`) or raised, else a task that goes on from there."""
    try:
        step = coro.send(None)
    except StopIteration as stop:
        return _Answered(stop.value)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:  # the caller answers or closes
        return _Answered(None, e)
    if type(step) is _Finished:
        return _Answered(step.value)
    return asyncio.ensure_future(_awaited(_Resumed(coro, step)))


def _first_step(coro: Any) -> asyncio.Future[Any]:
    """`_step` for callers that want a future (the worker channel's ops)."""
    loop = asyncio.get_running_loop()
    if sys.version_info >= (3, 12):
        return asyncio.Task(coro, loop=loop, eager_start=True)
    outcome = _step(coro)
    if not isinstance(outcome, _Answered):
        return outcome
    done = loop.create_future()
    if isinstance(outcome.error, asyncio.CancelledError):
        done.cancel()
    elif outcome.error is not None:
        done.set_exception(outcome.error)
    else:
        done.set_result(outcome.value)
    return done


def _start_eagerly(coro: Any, pending: _Pending) -> asyncio.Future[Any] | _Answered:
    """Run the handler (`coro`, its `_Connection._eager` wrapper) up to its first wait now:
    its outcome when it never waited (a Produce on a partition whose ISR is this broker
    alone, a Fetch with records to return), else a task that goes on from there. Saves a
    task, a future and a loop iteration per such request (docs/benchmarks.md, "Answers
    without a task"). Every Python version takes this first step by hand: 3.12's eager
    tasks would refuse the `_Finished` step."""
    metrics_stats.EAGER_PENDING = pending if pending.received else None
    try:
        return _step(coro)
    finally:
        metrics_stats.EAGER_PENDING = None


@dataclass(slots=True)
class _Pending:
    ctx: RequestContext
    request: Any
    entry: BoundEntry | None
    task: asyncio.Future[Any] | _Answered
    size: int
    received: float = 0.0  # time.monotonic() when the frame was read (metrics)
    started: float = 0.0  # ... when the handler took its first step
    done: float = 0.0  # ... when the handler returned or raised
    ready: float = 0.0  # ... when the write loop took the answer (its turn came)
    timed: _Timed | None = None  # the handler's busy time, under a request quota
    done_at: float = 0.0  # time.monotonic() when the handler finished
    metric_key: int = 0  # the request metrics' key: the API key, or a Fetch's sender kind
    remote_from: float = 0.0  # ... when it first waited for replicas or records (metrics)

    # written out: mypyc compiles it, where dataclass's own runs interpreted (broker/native.py)
    def __init__(
        self, ctx: RequestContext, request: Any, entry: BoundEntry | None,
        task: asyncio.Future[Any] | _Answered, size: int, received: float = 0.0,
        started: float = 0.0,
        done: float = 0.0, ready: float = 0.0, timed: _Timed | None = None, done_at: float = 0.0,
        metric_key: int = 0, remote_from: float = 0.0,
    ) -> None:
        self.ctx = ctx
        self.request = request
        self.entry = entry
        self.task = task
        self.size = size
        self.received = received
        self.started = started
        self.done = done
        self.ready = ready
        self.timed = timed
        self.done_at = done_at
        self.metric_key = metric_key
        self.remote_from = remote_from


# Handlers started at once (_start_eagerly). Before 3.12 their first step runs outside any
# task, so it must not use task-bound state (asyncio.timeout, TaskGroup, anyio cancel
# scopes, current_task); Python 3.11's wait_for is not task-bound.
_EAGER_APIS: Final = frozenset({api.PRODUCE, api.FETCH})

# Stands for a request's task between its _Pending and the task that needs that _Pending.
_NO_TASK: Final[Any] = None


def configure_listening_socket(sock: Any, config: ServerConfig) -> None:
    """What Kafka's Acceptor sets on the sockets it accepts, set on the listening socket
    (Linux copies these to each accepted socket, and the receive size must be in place
    before the handshake, which fixes the TCP window scale): SO_SNDBUF and SO_RCVBUF from
    socket.*.buffer.bytes (-1 leaves the OS's sizing, Linux's autotuning, in place) and
    SO_KEEPALIVE (TCP_NODELAY is the event loop's own default)."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    if config.send_buffer_bytes != -1:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, config.send_buffer_bytes)
    if config.receive_buffer_bytes != -1:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, config.receive_buffer_bytes)


class _AnswerQueue:
    """A connection's requests in arrival order, for its write loop."""

    __slots__ = ("_items", "_waiter")

    def __init__(self) -> None:
        self._items: collections.deque[_Pending | _Close] = collections.deque()
        self._waiter: asyncio.Future[None] | None = None

    def put_nowait(self, item: _Pending | _Close) -> None:
        self._items.append(item)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def get(self) -> _Pending | _Close:
        while not self._items:
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return self._items.popleft()

    def next_ready(self) -> bool:
        """Whether the next item is there and can be answered without waiting."""
        if not self._items:
            return False
        head = self._items[0]
        return isinstance(head, _Close) or head.task.done()


def advertised_apis(spec: ListenerSpec) -> ApiTable:
    """What the listener answers ApiVersions with: only what has a handler (Produce v0-v2
    rides on the Produce handler), and the SASL APIs on a SASL listener."""
    apis = spec.apis.restricted_to(spec.dispatcher.api_keys() | {api.API_VERSIONS})
    return with_sasl_apis(apis) if spec.sasl is not None else apis


class _Listener:
    def __init__(self, spec: ListenerSpec) -> None:
        self.spec = spec
        self.apis = advertised_apis(spec)
        # an asyncio.Server; Any, as uvloop's `sockets` is a list where typeshed says tuple
        # (compiled with mypyc, this module checks declared types at run time)
        self.server: Any = None
        self.security_protocol = ("SASL_" if spec.sasl is not None else "") + (
            "SSL" if spec.tls is not None else "PLAINTEXT")


def with_sasl_apis(apis: ApiTable) -> ApiTable:
    """A SASL listener's table: SaslHandshake and SaslAuthenticate, answered by the
    connection itself (broker/security/sasl.py), added."""
    return apis.with_api(sasl.SASL_HANDSHAKE, 0, 1).with_api(sasl.SASL_AUTHENTICATE, 0, 2)


class Server:
    def __init__(
        self,
        listeners: Sequence[ListenerSpec],
        config: ServerConfig | None = None,
        on_connection_closed: Callable[[str], None] | None = None,
        stats: ServerStats | None = None,
        request_quota: RequestQuota | None = None,
        connection_quotas: ConnectionQuotas | None = None,
        client_quotas: Callable[[], QuotaMap] | None = None,
        dynamic_configs: Callable[[], Mapping[str, str]] | None = None,
    ) -> None:
        """`on_connection_closed(connection_id)` runs once for each connection that ends,
        whatever ended it (the controller fences a broker whose heartbeats came on it).
        `stats` (broker/metrics) gets the request and connection counters; None: none kept.
        `request_quota`: request_percentage quotas (None: none measured).
        `connection_quotas`: connection counts and creation rates checked as each connection
        opens (broker/quotas/connections.py), with the ip entities of `client_quotas()` and
        the dynamic broker configs of `dynamic_configs()`."""
        names = [spec.name for spec in listeners]
        if len(set(names)) != len(names):
            raise ValueError(f"listener names must be unique: {names}")
        self.config = config or ServerConfig()
        self.old_versions = OldVersionLog()
        self.on_connection_closed = on_connection_closed
        self.stats = stats
        self.request_quota = request_quota
        self.connection_quotas = connection_quotas
        self.client_quotas = client_quotas
        self.dynamic_configs = dynamic_configs
        self._listeners = {spec.name: _Listener(spec) for spec in listeners}
        # a broker of several workers (broker/node/workers.py): offered each accepted
        # connection first, True when it gave the connection to a worker to serve
        self.hand_off: Callable[[str, asyncio.Transport], bool] | None = None
        self._connections: set[_Connection] = set()
        self._ids = itertools.count()
        self.tasks = ServiceTasks("server")  # each connection's write loop
        # the threads that send large Fetch answers; None: the loop sends every answer
        self.senders: SenderPool | None = None
        self._senders_checked = False

    async def start(self) -> None:
        self._start_senders()
        for listener in self._listeners.values():
            spec = listener.spec
            loop = asyncio.get_running_loop()
            tls: dict[str, Any] = {} if spec.tls is None else {
                "ssl": spec.tls.context, "ssl_handshake_timeout": TLS_HANDSHAKE_TIMEOUT_S}
            if spec.tls is not None:
                log_fetch_path_once()
            if self.hand_off is not None:
                # a connection is handed over before its TLS handshake, which the process
                # that serves it makes (`adopt`); one kept here is adopted here too
                tls = {}
            server: Any = await loop.create_server(
                functools.partial(self._accept, listener),
                spec.host,
                spec.port,
                reuse_address=True,
                backlog=self.config.listen_backlog,
                start_serving=False,
                **tls,
            )
            listener.server = server
            for sock in server.sockets:  # before it accepts anything
                configure_listening_socket(sock, self.config)
            await server.start_serving()
            host, port = self.address(spec.name)
            log.info("listener started", listener=spec.name, host=host, port=port,
                     apis=len(listener.apis), tls=spec.tls is not None)

    def _start_senders(self) -> None:
        if self._senders_checked:
            return
        self._senders_checked = True
        if all(listener.spec.tls is not None for listener in self._listeners.values()):
            return  # answers under TLS are copied through the transport, never sendfile'd
        missing = native_senders_missing()
        if missing is not None:
            log.warning("answers are all sent by the event loop: no native sender threads",
                        num_network_threads=self.config.network_threads, reason=missing)
            return
        self.senders = senders = SenderPool.acquire(self.config.network_threads)
        if senders.users == 1:  # the loop's other servers share the threads
            log.info("sender threads started", num_network_threads=senders.threads,
                     answers_from_bytes=OFFLOAD_MIN)

    def address(self, listener_name: str) -> tuple[str, int]:
        """Where the listener is bound (the real port when the configured one was 0)."""
        server = self._listeners[listener_name].server
        if server is None or not server.sockets:
            raise RuntimeError(f"listener {listener_name} is not started")
        sockname = server.sockets[0].getsockname()
        return str(sockname[0]), int(sockname[1])

    def advertised_apis(self, listener_name: str) -> ApiTable:
        return self._listeners[listener_name].apis

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    def connection_stats(self) -> dict[str, tuple[int, int, int]]:
        """Per listener: (open connections, requests in flight, bytes of their frames)."""
        out = dict.fromkeys(self._listeners, (0, 0, 0))
        for c in self._connections:
            n, requests, size = out[c.listener.spec.name]
            out[c.listener.spec.name] = (n + 1, requests + c.inflight, size + c.inflight_bytes)
        return out

    async def stop(self) -> None:
        for listener in self._listeners.values():
            if listener.server is not None:
                listener.server.close()
        for conn in list(self._connections):
            conn.abort("server stopping")
        for listener in self._listeners.values():
            if listener.server is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(listener.server.wait_closed(), 5)
        if self._connections:
            await asyncio.wait(
                [c.done for c in list(self._connections)], timeout=5
            )
        await self.tasks.close()  # write loops still owing answers after 5 s are cancelled
        if self.senders is not None:
            self.senders.release()
            self.senders = None
        self._senders_checked = False
        log.info("server stopped")

    def _accept(self, listener: _Listener, adopted: bool = False) -> FrameReader:
        conn = _Connection(self, listener, next(self._ids), adopted=adopted)
        return conn.protocol

    async def adopt(self, listener_name: str, sock: socket.socket) -> None:
        """Serve a connection another process of this broker accepted on `listener_name`
        (broker/node/workers.py), as if accepted here; on a TLS listener the handshake is
        made here."""
        self._start_senders()  # a worker's server adopts connections without a start
        listener = self._listeners[listener_name]
        tls = listener.spec.tls
        extra: dict[str, Any] = {} if tls is None else {
            "ssl": tls.context, "ssl_handshake_timeout": TLS_HANDSHAKE_TIMEOUT_S}
        try:
            await asyncio.get_running_loop().connect_accepted_socket(
                functools.partial(self._accept, listener, adopted=True), sock, **extra)
        except (OSError, ssl.SSLError, TimeoutError, ConnectionError) as exc:
            # a failed handshake ends this one connection, as at an accept
            log.info("adopted connection failed", listener=listener_name, error=str(exc))
            sock.close()

    def _keep_for_tls(self, listener: _Listener, transport: asyncio.Transport) -> None:
        """A TLS connection this process keeps: accepted without TLS (so it could have been
        handed over), it is taken off its plain transport and adopted with TLS."""
        raw = transport.get_extra_info("socket")
        if raw is None:
            transport.abort()
            return
        sock = socket.socket(fileno=os.dup(raw.fileno()))
        transport.abort()  # the duplicate keeps the connection open
        self.tasks.start_soon(self.adopt, listener.spec.name, sock, name="adopt_tls")


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _debug_enabled(logger: Any) -> bool:
    """Whether `logger` writes debug lines (structlog's filtering loggers say; any other
    logger is asked to)."""
    enabled = getattr(logger, "is_enabled_for", None)
    return enabled is None or bool(enabled(logging.DEBUG))


class _Connection:
    """One client connection: a FrameReader protocol feeds `_accept_frame`; the write loop
    answers in request order. Created by the listener's protocol factory."""

    def __init__(self, server: Server, listener: _Listener, n: int, *,
                 adopted: bool = False) -> None:
        self.server = server
        self.listener = listener
        self.n = n
        self.adopted = adopted  # accepted by this broker already: never handed over again
        config = server.config
        self.protocol = FrameReader(
            self._on_frame, self._on_lost,
            max_bytes=config.socket_request_max_bytes, min_bytes=8, admit=self._admit,
            on_error=self._on_bad_frame, on_eof=self._on_eof,
            on_connected=self._on_connected,
            # Frames under 64 KiB are views of the reader's scratch buffer, valid during
            # the call only: enough, as _accept_frame parses the request before it returns
            # and kio's reader copies every field it keeps (records included). Copying the
            # frame first cost a second copy of the records (2.5% of a broker-bound
            # replayed produce's user CPU, 32 KiB requests).
            copy_small=False,
        )
        self.transport: asyncio.Transport | None = None
        self.peer_host, self.peer_port = "?", 0
        self.id = f"?-{n}"
        self.log = log
        self.debug = _debug_enabled(log)
        self.queue = _AnswerQueue()
        self.held: list[bytes | bytearray | memoryview] = []
        self.held_bytes = 0
        self.inflight = 0
        self.inflight_bytes = 0
        self.last_active = time.monotonic()
        self.idle_timer: asyncio.TimerHandle | None = None
        self.zero_copy: ZeroCopyWriter | None = None
        self.tasks: set[asyncio.Future[Any]] = set()
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.closing = False
        self.reading = True  # until a close is queued: no request after it is read
        self.stats = server.stats
        self.lstats = None if server.stats is None else server.stats.listener(listener.spec.name)
        self.principal = ANONYMOUS
        self.muted_until = 0.0  # time.monotonic(): read nothing before (KIP-219)
        self.muted = False
        self.counted = False  # admitted by the server's connection quotas
        self.throttle_ms = 0  # the throttle time of the answer just written
        self.closed = asyncio.Event()
        self.sasl = None if listener.spec.sasl is None else \
            sasl.SaslSession(listener.spec.sasl, _now_ms)

    def _on_connected(self, transport: asyncio.Transport) -> None:
        hand_off = self.server.hand_off
        if hand_off is not None and not self.adopted:
            if hand_off(self.listener.spec.name, transport):
                return  # another process of this broker serves it; nothing was read here
            if self.listener.spec.tls is not None:
                self.protocol.stop()
                self.server._keep_for_tls(self.listener, transport)
                return
        self.transport = transport
        peer = transport.get_extra_info("peername") or ("?", 0)
        local = transport.get_extra_info("sockname") or ("?", 0)
        self.peer_host, self.peer_port = str(peer[0]), int(peer[1])
        self.id = f"{local[0]}:{local[1]}-{self.peer_host}:{self.peer_port}-{self.n}"
        # Bound once: structlog's lazy proxy would otherwise re-bind on every call.
        self.log = log.bind(connection=self.id)
        self.debug = _debug_enabled(self.log)  # the level is set once, before the listeners
        if not self._admit_connection(transport):
            return
        tls = self.listener.spec.tls
        builder = self.listener.spec.principal_builder
        subject = None
        if tls is not None:
            try:
                cert = transport.get_extra_info("peercert")
                self.principal = tls.principal(cert)
                if builder is not None and cert and cert.get("subject"):
                    subject = x500_name(cert["subject"])
            except MappingRuleError as e:  # Kafka fails the authentication
                self.log.warning("tls principal mapping failed, closing", error=str(e))
                self._uncount()
                transport.abort()
                return
        if builder is not None and self.sasl is None:
            try:  # Kafka asks the builder for SSL and PLAINTEXT connections too
                self.principal = builder.principal(self.peer_host, self.principal,
                                                   ssl_peer_subject=subject)
            except PrincipalError as e:
                self.log.warning("principal builder failed, closing", error=str(e))
                self._uncount()
                transport.abort()
                return
        # Under TLS the bytes must go through the transport: Fetch copies (as Kafka does).
        self.zero_copy = ZeroCopyWriter(transport, self.protocol.drain, copy=tls is not None,
                                        senders=self.server.senders)
        self.server._connections.add(self)
        if self.lstats is not None:
            self.lstats.connections_created += 1
        self.log.debug("connection opened", listener=self.listener.spec.name)
        self._arm_idle_timer()
        self.server.tasks.start_soon(self.run, name=f"connection_{self.id}")

    def _admit_connection(self, transport: asyncio.Transport) -> bool:
        """Connection counts and creation rates (KIP-402, KIP-612): False when this
        connection is refused (closed now or after its throttle time); a delayed one is
        accepted but read only once its throttle time has passed."""
        quotas = self.server.connection_quotas
        if quotas is None:
            return True
        client_quotas = self.server.client_quotas() if self.server.client_quotas else {}
        dynamic = self.server.dynamic_configs() if self.server.dynamic_configs else None
        decision = quotas.admit(self.listener.spec.name, self.peer_host, _now_ms(),
                                client_quotas, dynamic)
        if isinstance(decision, Refuse):
            self.log.info("connection refused", reason=decision.reason,
                          close_after_ms=decision.close_after_ms)
            self.protocol.stop()
            if decision.close_after_ms > 0:
                asyncio.get_running_loop().call_later(decision.close_after_ms / 1000,
                                                      transport.abort)
            else:
                transport.abort()
            return False
        self.counted = True
        if decision.delay_ms > 0:
            self.log.debug("connection creation throttled", delay_ms=decision.delay_ms)
            self.muted = True

            def unmute() -> None:
                self.muted = False
                self.protocol.release()

            asyncio.get_running_loop().call_later(decision.delay_ms / 1000, unmute)
        return True

    def _uncount(self) -> None:
        if self.counted and self.server.connection_quotas is not None:
            self.counted = False
            self.server.connection_quotas.closed(self.listener.spec.name, self.peer_host)

    async def run(self) -> None:
        try:
            await self._write_loop()
        except asyncio.CancelledError:
            pass
        except Exception:  # a bug on our side: this connection goes, the server stays
            self.log.exception("writing responses failed, closing connection")
        finally:
            self._cleanup()
            self.server._connections.discard(self)
            self._uncount()
            if self.lstats is not None:
                self.lstats.connections_closed += 1
            if not self.done.done():
                self.done.set_result(None)
            if self.server.on_connection_closed is not None:
                try:
                    self.server.on_connection_closed(self.id)
                except Exception:
                    self.log.exception("on_connection_closed failed")

    # ---- reading (FrameReader callbacks) ----

    def _admit(self, size: int) -> bool:
        """Room for one more request of `size` bytes? (One frame of any allowed size is
        always let in when nothing is in flight.)"""
        config = self.server.config
        if self.muted:
            return False  # muted while throttled; the write loop releases the reader
        if self.sasl is not None and not self.sasl.authenticated \
                and size > SASL_SERVER_MAX_RECEIVE_SIZE:
            # Kafka's sasl.server.max.receive.size: nothing large before authentication.
            self.log.warning("frame too large before SASL authentication, closing",
                             size=size, limit=SASL_SERVER_MAX_RECEIVE_SIZE)
            asyncio.get_running_loop().call_soon(self.abort, "oversized SASL frame")
            return False
        if self.inflight >= config.max_inflight_requests:
            return False
        return self.inflight == 0 or self.inflight_bytes + size <= config.max_inflight_bytes

    def _on_frame(self, frame: memoryview | bytes) -> None:
        self.last_active = time.monotonic()
        if self.lstats is not None:
            self.lstats.bytes_in += len(frame) + 4
        try:
            problem = self._accept_frame(frame)
        except Exception:  # a bug on our side: this connection goes, the server stays
            self.log.exception("reading a request failed, closing connection")
            problem = "internal error"
        if problem is not None:
            self._stop_reading(problem)

    def _on_bad_frame(self, error: BaseException) -> None:
        if isinstance(error, Http2PrefaceError):
            self.log.warning(
                "http2_on_kafka_listener",
                message=f"an HTTP/2 (gRPC) client connected to Kafka listener "
                        f"{self.listener.spec.name}: this port speaks the Kafka protocol; "
                        "the gRPC admin API (skiff --bootstrap) is on admin.listeners "
                        "(9094 by default). Closing the connection",
                peer=f"{self.peer_host}:{self.peer_port}")
            self._stop_reading(str(error))
            return
        self.log.warning("request frame refused", reason=str(error),
                         socket_request_max_bytes=self.server.config.socket_request_max_bytes)
        self._stop_reading(str(error))

    def _on_eof(self, partial: bool) -> bool:
        self._stop_reading("peer closed mid-frame" if partial else "peer closed")
        # Keep the socket open to write the answers already owed; TLS has no half-close
        # (asyncio warns and closes anyway), so a TLS connection just ends.
        return self.listener.spec.tls is None

    def _on_lost(self, error: BaseException | None) -> None:
        # The write loop finds the transport closed at its next answer and closes then.
        self._stop_reading("connection reset")

    def _stop_reading(self, reason: str) -> None:
        if not self.reading:
            return
        self.reading = False
        self.protocol.stop()
        self.queue.put_nowait(_Close(reason))

    def _accept_frame(self, frame: bytes | memoryview) -> str | None:
        """Queue the request; a reason string means: stop reading and close."""
        received_ms = _now_ms()
        try:
            peek = peek_api(frame)
        except FrameError as e:
            return self._refuse("unparseable request header", str(e))
        apis = self.listener.apis
        if not apis.supports(peek.api_key, peek.api_version):
            if peek.api_key == api.API_VERSIONS:
                # Kafka answers with v0 so any client can read the supported ranges.
                self._enqueue_ready(self._context(peek, None, received_ms),
                                    _unsupported_versions_answer(apis))
                self.log.info("unsupported ApiVersions version",
                         api_version=peek.api_version)
                return None
            what = "unknown api key" if peek.api_key not in apis else "unsupported version"
            return self._refuse(what, f"{api.api_name(peek.api_key)} ({peek.api_key}) "
                                      f"v{peek.api_version}")
        if self.sasl is not None and peek.api_key not in (sasl.SASL_HANDSHAKE,
                                                          sasl.SASL_AUTHENTICATE):
            refused = self.sasl.admits(peek.api_key)
            if refused is not None:
                return self._refuse("sasl", refused)
        try:
            parsed = parse_request(frame, peek)
        except FrameError as e:
            return self._refuse("unparseable request", str(e))
        ctx = self._context(peek, parsed.client_id, received_ms)
        if self.server.old_versions.first_time(ctx.client_id, self.peer_host, ctx.api_key,
                                               ctx.api_version):
            self.log.info("old api version (removed in Kafka 4.0, KIP-896)",
                          api=api.api_name(ctx.api_key), api_version=ctx.api_version,
                          client_id=ctx.client_id, peer_host=self.peer_host,
                          peer_port=self.peer_port)
        if self.sasl is not None and peek.api_key in (sasl.SASL_HANDSHAKE,
                                                      sasl.SASL_AUTHENTICATE):
            return self._sasl_request(ctx, parsed.body)
        entry = self.listener.spec.dispatcher.get(peek.api_key)
        if entry is None:  # not reachable: the advertised table is restricted to handlers
            return self._refuse("no handler", api.api_name(peek.api_key))
        if self.debug:  # its arguments cost ~1 us a request, logged or not
            self.log.debug("request", api=api.api_name(ctx.api_key),
                           api_version=ctx.api_version, correlation_id=ctx.correlation_id,
                           client_id=ctx.client_id)
        if self.stats is None:
            pending = _Pending(ctx, parsed.body, entry, _NO_TASK, len(frame))
        else:
            key = peek.api_key  # Kafka's request metrics name a Fetch by its sender
            if key == FETCH_API_KEY:
                key = fetch_metric_key(parsed.body)
            self.stats.requests[(key, peek.api_version)] += 1
            pending = _Pending(ctx, parsed.body, entry, _NO_TASK, len(frame),
                               received=self.last_active,  # _on_frame's clock read
                               metric_key=key)
        quota = self.server.request_quota
        task: asyncio.Future[Any] | _Answered
        if peek.api_key in _EAGER_APIS and (quota is None or not quota.applies(ctx)):
            task = pending.task = _start_eagerly(
                self._eager(entry, ctx, parsed.body, pending), pending)
        else:
            coro = (entry.handle(ctx, parsed.body) if self.stats is None
                    else self._timed(entry, ctx, parsed.body, pending))
            timed = _Timed(coro) if quota is not None and quota.applies(ctx) else None
            pending.timed = timed
            task = pending.task = asyncio.ensure_future(
                coro if timed is None else _awaited(timed))
        if isinstance(task, asyncio.Future) and not task.done():
            task.add_done_callback(functools.partial(_finished, pending))
            if self.stats is not None:
                TASK_TIMING[task] = pending  # for mark_remote_wait; _finished removes it
            self._track(task)
        else:
            _finished(pending, task)
        self.inflight += 1
        self.inflight_bytes += len(frame)
        self.queue.put_nowait(pending)
        return None

    async def _eager(self, entry: BoundEntry, ctx: RequestContext, request: Any,
                     p: _Pending) -> None:
        """A handler started eagerly (_start_eagerly): as `_timed` when metrics are on, and
        its value handed over as a `_Finished` step, never returned."""
        timed = p.received != 0.0
        if timed:
            p.started = time.monotonic()
        try:
            value = await entry.handle(ctx, request)
        finally:
            if timed:
                p.done = time.monotonic()
        await _Finished(value)

    async def _timed(self, entry: BoundEntry, ctx: RequestContext, request: Any,
                     p: _Pending) -> Any:
        """The handler, with the times Kafka's request metrics split a request by: its
        wait to start (request queue) and its run (local; remote from its first wait
        for replicas or records, which mark_remote_wait notes through TASK_TIMING)."""
        p.started = time.monotonic()
        try:
            return await entry.handle(ctx, request)
        finally:
            p.done = time.monotonic()

    def _context(self, peek: ApiPeek, client_id: str | None,
                 received_ms: int) -> RequestContext:
        return RequestContext(
            api_key=peek.api_key,
            api_version=peek.api_version,
            correlation_id=peek.correlation_id,
            client_id=client_id,
            listener_name=self.listener.spec.name,
            peer_host=self.peer_host,
            peer_port=self.peer_port,
            received_ms=received_ms,
            apis=self.listener.apis,
            connection_id=self.id,
            principal=self.principal,
            security_protocol=self.listener.security_protocol,
            token_authenticated=self.sasl is not None and self.sasl.token_authenticated,
        )

    def _sasl_request(self, ctx: RequestContext, request: Any) -> str | None:
        """SaslHandshake / SaslAuthenticate, answered here; a failure closes after the
        answer is written."""
        assert self.sasl is not None
        session = self.sasl
        if ctx.api_key == sasl.SASL_HANDSHAKE:
            answer = session.handshake(str(request.mechanism))
            response = sasl.handshake_response(ctx.api_version, answer)
        else:
            answer = session.authenticate(bytes(request.auth_bytes), ctx.api_version)
            response = sasl.authenticate_response(ctx.api_version, answer)
            if session.principal is not None and not answer.closes \
                    and session.state is sasl.State.AUTHENTICATED:
                built = self._sasl_principal(session)
                if built is None:
                    self._enqueue_ready(ctx, response)
                    return "sasl: principal builder failed"
                self.principal = built
        self._enqueue_ready(ctx, response)
        if answer.closes:
            self.log.info("sasl authentication failed", error=answer.error.name,
                          detail=session.failure, peer=self.peer_host)
            return f"sasl: {session.failure}"
        if ctx.api_key == sasl.SASL_AUTHENTICATE and session.principal is not None \
                and session.state is sasl.State.AUTHENTICATED:
            self.log.debug("sasl authenticated", principal=session.principal)
        return None

    def _sasl_principal(self, session: sasl.SaslSession) -> str | None:
        """The SASL principal, through the listener's principal builder plugin if any;
        None when the plugin failed (the connection closes)."""
        assert session.principal is not None
        builder = self.listener.spec.principal_builder
        if builder is None:
            return session.principal
        mech = session.authenticated_by
        token = getattr(mech, "token", None)
        try:
            return builder.principal(
                self.peer_host, session.principal,
                sasl_mechanism=session.mechanism_name,
                sasl_authorization_id=getattr(mech, "username", None),
                token_claims=getattr(token, "claims", None),
                sasl_extensions=getattr(mech, "extensions", None))
        except PrincipalError as e:
            self.log.warning("principal builder failed, closing", error=str(e))
            return None

    def _enqueue_ready(self, ctx: RequestContext, response: Any) -> None:
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        fut.set_result(response)
        self.inflight += 1
        self.queue.put_nowait(_Pending(ctx, None, None, fut, 0))

    def _refuse(self, what: str, detail: str) -> str:
        self.log.warning("bad request, closing connection", problem=what,
                    detail=detail, listener=self.listener.spec.name)
        return f"{what}: {detail}"

    def _track(self, task: asyncio.Future[Any]) -> None:
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    # ---- writing ----

    async def _write_loop(self) -> None:
        while True:
            if self.held and (self.held_bytes >= HOLD_MAX_BYTES
                              or not self.queue.next_ready()) and not await self._flush():
                self._close("write failed")
                return
            item = await self.queue.get()
            if isinstance(item, _Close):
                self._send_held()
                self._close(item.reason)
                return
            try:
                self.throttle_ms = 0
                ok = await self._answer(item)
                if ok and self.throttle_ms > 0:
                    # the throttled answer leaves before the mute
                    ok = await self._flush()
                    if ok:
                        await self._mute(item.done_at + self.throttle_ms / 1000)
            finally:
                self.inflight -= 1
                self.inflight_bytes -= item.size
                self.last_active = now = time.monotonic()
                self.protocol.release()  # read on if a cap held the reader
            if item.ready and self.stats is not None:
                self.stats.times(item.metric_key, item.received, item.started, item.done,
                                 item.ready, now, item.remote_from)
            if not ok:
                self._send_held()
                self._close("request failed")
                return

    def _hold(self, data: bytes | bytearray | memoryview) -> None:
        """An answer's bytes, written with the answers ready after it in one writev."""
        self.held.append(data)
        self.held_bytes += len(data)

    def _send_held(self) -> bool:
        held, self.held, self.held_bytes = self.held, [], 0
        if not held:
            return True
        if self.transport is None or self.transport.is_closing():
            return False
        try:
            self.transport.writelines(held)
        except (ConnectionError, OSError) as e:
            self.log.debug("write failed", error=repr(e))
            return False
        return True

    async def _flush(self) -> bool:
        """Write the held answers and wait for the transport's flow control."""
        if not self._send_held():
            return False
        try:
            await self.protocol.drain()
        except (ConnectionError, OSError) as e:
            self.log.debug("write failed", error=repr(e))
            return False
        return True

    async def _mute(self, until: float) -> None:
        """KIP-219: after a throttled answer, read and write nothing until `until` (the
        time its handler finished plus its throttle time: pipelined answers, each throttled
        for the same bytes, must not add up their mutes)."""
        self.muted_until = max(self.muted_until, until)
        wait = self.muted_until - time.monotonic()
        if wait > 0:
            # A flag, not a clock test, in _admit: the timer may fire a hair before the
            # deadline, and a reader held then would wait for a release that never comes.
            self.muted = True
            try:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.closed.wait(), wait)
            finally:
                self.muted = False

    def _throttle(self, p: _Pending, result: Any) -> Any:
        """Note the answer's throttle time (and the request quota's) for the mute; a kio
        response gets the larger one in its throttle_time."""
        if isinstance(result, NoResponse | ResponseChunks):
            own = result.throttle_ms
        else:
            own = to_ms(getattr(result, "throttle_time", None), 0)
        request_ms = 0
        quota = self.server.request_quota
        if p.timed is not None and quota is not None:
            request_ms = quota.record(p.ctx, p.timed.busy)
        if request_ms > own and not isinstance(result, NoResponse | ResponseChunks) \
                and hasattr(result, "throttle_time"):
            import dataclasses

            result = dataclasses.replace(result, throttle_time=duration(request_ms))
        self.throttle_ms = max(own, request_ms)
        return result

    async def _answer(self, p: _Pending) -> bool:
        ctx = p.ctx
        task = p.task
        try:
            result = task.outcome() if isinstance(task, _Answered) else await task
        except KafkaError as e:
            if p.entry is None or p.entry.error_response is None:
                self.log.warning("request failed, closing connection",
                            api=api.api_name(ctx.api_key), api_version=ctx.api_version,
                            error=e.error_code.name, detail=e.message)
                return False
            self.log.info("request answered with error",
                     api=api.api_name(ctx.api_key), error=e.error_code.name, detail=e.message)
            result = p.entry.error_response(ctx, p.request, e.error_code)
        except asyncio.CancelledError:
            return False
        except Exception:
            self.log.exception("handler failed, closing connection",
                          api=api.api_name(ctx.api_key), api_version=ctx.api_version)
            return False
        now = time.monotonic()
        if p.received:
            p.ready = now
        if not p.done_at:
            p.done_at = now
        if result is not None:
            result = self._throttle(p, result)
        if result is None or isinstance(result, NoResponse):
            return True
        if self.transport is None or self.transport.is_closing():
            return False
        try:
            if isinstance(result, ResponseChunks):
                prefix = frame_prefix(ctx.api_key, ctx.api_version, ctx.correlation_id,
                                      result.size)
                if self.zero_copy is None:
                    raise ConnectionError("not connected")
                if self.lstats is not None:
                    self.lstats.bytes_out += len(prefix) + result.size
                if result.has_file_slices():
                    if not self._send_held():
                        return False
                    await self.zero_copy.write(prefix, result)
                    await self.protocol.drain()
                else:
                    self._hold(prefix)
                    for part in result:
                        self._hold(part)  # type: ignore[arg-type]
            else:
                got = (int(result.__api_key__), int(result.__version__))
                # ApiVersions error answers may be v0 whatever the request's version.
                if got != (ctx.api_key, ctx.api_version) and got != (api.API_VERSIONS, 0):
                    self.log.error("handler answered the wrong api/version",
                              api=api.api_name(ctx.api_key), api_version=ctx.api_version,
                              response=type(result).__name__)
                    return False
                data = encode_response(result, ctx.correlation_id)
                if self.stats is not None and self.lstats is not None:
                    self.lstats.bytes_out += len(data)
                    code = getattr(result, "error_code", None)
                    if code is not None:
                        self.stats.error(ctx.api_key, int(code))
                self._hold(data)
        except (ConnectionError, OSError) as e:
            self.log.debug("write failed", error=repr(e))
            return False
        except Exception:
            self.log.exception("encoding the response failed, closing connection",
                          api=api.api_name(ctx.api_key),
                          api_version=ctx.api_version)
            return False
        if self.debug:
            self.log.debug("response", api=api.api_name(ctx.api_key),
                           correlation_id=ctx.correlation_id)
        return True

    # ---- lifecycle ----

    def _arm_idle_timer(self) -> None:
        idle_s = self.server.config.connections_max_idle_ms / 1000
        due = self.last_active + idle_s
        delay = max(0.0, due - time.monotonic())
        self.idle_timer = asyncio.get_running_loop().call_later(delay, self._check_idle)

    def _check_idle(self) -> None:
        if self.closing:
            return
        idle_s = self.server.config.connections_max_idle_ms / 1000
        if self.inflight == 0 and time.monotonic() - self.last_active >= idle_s:
            self.log.info("closing idle connection",
                     connections_max_idle_ms=self.server.config.connections_max_idle_ms)
            self.abort("idle")
            return
        if self.inflight > 0:
            # A long-polling request is activity; idleness counts from its response.
            self.last_active = time.monotonic()
        self._arm_idle_timer()

    def abort(self, reason: str) -> None:
        """Close now, dropping queued requests (idle timeout, server stop)."""
        if self.closing:
            return
        self._close(reason)

    def _close(self, reason: str) -> None:
        if self.closing:
            return
        self.closing = True
        self.closed.set()
        self.log.debug("connection closed", reason=reason)
        if self.idle_timer is not None:
            self.idle_timer.cancel()
        for t in list(self.tasks):
            t.cancel()
        if self.transport is not None:
            self.transport.close()
        self._stop_reading(reason)  # ends the write loop if it waits for a request

    def _cleanup(self) -> None:
        self._close("done")
        if self.zero_copy is not None:
            self.zero_copy.close()

    def _transport(self) -> asyncio.Transport:
        if self.transport is None:
            raise ConnectionError("not connected")
        return self.transport


def _unsupported_versions_answer(apis: ApiTable) -> Any:
    # Imported here: broker.handlers depends on the server's types, not the other way round,
    # and importing it at module level would make broker.protocol.fetch_encoder -> server ->
    # handlers -> fetch_encoder a cycle.
    from broker.handlers import api_versions

    return api_versions.unsupported_version_response(apis)
