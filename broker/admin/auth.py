"""Who is calling the gRPC admin plane, and may they (docs/security.md, "The admin plane").

Transport: `admin.ssl.certificate.location` + `admin.ssl.key.location` (PEM) make every
admin listener TLS; `admin.ssl.truststore.location` (PEM CAs) with `admin.ssl.client.auth`
(none | required) asks for client certificates. Kafka's `requested` (ask, do not insist) is
refused at startup: grpcio offers no way to ask for a certificate without requiring it.

Authentication, per call, first that applies:
  1. a verified client certificate: `User:<subject mapped by admin.ssl.principal.mapping.rules>`
     (broker/security/principal.py, Kafka's SslPrincipalMapper; gRPC prints the subject in
     RFC 2253 order, "O=Skiff,OU=eng,CN=alice", as the Kafka listeners and Java do);
  2. credentials in the call metadata, `skiff-user` and `skiff-password` (mechanism in
     `skiff-sasl-mechanism`, default SCRAM-SHA-512): checked against the SCRAM credential of
     the metadata log (`skiff users`, UserScramCredential records), `User:<name>`. The
     password travels in the metadata, so it is refused over plaintext unless the peer is
     on loopback;
  3. no credentials: `User:ANONYMOUS`, admitted only with `admin.allow.unauthenticated=
     loopback` and a loopback peer (what `skiff dev` sets), or with `all` (any peer: a
     development container reached through a published port; the server warns at start);
     otherwise UNAUTHENTICATED.
Bad credentials are UNAUTHENTICATED whatever the policy.

Authorization: `authorize_admin(principal, operation, resource)` (PERMISSION_DENIED when it
says no). With `authorizer.class.name` set, the node's ACLs decide: the method's operation
on the cluster resource, for the principal and the caller's host (the server passes an
`acl` check built on broker/handlers/_authz.py). Without an authorizer: a principal in
`super.users`, or any authenticated one.

`AuthInterceptor` does this for every `/skiff.admin.` method (grpc.health.v1 and reflection
stay open: they reveal nothing but liveness and the public schema) and puts the principal
in `current_principal` for the call's handler (`principal()`).
"""

from __future__ import annotations

import contextvars
import hashlib
import ipaddress
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import grpc
import structlog

from broker.config import ConfigError
from broker.security import scram
from broker.security.principal import ANONYMOUS, MappingRuleError, PrincipalMapper
from broker.security.scram import ScramCredential

log = structlog.get_logger(__name__)

USER_KEY = "skiff-user"
PASSWORD_KEY = "skiff-password"
MECHANISM_KEY = "skiff-sasl-mechanism"
DEFAULT_MECHANISM = "SCRAM-SHA-512"
ADMIN_PREFIX = "/skiff.admin."
CLUSTER_RESOURCE = "Cluster:kafka-cluster"

current_principal: contextvars.ContextVar[str] = contextvars.ContextVar(
    "admin_principal", default=ANONYMOUS)

# (principal, operation, resource) -> allowed, overriding every other rule (tests set it);
# None: the node's ACLs when it has an authorizer, else the default policy below.
ADMIN_AUTHORIZER: Callable[[str, str, str], bool] | None = None
# (principal, host, operation) -> allowed by the node's ACLs on the cluster resource.
AclCheck = Callable[[str, str, str], bool]


def principal() -> str:
    """The principal of the admin call being handled (set by AuthInterceptor)."""
    return current_principal.get()


def operation_of(method: str) -> tuple[str, str]:
    """(Kafka ACL operation, resource) of an admin method "/skiff.admin.v1.X/Verb": reads
    DESCRIBE, CreateX CREATE, DeleteX DELETE, Produce WRITE, Consume READ, anything else
    ALTER; the resource is the cluster (the ACL authorizer may look at the method, the
    third part, to narrow it to a topic or group)."""
    verb = method.rsplit("/", 1)[-1]
    if verb.startswith(("Describe", "List", "Get")):
        op = "DESCRIBE"
    elif verb.startswith("Create"):
        op = "CREATE"
    elif verb.startswith("Delete"):
        op = "DELETE"
    elif verb.startswith("Produce"):
        op = "WRITE"
    elif verb.startswith("Consume"):
        op = "READ"
    else:
        op = "ALTER"
    return op, CLUSTER_RESOURCE


def authorize_admin(principal: str, operation: str, resource: str, *,
                    super_users: frozenset[str] = frozenset(),
                    anonymous_admitted: bool = False, host: str = "",
                    acl: AclCheck | None = None) -> bool:
    """May `principal` (calling from `host`) do `operation` on `resource` through the admin
    plane?

    ADMIN_AUTHORIZER, when set, decides. ANONYMOUS admitted by admin.allow.unauthenticated
    (`anonymous_admitted`: the operator's explicit "anyone on this host is trusted", for
    loopback development) may. Otherwise, on a node with an authorizer, its ACLs decide
    through `acl` (super users pass there, as in Kafka's StandardAuthorizer); without one, a
    super user or any authenticated principal may."""
    if ADMIN_AUTHORIZER is not None:
        return ADMIN_AUTHORIZER(principal, operation, resource)
    if principal == ANONYMOUS and anonymous_admitted:
        return True
    if acl is not None:
        return acl(principal, host, operation)
    return principal in super_users or principal != ANONYMOUS


