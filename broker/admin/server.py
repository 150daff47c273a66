"""The admin gRPC server inside a node: the skiff.admin.v1 services, grpc.health.v1 and
server reflection, on `admin.listeners` (default 127.0.0.1:9094).

While the node is not ready (`node.ready` unset: not yet registered and unfenced) every
admin call answers UNAVAILABLE and the health service reports NOT_SERVING; health and
reflection themselves always answer. Once ready, the overall status ("", what liveness and
startup probes ask) stays SERVING until the server stops.

The health service also answers `skiff.readiness` (broker/admin/readiness.py), what a
readiness probe asks: NOT_SERVING while a broker is fenced, shutting down or has replicas
that are not back in the ISR yet. It is computed on each Check, and refreshed every
READINESS_REFRESH_S for Watch callers and the `node_readiness` log line of each change.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import grpc
import structlog
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from broker.admin import pb
from broker.admin.acls import AclService
from broker.admin.auth import AclCheck, AdminSecurity, Authenticator, AuthInterceptor
from broker.admin.cluster import ClusterService, QuorumService
from broker.admin.configs import ConfigService
from broker.admin.features import FeatureService
from broker.admin.forward import ADMIN_ENDPOINT, Forwarder
from broker.admin.groups import GroupService
from broker.admin.partitions import PartitionService
from broker.admin.quorum import QuorumDescriber, no_quorum_describer
from broker.admin.quotas import QuotaService
from broker.admin.readiness import READINESS_SERVICE, READY, Readiness
from broker.admin.records import RecordService
from broker.admin.services import AdminServices
from broker.admin.topics import TopicService
from broker.admin.transactions import TransactionService
from broker.config.listeners import parse_host_ports
from broker.handlers import _authz
from broker.security.authorizer import AclOperation, ResourceType
from broker.util.tasks import ServiceTasks

log = structlog.get_logger(__name__)

DEFAULT_ADMIN_LISTENER = "127.0.0.1:9094"
ADMIN_LISTENERS_KEY = "admin.listeners"
_ADMIN_PREFIX = "/skiff.admin."
READINESS_REFRESH_S = 1.0


def parse_admin_listeners(value: str | Sequence[str] | None) -> list[str]:
    """`admin.listeners`: comma-separated `host:port` (or `NAME://host:port`); empty: no
    admin server. None: the default."""
    if value is None:
        return [DEFAULT_ADMIN_LISTENER]
    return [f"{host or '0.0.0.0'}:{port}"
            for host, port in parse_host_ports(ADMIN_LISTENERS_KEY, value)]


def admin_listeners(cfg: Any) -> list[str]:
    """The admin addresses of a NodeConfig: a declared key if broker/config has one, else the
    raw property (unknown keys are kept in `originals`), else the default."""
    value = cfg.get(ADMIN_LISTENERS_KEY) if ADMIN_LISTENERS_KEY in cfg.values else None
    if value is None:
        value = cfg.originals.get(ADMIN_LISTENERS_KEY)
    return parse_admin_listeners(value)


def _abort_handler(handler: grpc.RpcMethodHandler, node_id: int) -> grpc.RpcMethodHandler:
    message = (f"node {node_id} is not ready (still starting: not yet registered with the "
               "controller and unfenced); retry shortly")

    async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
        await context.abort(grpc.StatusCode.UNAVAILABLE, message)

    async def stream(request: Any, context: grpc.aio.ServicerContext) -> Any:
        await context.abort(grpc.StatusCode.UNAVAILABLE, message)
        yield  # pragma: no cover - makes this an async generator

    if handler.unary_stream is not None:
        return grpc.unary_stream_rpc_method_handler(
            stream, request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer)
    return grpc.unary_unary_rpc_method_handler(
        unary, request_deserializer=handler.request_deserializer,
        response_serializer=handler.response_serializer)


class _ReadyGate(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    def __init__(self, node: AdminServices) -> None:
        self.node = node

    async def intercept_service(
        self, continuation: Callable[[grpc.HandlerCallDetails],
                                     Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        if (handler is not None and details.method.startswith(_ADMIN_PREFIX)
                and not self.node.ready.is_set()):
            return _abort_handler(handler, self.node.node_id)
        return handler


class _Health(health.aio.HealthServicer):  # type: ignore[misc]
    """grpc.health.v1 whose `skiff.readiness` status is computed when asked."""

    def __init__(self, readiness: Callable[[], Readiness]) -> None:
        super().__init__()
        self.readiness = readiness
        self.last: Readiness | None = None

    async def refresh(self) -> None:
        try:
            now = self.readiness()
        except Exception as exc:  # a probe gets NOT_SERVING, not an error status
            log.exception("node_readiness_error")
            now = Readiness(False, f"readiness could not be computed: {exc}")
        if now != self.last:
            log.info("node_readiness", ready=now.ready, reason=now.reason or None)
            self.last = now
        await self.set(READINESS_SERVICE, health_pb2.HealthCheckResponse.SERVING if now.ready
                       else health_pb2.HealthCheckResponse.NOT_SERVING)

    async def Check(self, request: health_pb2.HealthCheckRequest,
                    context: grpc.aio.ServicerContext) -> health_pb2.HealthCheckResponse:
        if request.service == READINESS_SERVICE:
            await self.refresh()
        return await super().Check(request, context)


class AdminServer:
    """Start with `await start()` inside the node's event loop; `ports` are the bound ports
    (useful with port 0)."""

    def __init__(self, node: AdminServices, listeners: Sequence[str] = (DEFAULT_ADMIN_LISTENER,), *,
                 describe_quorum: QuorumDescriber | None = None,
                 admin_address_of: Callable[[int], str | None] | None = None,
                 grace_s: float = 1.0, security: AdminSecurity | None = None,
                 readiness: Callable[[], Readiness] | None = None) -> None:
        """`security`: TLS and authentication (broker/admin/auth.py); None: from
        `node.config`. `readiness`: what `skiff.readiness` reports (broker/node's
        Node.readiness); None: ready once `node.ready` is set."""
        self.node = node
        self.listeners = list(listeners)
        self.describe_quorum = describe_quorum or no_quorum_describer()
        self.grace_s = grace_s
        self.ports: list[int] = []
        self._server: grpc.aio.Server | None = None
        self._health = _Health(readiness or self._started)
        self._tasks = ServiceTasks("admin")  # the readiness watch
        self.security = security if security is not None else AdminSecurity.from_config(
            node.config)
        self.forwarder = Forwarder(node, admin_address_of,
                                   credentials=self.security.channel_credentials())

    def _started(self) -> Readiness:
        return READY if self.node.ready.is_set() else Readiness(False, "starting")

    @property
    def addresses(self) -> list[str]:
        return [f"{listener.rpartition(':')[0]}:{port}"
                for listener, port in zip(self.listeners, self.ports, strict=True)]

    def advertised_endpoints(self) -> list[tuple[str, str, int, str]]:
        """(name, host, port, security protocol) of the bound admin listeners, for the broker
        registration, so that other nodes can forward admin writes here. Wildcard hosts are
        not advertised."""
        out = []
        for address in self.addresses:
            host = address.rpartition(":")[0].strip("[]")
            if host not in ("", "0.0.0.0", "::"):
                out.append((ADMIN_ENDPOINT, host, int(address.rpartition(":")[2]),
                            "SSL" if self.security.tls else "PLAINTEXT"))
        return out

    async def start(self) -> None:
        if not self.listeners:
            log.info("admin_disabled", reason=f"{ADMIN_LISTENERS_KEY} is empty")
            return
        # gRPC binds with SO_REUSEPORT by default: several nodes on one host would then all
        # "listen" on the same admin port and the CLI reach a random one. A taken port
        # must fail the start, as Kafka's listeners do.
        authenticator = Authenticator(self.security,
                                      lambda: self.node.metadata.scram_credentials)
        server = grpc.aio.server(
            interceptors=[_ReadyGate(self.node),
                          AuthInterceptor(authenticator, lambda: _acl_check(self.node))],
            options=[("grpc.so_reuseport", 0)])
        credentials = self.security.server_credentials()
        node = self.node
        pb.cluster_grpc.add_ClusterServiceServicer_to_server(ClusterService(node), server)
        fwd = self.forwarder
        pb.cluster_grpc.add_QuorumServiceServicer_to_server(
            QuorumService(node, self.describe_quorum, fwd), server)
        pb.topics_grpc.add_TopicServiceServicer_to_server(TopicService(node, fwd), server)
        pb.partitions_grpc.add_PartitionServiceServicer_to_server(
            PartitionService(node, fwd), server)
        pb.groups_grpc.add_GroupServiceServicer_to_server(GroupService(node, fwd), server)
        pb.configs_grpc.add_ConfigServiceServicer_to_server(ConfigService(node, fwd), server)
        pb.transactions_grpc.add_TransactionServiceServicer_to_server(
            TransactionService(node, fwd), server)
        pb.records_grpc.add_RecordServiceServicer_to_server(RecordService(node), server)
        pb.acls_grpc.add_AclServiceServicer_to_server(AclService(node), server)
        pb.quotas_grpc.add_QuotaServiceServicer_to_server(QuotaService(node), server)
        pb.features_grpc.add_FeatureServiceServicer_to_server(FeatureService(node), server)
        health_pb2_grpc.add_HealthServicer_to_server(self._health, server)
        health_name = health_pb2.DESCRIPTOR.services_by_name["Health"].full_name
        reflection.enable_server_reflection(
            (*pb.SERVICE_NAMES, health_name, reflection.SERVICE_NAME), server)
        for name in ("", *pb.SERVICE_NAMES, READINESS_SERVICE):
            await self._health.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
        ports = []
        for listener in self.listeners:
            wanted = int(listener.rpartition(":")[2])
            try:
                port = (server.add_insecure_port(listener) if credentials is None
                        else server.add_secure_port(listener, credentials))
            except RuntimeError as exc:  # grpcio >= 1.5x raises instead of returning 0
                port, why = 0, str(exc)
            else:
                why = ""
            if port == 0 or (wanted != 0 and port != wanted):
                await server.stop(0)
                raise OSError(
                    f"admin.listeners: cannot bind {listener}: the port is in use or the "
                    f"address is not local{f' ({why})' if why else ''}. Each node needs "
                    f"its own admin port: set admin.listeners (e.g. 127.0.0.1:0 for any "
                    f"free port) or leave it empty to disable the admin API")
            ports.append(port)
        await server.start()
        self._server, self.ports = server, ports
        self._tasks.start_soon(self._serve_when_ready, name="admin_ready")
        log.info("admin_listening", addresses=self.addresses, tls=self.security.tls,
                 client_auth=self.security.client_auth,
                 allow_unauthenticated=self.security.allow_unauthenticated)
        if self.security.allow_unauthenticated == "all":
            log.warning("admin_open_to_all",
                        message="admin.allow.unauthenticated=all: anyone who can reach "
                                f"{', '.join(self.addresses)} may create and delete topics, "
                                "read and write records and change configs without "
                                "credentials. For a development container only")

    async def _serve_when_ready(self) -> None:
        await self.node.ready.wait()
        for name in ("", *pb.SERVICE_NAMES):
            await self._health.set(name, health_pb2.HealthCheckResponse.SERVING)
        while True:
            await self._health.refresh()
            await asyncio.sleep(READINESS_REFRESH_S)

    async def stop(self) -> None:
        await self._tasks.close()
        if self._server is not None:
            await self._health.enter_graceful_shutdown()
            await self._server.stop(self.grace_s)
            self._server = None
        await self.forwarder.close()


def _acl_check(node: AdminServices) -> AclCheck | None:
    """With an authorizer configured, the ACLs decide an admin call: its operation (read
    from the method's name, broker/admin/auth.operation_of) on the cluster resource."""
    if not _authz.enabled(node):
        return None

    def check(principal: str, host: str, operation: str) -> bool:
        return _authz.allowed_for(node, principal, host, AclOperation[operation],
                                  ResourceType.CLUSTER)

    return check

