"""What a handler knows about the request it is answering, besides the request itself."""

from __future__ import annotations

from dataclasses import dataclass

from broker.protocol.api import ApiTable


@dataclass(frozen=True, slots=True)
class RequestContext:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    listener_name: str
    peer_host: str
    peer_port: int
    received_ms: int
    """Wall-clock milliseconds when the whole frame had been read."""
    apis: ApiTable
    """What this listener advertises (ApiVersions answers with it)."""
    connection_id: str = ""
    """Unique per connection: ``local_host:port-peer_host:port-n`` as Kafka names it."""
    principal: str = "User:ANONYMOUS"
    """Who the connection authenticated as (broker/security): from the TLS client
    certificate, else ANONYMOUS."""
    security_protocol: str = "PLAINTEXT"
    """The listener's: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL."""
    token_authenticated: bool = False
    """The connection authenticated with a delegation token (SCRAM with tokenauth=true)."""

    # written out: mypyc compiles it, where dataclass's own runs interpreted (broker/native.py)
    def __init__(
        self, api_key: int, api_version: int, correlation_id: int, client_id: str | None,
        listener_name: str, peer_host: str, peer_port: int, received_ms: int, apis: ApiTable,
        connection_id: str = "", principal: str = "User:ANONYMOUS",
        security_protocol: str = "PLAINTEXT", token_authenticated: bool = False,
    ) -> None:
        object.__setattr__(self, "api_key", api_key)
        object.__setattr__(self, "api_version", api_version)
        object.__setattr__(self, "correlation_id", correlation_id)
        object.__setattr__(self, "client_id", client_id)
        object.__setattr__(self, "listener_name", listener_name)
        object.__setattr__(self, "peer_host", peer_host)
        object.__setattr__(self, "peer_port", peer_port)
        object.__setattr__(self, "received_ms", received_ms)
        object.__setattr__(self, "apis", apis)
        object.__setattr__(self, "connection_id", connection_id)
        object.__setattr__(self, "principal", principal)
        object.__setattr__(self, "security_protocol", security_protocol)
        object.__setattr__(self, "token_authenticated", token_authenticated)
