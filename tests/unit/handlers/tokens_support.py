"""What the delegation-token handler tests share: a node with a secret key, contexts of a
SASL connection as some principal, and requests built with kio."""

from __future__ import annotations

import dataclasses
import datetime
import importlib
from typing import Any

from broker.handlers import create_delegation_token
from broker.protocol.kio_build import build
from broker.server.context import RequestContext
from tests.unit.handlers.conftest import TestNode, make_ctx, run

SECRET = "s3cret-key"
WITH_TOKENS = {"delegation.token.secret.key": SECRET}


def ctx(api_key: int, version: int, principal: str = "User:alice",
        protocol: str = "SASL_PLAINTEXT", token: bool = False) -> RequestContext:
    return dataclasses.replace(make_ctx(api_key, version), principal=principal,
                               security_protocol=protocol, token_authenticated=token)


def request(api: str, version: int, cls: str, **fields: Any) -> Any:
    m = importlib.import_module(f"kio.schema.{api}.v{version}.request")
    return build(getattr(m, cls), **fields)


def ms(n: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=n)


def create(node: TestNode, principal: str = "User:alice", *, version: int = 3,
           owner: str | None = None, renewers: tuple[str, ...] = (),
           max_lifetime_ms: int = -1, protocol: str = "SASL_PLAINTEXT",
           token: bool = False) -> Any:
    m = importlib.import_module(f"kio.schema.create_delegation_token.v{version}.request")
    kind, _, name = (owner or "").partition(":")
    req = build(m.CreateDelegationTokenRequest,
                owner_principal_type=kind or None, owner_principal_name=name or None,
                renewers=tuple(build(m.CreatableRenewers, principal_type=r.split(":", 1)[0],
                                     principal_name=r.split(":", 1)[1]) for r in renewers),
                max_lifetime=ms(max_lifetime_ms))
    return run(create_delegation_token.handle(node, ctx(38, version, principal, protocol, token),
                                              req))


def epoch_ms(value: datetime.datetime) -> int:
    return round(value.timestamp() * 1000)


def encoded(entity: Any) -> bytes:
    """The entity's bytes (kio's writer): refusals carry -1 timestamps, which kio's reader
    refuses, so those are only written."""
    import io

    from kio.serial import entity_writer

    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    return buf.getvalue()
