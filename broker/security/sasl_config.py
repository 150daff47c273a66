"""SASL settings of a listener, server and client side, from Kafka's keys.

Server: `listener.name.<l>.sasl.enabled.mechanisms` (or `sasl.enabled.mechanisms`) among
PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER (broker/security/oauthbearer_config.py);
PLAIN's users from the listener's
`listener.name.<l>.plain.sasl.jaas.config` (PlainLoginModule `user_<name>="<password>"`);
SCRAM credentials from the metadata log (the lookup the node passes in).
Client (inter-broker, controller): the mechanism from `sasl.mechanism.inter.broker.protocol`
/ `sasl.mechanism.controller.protocol`, `username`/`password` from the same listener's
JAAS config for that mechanism.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from broker.config import ConfigError, NodeConfig
from broker.security.jaas import PLAIN_MODULE, SCRAM_MODULE, JaasEntry, JaasError, parse_jaas
from broker.security.sasl import CLIENT_MECHANISMS, SUPPORTED_MECHANISMS, SaslConfig
from broker.security.scram import ScramClient, ScramCredential, ScramError, TokenLookup

SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
_TIMEOUT_S = 10.0


def _prefix(listener: str) -> str:
    return f"listener.name.{listener.lower()}."


def _original(cfg: NodeConfig, key: str) -> str | None:
    for k, v in cfg.originals.items():
        if k.lower() == key:
            return v
    return None


def jaas_key(listener: str, mechanism: str) -> str:
    return f"{_prefix(listener)}{mechanism.lower()}.sasl.jaas.config"


def jaas_for(cfg: NodeConfig, listener: str, mechanism: str) -> JaasEntry | None:
    key = jaas_key(listener, mechanism)
    text = _original(cfg, key)
    if text is None:
        return None
    try:
        return parse_jaas(text)
    except JaasError as e:
        raise ConfigError(key, "[hidden]", str(e)) from None


def enabled_mechanisms(cfg: NodeConfig, listener: str) -> list[str]:
    key = _prefix(listener) + "sasl.enabled.mechanisms"
    raw = _original(cfg, key)
    names = cfg["sasl.enabled.mechanisms"] if raw is None else \
        [x.strip() for x in raw.split(",") if x.strip()]
    for name in names:
        if name not in SUPPORTED_MECHANISMS:
            raise ConfigError(key + " (or sasl.enabled.mechanisms)", ",".join(names),
                              f"mechanisms among {', '.join(SUPPORTED_MECHANISMS)} for "
                              f"SASL listener {listener}: {name} is not implemented")
    if not names:
        raise ConfigError(key, "", f"at least one mechanism for SASL listener {listener}")
    return names


def is_sasl(cfg: NodeConfig, listener: str) -> bool:
    return cfg.security_protocol_map.get(listener.upper(), "PLAINTEXT") in SASL_PROTOCOLS


def server_sasl_for(cfg: NodeConfig, listener: str,
                    scram: Callable[[str, str], ScramCredential | None],
                    tokens: Callable[[str, str], TokenLookup | None] | None = None,
                    ) -> SaslConfig | None:
    """`tokens`: delegation tokens' SCRAM credentials (None: tokens are disabled)."""
    if not is_sasl(cfg, listener):
        return None
    enabled = enabled_mechanisms(cfg, listener)
    users: dict[str, str] = {}
    if "PLAIN" in enabled:
        entry = jaas_for(cfg, listener, "PLAIN")
        if entry is None or entry.module != PLAIN_MODULE:
            raise ConfigError(jaas_key(listener, "PLAIN"), None,
                              f"a {PLAIN_MODULE} entry with user_<name>=\"<password>\" options "
                              f"(PLAIN is enabled on listener {listener})")
        users = entry.plain_users()
    oauthbearer = None
    if "OAUTHBEARER" in enabled:
        from broker.security.oauthbearer_config import mechanism_factory

        oauthbearer = mechanism_factory(cfg, listener)
    return SaslConfig(tuple(enabled), users, scram, int(cfg["connections.max.reauth.ms"]),
                      oauthbearer, tokens=tokens)


def client_authenticator(cfg: NodeConfig, listener: str, mechanism_key: str,
                         ) -> Callable[[Any], Any] | None:
    """The authenticate step (broker.protocol.transport.ConnectionSecurity) for connecting to
    `listener` on other nodes, or None when that listener is not SASL."""
    if not is_sasl(cfg, listener):
        return None
    mechanism = cfg[mechanism_key]
    if mechanism not in CLIENT_MECHANISMS:
        raise ConfigError(mechanism_key, mechanism,
                          f"one of {', '.join(CLIENT_MECHANISMS)} (listener {listener} "
                          "is SASL; Kafka's default GSSAPI is not implemented, and Skiff "
                          "nodes do not log in to each other with OAUTHBEARER)")
    entry = jaas_for(cfg, listener, mechanism)
    module = PLAIN_MODULE if mechanism == "PLAIN" else SCRAM_MODULE
    if entry is None or entry.module != module or "username" not in entry.options \
            or "password" not in entry.options:
        raise ConfigError(jaas_key(listener, mechanism), None,
                          f"a {module} entry with username and password: the credentials "
                          f"this node authenticates with on listener {listener}")
    return make_authenticator(mechanism, entry.options["username"], entry.options["password"])


def make_authenticator(mechanism: str, username: str, password: str) -> Callable[[Any], Any]:
    async def authenticate(exchange: Callable[..., Any]) -> int:
        from kio.schema.sasl_authenticate.v2 import request as auth_req
        from kio.schema.sasl_handshake.v1 import request as hs_req

        hs: Any = await exchange(SASL_HANDSHAKE, 1,
                                 hs_req.SaslHandshakeRequest(mechanism=mechanism), _TIMEOUT_S)
        if int(hs.error_code) != 0:
            raise ConnectionError(f"SASL handshake refused ({hs.error_code.name}); the server "
                                  f"enables {list(hs.mechanisms)}")

        async def step(token: bytes) -> Any:
            resp: Any = await exchange(SASL_AUTHENTICATE, 2,
                                       auth_req.SaslAuthenticateRequest(auth_bytes=token),
                                       _TIMEOUT_S)
            if int(resp.error_code) != 0:
                raise ConnectionError(f"SASL authentication failed: {resp.error_message}")
            return resp

        if mechanism == "PLAIN":
            resp = await step(b"\0" + username.encode() + b"\0" + password.encode())
        else:
            client = ScramClient(mechanism, username, password)
            first = await step(client.first())
            try:
                resp = await step(client.final(bytes(first.auth_bytes)))
                client.verify(bytes(resp.auth_bytes))
            except ScramError as e:
                raise ConnectionError(f"SASL/{mechanism}: {e}") from None
        return int(resp.session_lifetime.total_seconds() * 1000)

    return authenticate


def check_sasl(cfg: NodeConfig) -> None:
    """Every SASL setting this node will use, so a bad one stops startup."""
    for lst in cfg.listeners:
        server_sasl_for(cfg, lst.name, lambda _m, _u: None)
    if cfg.is_broker:
        client_authenticator(cfg, cfg.inter_broker_listener_name,
                             "sasl.mechanism.inter.broker.protocol")
    client_authenticator(cfg, cfg.controller_listener_names[0],
                         "sasl.mechanism.controller.protocol")
