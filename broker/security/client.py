"""How this node connects to secured listeners of other nodes (inter-broker, controller).

`inter_broker_security(cfg)` / `controller_security(cfg)`: the ConnectionSecurity
(raft/transport.py) for the inter-broker listener and the first controller listener: a
TLS client context when the listener's protocol is SSL/SASL_SSL, None for PLAINTEXT.
"""

from __future__ import annotations

from broker.config import NodeConfig
from broker.protocol.transport import ConnectionSecurity
from broker.security.sasl_config import client_authenticator
from broker.security.tls import client_context_for


def connection_security(cfg: NodeConfig, listener: str,
                        mechanism_key: str) -> ConnectionSecurity | None:
    tls = client_context_for(cfg, listener)
    authenticate = client_authenticator(cfg, listener, mechanism_key)
    if tls is None and authenticate is None:
        return None
    return ConnectionSecurity(ssl=tls, authenticate=authenticate)


def inter_broker_security(cfg: NodeConfig) -> ConnectionSecurity | None:
    return connection_security(cfg, cfg.inter_broker_listener_name,
                               "sasl.mechanism.inter.broker.protocol")


def controller_security(cfg: NodeConfig) -> ConnectionSecurity | None:
    return connection_security(cfg, cfg.controller_listener_names[0],
                               "sasl.mechanism.controller.protocol")