def peer_host(peer: str) -> str:
    """The host of a gRPC peer string ("ipv4:127.0.0.1:5000" -> "127.0.0.1")."""
    kind, _, rest = peer.partition(":")
    if kind == "ipv6":
        return rest.rpartition(":")[0].strip("[]")
    if kind == "ipv4":
        return rest.rpartition(":")[0]
    return "127.0.0.1" if kind == "unix" else rest


def is_loopback(peer: str) -> bool:
    """A gRPC peer string ("ipv4:127.0.0.1:5000", "ipv6:[::1]:5000", "unix:...")."""
    kind = peer.partition(":")[0]
    if kind == "unix":
        return True
    if kind not in ("ipv4", "ipv6"):
        return False
    try:
        return ipaddress.ip_address(peer_host(peer)).is_loopback
    except ValueError:
        return False


class AdminAuthError(Exception):
    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _read(path: str | None, key: str) -> bytes | None:
    if not path:
        return None
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise ConfigError(key, path, f"a readable PEM file ({exc.strerror})") from None


@dataclass(frozen=True)
class AdminSecurity:
    certificate: bytes | None = None  # PEM chain
    key: bytes | None = None
    truststore: bytes | None = None
    client_auth: str = "none"
    mapper: PrincipalMapper = field(default_factory=PrincipalMapper)
    allow_unauthenticated: str = "none"
    super_users: frozenset[str] = frozenset()

    @property
    def tls(self) -> bool:
        return self.certificate is not None

    @staticmethod
    def from_config(cfg: Any) -> AdminSecurity:
        values = getattr(cfg, "values", None)
        if not isinstance(values, Mapping):  # a plain mapping of properties (tests)
            values = cfg if isinstance(cfg, Mapping) else {}
        originals = getattr(cfg, "originals", None)
        originals = originals if isinstance(originals, Mapping) else values

        def get(key: str) -> Any:
            return values.get(key)

        cert_path = get("admin.ssl.certificate.location")
        key_path = get("admin.ssl.key.location")
        if bool(cert_path) != bool(key_path):
            raise ConfigError("admin.ssl.certificate.location", cert_path or "(unset)",
                              "set together with admin.ssl.key.location")
        client_auth = get("admin.ssl.client.auth") or "none"
        trust_path = get("admin.ssl.truststore.location")
        if client_auth != "none" and not (cert_path and trust_path):
            raise ConfigError("admin.ssl.client.auth", client_auth,
                              "none unless admin.ssl.certificate.location, "
                              "admin.ssl.key.location and admin.ssl.truststore.location are set")
        rules = get("admin.ssl.principal.mapping.rules") or "DEFAULT"
        try:
            mapper = PrincipalMapper(rules)
        except MappingRuleError as exc:
            raise ConfigError("admin.ssl.principal.mapping.rules", rules, str(exc)) from None
        supers = get("super.users")
        if supers is None:
            supers = originals.get("super.users", "")
        if isinstance(supers, str):
            supers = [s for s in supers.split(";") if s.strip()]
        return AdminSecurity(
            certificate=_read(cert_path, "admin.ssl.certificate.location"),
            key=_read(key_path, "admin.ssl.key.location"),
            truststore=_read(trust_path, "admin.ssl.truststore.location"),
            client_auth=client_auth, mapper=mapper,
            allow_unauthenticated=get("admin.allow.unauthenticated") or "none",
            super_users=frozenset(s.strip() for s in supers))

    def server_credentials(self) -> grpc.ServerCredentials | None:
        if self.certificate is None or self.key is None:
            return None
        required = self.client_auth == "required"
        return grpc.ssl_server_credentials(
            [(self.key, self.certificate)],
            root_certificates=self.truststore if required else None,
            require_client_auth=required)

    def channel_credentials(self) -> grpc.ChannelCredentials | None:
        """For this node's own calls to another node's admin listener (forwarding): trust
        the admin truststore, present this node's certificate."""
        if self.certificate is None or self.key is None:
            return None
        return grpc.ssl_channel_credentials(
            root_certificates=self.truststore, private_key=self.key,
            certificate_chain=self.certificate)


