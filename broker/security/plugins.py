"""Pluggable authorizer and principal builder: Python classes named in the node's config.

`authorizer.class.name` and `principal.builder.class` take a Python class as
`package.module:Class` or `package.module.Class` (importable by the node: on its
PYTHONPATH or installed). Kafka's own names keep meaning Skiff's built-in ones:
org.apache.kafka.metadata.authorizer.StandardAuthorizer (ACLs in the metadata log) and
org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder (User:<SASL
name>, the mapped TLS subject, else User:ANONYMOUS). A class that cannot be imported, or
lacks the method it must have, stops the node with a message naming the setting.

The interfaces (docs/security.md; an example: broker/security/examples/token_claims.py):

    class MyAuthorizer(Authorizer):
        def configure(self, configs: Mapping[str, str]) -> None: ...   # optional
        def authorize(self, context: AuthorizableRequestContext, action: Action) -> bool: ...
        def authorize_by_resource_type(self, context, operation, resource_type) -> bool: ...

    class MyPrincipalBuilder(PrincipalBuilder):
        def configure(self, configs: Mapping[str, str]) -> None: ...   # optional
        def build(self, context: AuthenticationContext) -> str: ...    # "Type:name"

Both are made once per node, `configure` gets every setting of the node as written
(including `plugin.*` keys, which Skiff accepts unchecked for plugins). `authorize` is
called for every check Kafka's authorizer would make (Kafka's Authorizer.authorize, one
action at a time); `context.acls_allow(action)` is what the built-in StandardAuthorizer
would decide with the node's ACLs and super.users, for plugins that add rules on top.
An exception in a plugin denies (authorize) or fails the authentication (build); it never
takes the node down.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from broker.config.types import ConfigError

log = structlog.get_logger("skiff.security.plugins")

DEFAULT_PRINCIPAL_BUILDER = \
    "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder"


def load_class(key: str, name: str) -> type:
    """The class `name` (`module:Class` or `module.Class`), or ConfigError for `key`."""
    name = name.strip()
    if ":" in name:
        module, _, attr = name.partition(":")
    else:
        module, _, attr = name.rpartition(".")
    java = name.startswith(("org.apache.kafka.", "kafka.", "io.confluent."))
    if not module or not attr:
        raise ConfigError(key, name, "a Python class as package.module:Class or "
                          "package.module.Class")
    try:
        mod = importlib.import_module(module)
        cls = getattr(mod, attr)
    except Exception as e:
        why = (f"{name} looks like a Java class, which Skiff cannot run; name a Python "
               "class instead" if java else f"it cannot be imported: {type(e).__name__}: {e}")
        raise ConfigError(key, name, f"an importable Python class (package.module:Class on "
                          f"the node's PYTHONPATH): {why}") from None
    if not isinstance(cls, type):
        raise ConfigError(key, name, f"a class ({name} is a {type(cls).__name__})")
    return cls


def _require(key: str, name: str, cls: type, method: str) -> None:
    if not callable(getattr(cls, method, None)):
        raise ConfigError(key, name, f"a class with a {method}() method (see "
                          "broker/security/plugins.py and docs/security.md)")


# -- authorizer ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Action:
    """One check (Kafka's Action): an operation on a named resource."""

    operation: Any       # broker.security.authorizer.AclOperation
    resource_type: Any   # broker.security.authorizer.ResourceType
    resource_name: str


@dataclass(frozen=True)
class AuthorizableRequestContext:
    """Who asks (Kafka's AuthorizableRequestContext): principal `Type:name` and host."""

    principal: str
    host: str
    _standard: Callable[[Action], bool] = dataclasses.field(repr=False, compare=False)
    _standard_any: Callable[[Any, Any], bool] = dataclasses.field(repr=False, compare=False)

    def acls_allow(self, action: Action) -> bool:
        """The built-in StandardAuthorizer's decision (ACLs, super.users,
        allow.everyone.if.no.acl.found) for this principal and host."""
        return self._standard(action)

    def acls_allow_any(self, operation: Any, resource_type: Any) -> bool:
        """The StandardAuthorizer's authorizeByResourceType for this principal and host."""
        return self._standard_any(operation, resource_type)


class Authorizer:
    """Base class of authorizer plugins; subclasses define `authorize`."""

    def configure(self, configs: Mapping[str, str]) -> None:
        """Called once with the node's settings, before any check."""

    def authorize(self, context: AuthorizableRequestContext, action: Action) -> bool:
        raise NotImplementedError

    def authorize_by_resource_type(self, context: AuthorizableRequestContext, operation: Any,
                                   resource_type: Any) -> bool:
        """May the principal do `operation` on at least one resource of the type? (Kafka's
        authorizeByResourceType: idempotent producers without IDEMPOTENT_WRITE, for one.)
        By default: the StandardAuthorizer's answer from the ACLs."""
        return context.acls_allow_any(operation, resource_type)


# The StandardAuthorizer's decisions for one principal and host, as broker/security/
# authorizer.py hands them to the adapter: (operation, resource type, name) and
# (operation, resource type) -> allowed.
StandardDecision = Callable[[Any, Any, str], bool]
StandardDecisionAny = Callable[[Any, Any], bool]


class AuthorizerAdapter:
    """What broker/security/authorizer.py calls when a plugin is configured, with the
    StandardAuthorizer's own decisions for the plugin's `acls_allow` (this module does not
    import the authorizer: the authorizer loads its plugins from here)."""

    def __init__(self, plugin: Any, name: str) -> None:
        self.plugin = plugin
        self.name = name

    @staticmethod
    def _context(principal: str, host: str, standard: StandardDecision,
                 standard_any: StandardDecisionAny) -> AuthorizableRequestContext:
        def decide(a: Action) -> bool:
            return standard(a.operation, a.resource_type, a.resource_name)

        return AuthorizableRequestContext(principal, host, decide, standard_any)

    def authorize(self, principal: str, host: str, op: Any, rtype: Any, name: str,
                  standard: StandardDecision, standard_any: StandardDecisionAny) -> bool:
        ctx = self._context(principal, host, standard, standard_any)
        try:
            return bool(self.plugin.authorize(ctx, Action(op, rtype, name)))
        except Exception:
            log.exception("authorizer_plugin_failed", authorizer=self.name,
                          principal=principal, operation=getattr(op, "name", op),
                          resource=f"{getattr(rtype, 'name', rtype)}:{name}")
            return False

    def authorize_any(self, principal: str, host: str, op: Any, rtype: Any,
                      standard: StandardDecision, standard_any: StandardDecisionAny) -> bool:
        ctx = self._context(principal, host, standard, standard_any)
        try:
            return bool(self.plugin.authorize_by_resource_type(ctx, op, rtype))
        except Exception:
            log.exception("authorizer_plugin_failed", authorizer=self.name,
                          principal=principal, operation=getattr(op, "name", op),
                          resource_type=getattr(rtype, "name", rtype))
            return False


def authorizer_class(name: str) -> type:
    cls = load_class("authorizer.class.name", name)
    _require("authorizer.class.name", name, cls, "authorize")
    return cls


_INSTANCES: dict[tuple[str, str, int], tuple[object, Any]] = {}


def _instance(kind: str, name: str, cls: type, configs: Mapping[str, str], key: str) -> Any:
    """One configured plugin per (class, node config object)."""
    cache_key = (kind, name, id(configs))
    hit = _INSTANCES.get(cache_key)
    if hit is not None and hit[0] is configs:
        return hit[1]
    try:
        plugin = cls()
        configure = getattr(plugin, "configure", None)
        if callable(configure):
            configure(dict(configs))
    except ConfigError:
        raise
    except Exception as e:
        raise ConfigError(key, name, f"a plugin that starts: {type(e).__name__}: {e}") from None
    if len(_INSTANCES) > 64:
        _INSTANCES.clear()
    _INSTANCES[cache_key] = (configs, plugin)
    return plugin


def authorizer_adapter(name: str, configs: Mapping[str, str]) -> AuthorizerAdapter:
    cls = authorizer_class(name)
    return AuthorizerAdapter(_instance("authorizer", name, cls, configs,
                                       "authorizer.class.name"), name)


# -- principal builder -----------------------------------------------------------------------


@dataclass(frozen=True)
class AuthenticationContext:
    """What a connection authenticated with (Kafka's AuthenticationContext)."""

    security_protocol: str                 # PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL
    listener_name: str
    client_address: str
    default_principal: str                 # what Skiff's default builder gives
    sasl_mechanism: str | None = None
    sasl_authorization_id: str | None = None
    ssl_peer_subject: str | None = None    # RFC 2253, as Java prints it
    token_claims: Mapping[str, Any] | None = None  # OAUTHBEARER: the validated claims
    sasl_extensions: Mapping[str, str] | None = None


class PrincipalBuilder:
    """Base class of principal builder plugins; subclasses define `build`."""

    def configure(self, configs: Mapping[str, str]) -> None:
        """Called once with the node's settings."""

    def build(self, context: AuthenticationContext) -> str:
        raise NotImplementedError


class PrincipalError(Exception):
    pass


class PrincipalBuilderHook:
    """A listener's principal builder: `principal(...)` -> `Type:name`."""

    def __init__(self, plugin: Any, name: str, listener: str, protocol: str) -> None:
        self.plugin = plugin
        self.name = name
        self.listener = listener
        self.protocol = protocol

    def principal(self, client_address: str, default: str, **auth: Any) -> str:
        ctx = AuthenticationContext(self.protocol, self.listener, client_address, default,
                                    **auth)
        try:
            out = self.plugin.build(ctx)
        except Exception as e:
            raise PrincipalError(f"principal builder {self.name} failed: "
                                 f"{type(e).__name__}: {e}") from e
        kind, sep, rest = str(out).partition(":") if isinstance(out, str) else ("", "", "")
        if not sep or not kind or not rest:
            raise PrincipalError(f"principal builder {self.name} returned {out!r}, not a "
                                 "principal Type:name")
        return str(out)


def principal_builder_class(name: str) -> type | None:
    name = name.strip()
    if not name or name == DEFAULT_PRINCIPAL_BUILDER:
        return None
    cls = load_class("principal.builder.class", name)
    _require("principal.builder.class", name, cls, "build")
    return cls


def principal_builder_for(cfg: Any, listener: str) -> PrincipalBuilderHook | None:
    """The listener's hook, or None for the built-in builder."""
    name = (cfg.get("principal.builder.class") or "").strip()
    cls = principal_builder_class(name)
    if cls is None:
        return None
    plugin = _instance("principal", name, cls, cfg.originals, "principal.builder.class")
    protocol = cfg.security_protocol_map.get(listener.upper(), "PLAINTEXT")
    return PrincipalBuilderHook(plugin, name, listener, protocol)
