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