class Authenticator:
    """Maps one call (peer, TLS auth context, metadata) to a principal; raises
    AdminAuthError."""

    def __init__(self, security: AdminSecurity,
                 scram_credentials: Callable[[], Mapping[tuple[str, str], ScramCredential]]
                 ) -> None:
        self.security = security
        self.scram_credentials = scram_credentials
        self._verified: dict[tuple[str, str, bytes], bytes] = {}

    def authenticate(self, peer: str, auth_context: Mapping[str, Any],
                     metadata: Mapping[str, str]) -> str:
        subject = auth_context.get("x509_subject")
        if subject:
            dn = subject[0].decode() if isinstance(subject[0], bytes) else str(subject[0])
            try:
                return "User:" + self.security.mapper.name(dn)
            except MappingRuleError as exc:
                raise AdminAuthError(grpc.StatusCode.UNAUTHENTICATED,
                                     f"client certificate {dn!r}: {exc}") from None
        user, password = metadata.get(USER_KEY), metadata.get(PASSWORD_KEY)
        if user is not None or password is not None:
            if not self.security.tls and not is_loopback(peer):
                raise AdminAuthError(
                    grpc.StatusCode.UNAUTHENTICATED,
                    "credentials refused: the admin listener is plaintext and the caller is "
                    "not on loopback (set admin.ssl.* so passwords travel under TLS)")
            return self._password(user or "", password or "",
                                  metadata.get(MECHANISM_KEY, DEFAULT_MECHANISM))
        policy = self.security.allow_unauthenticated
        if policy == "all" or (policy == "loopback" and is_loopback(peer)):
            return ANONYMOUS
        raise AdminAuthError(
            grpc.StatusCode.UNAUTHENTICATED,
            "the admin API needs authentication: a client certificate (admin.ssl.client."
            "auth) or SCRAM credentials (skiff --username/--password or --command-config); "
            "unauthenticated access is only for loopback callers with "
            "admin.allow.unauthenticated=loopback (docs/deploy.md: the admin API from the "
            "host)")

    def _password(self, user: str, password: str, mechanism: str) -> str:
        failed = AdminAuthError(grpc.StatusCode.UNAUTHENTICATED,
                                f"authentication failed for user {user!r} ({mechanism})")
        if mechanism not in scram.MECHANISMS:
            raise AdminAuthError(grpc.StatusCode.UNAUTHENTICATED,
                                 f"unsupported SASL mechanism {mechanism!r}; use one of "
                                 f"{', '.join(scram.MECHANISMS)}")
        cred = self.scram_credentials().get((mechanism, user))
        if cred is None:
            raise failed
        digest = hashlib.sha256(password.encode()).digest()
        key = (mechanism, user, digest)
        if self._verified.get(key) != cred.stored_key:
            if not scram.verify_password(cred, password):
                raise failed
            if len(self._verified) > 1024:
                self._verified.clear()
            self._verified[key] = cred.stored_key
        return "User:" + user


def _wrap(handler: grpc.RpcMethodHandler,
          check: Callable[[grpc.aio.ServicerContext], Awaitable[str]]
          ) -> grpc.RpcMethodHandler:
    if handler.unary_unary is not None:
        inner = handler.unary_unary

        async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
            current_principal.set(await check(context))
            return await inner(request, context)

        return grpc.unary_unary_rpc_method_handler(
            unary, request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer)
    if handler.unary_stream is not None:
        inner_stream = handler.unary_stream

        async def stream(request: Any, context: grpc.aio.ServicerContext) -> Any:
            current_principal.set(await check(context))
            async for item in inner_stream(request, context):
                yield item

        return grpc.unary_stream_rpc_method_handler(
            stream, request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer)
    return handler  # no streaming-request methods in skiff.admin.v1


class AuthInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    def __init__(self, authenticator: Authenticator,
                 acl: Callable[[], AclCheck | None] = lambda: None) -> None:
        self.authenticator = authenticator
        self.acl = acl  # the node's ACL check now (None: no authorizer configured)

    async def intercept_service(
        self, continuation: Callable[[grpc.HandlerCallDetails],
                                     Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        if handler is None or not details.method.startswith(ADMIN_PREFIX):
            return handler
        method = details.method
        auth = self.authenticator

        async def check(context: grpc.aio.ServicerContext) -> str:
            metadata = {k: v for k, v in (context.invocation_metadata() or ())
                        if isinstance(v, str)}
            try:
                who = auth.authenticate(context.peer(), context.auth_context(), metadata)
            except AdminAuthError as exc:
                log.info("admin_unauthenticated", method=method, peer=context.peer(),
                         reason=exc.message)
                await context.abort(exc.code, exc.message)
                raise  # not reached: abort raises
            operation, resource = operation_of(method)
            if not authorize_admin(who, operation, resource,
                                   super_users=auth.security.super_users,
                                   anonymous_admitted=who == ANONYMOUS,
                                   host=peer_host(context.peer()), acl=self.acl()):
                log.info("admin_denied", method=method, principal=who, operation=operation)
                await context.abort(grpc.StatusCode.PERMISSION_DENIED,
                                    f"{who} may not {operation} {resource} ({method})")
            return who

        return _wrap(handler, check)
