"""DescribeClientQuotas v0 with no quotas configured: an empty answer clients parse (the
filter semantics are tested with AlterClientQuotas in test_alter_client_quotas.py)."""

from __future__ import annotations

import importlib

from kio.schema.errors import ErrorCode

from broker.handlers import describe_client_quotas
from broker.protocol.kio_build import build
from tests.unit.handlers.conftest import TestNode, make_ctx, roundtrip, run


def test_empty_answer_that_clients_parse(node: TestNode) -> None:
    m = importlib.import_module("kio.schema.describe_client_quotas.v0.request")
    req = build(m.DescribeClientQuotasRequest, components=(), strict=False)
    resp = run(describe_client_quotas.handle(node, make_ctx(48, 0), req))
    roundtrip(resp)
    assert resp.error_code is ErrorCode.none and resp.entries == ()
