"""AlterClientQuotas v0-v1 through the handler and the local controller: records reach the
image, DescribeClientQuotas reads them back, and each of Kafka's validation errors answers
its entity alone."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.handlers import alter_client_quotas, describe_client_quotas
from broker.protocol.kio_build import build
from tests.unit.handlers.conftest import TestNode, make_ctx, roundtrip, run


def _alter(node: TestNode, version: int, entries: list[tuple[list[tuple[str, str | None]],
                                                             list[tuple[str, float | None]]]],
           validate_only: bool = False) -> Any:
    m = importlib.import_module(f"kio.schema.alter_client_quotas.v{version}.request")
    req = m.AlterClientQuotasRequest(validate_only=validate_only, entries=tuple(
        m.EntryData(entity=tuple(m.EntityData(entity_type=t, entity_name=n) for t, n in ent),
                    ops=tuple(m.OpData(key=k, value=v or 0.0, remove=v is None)
                              for k, v in ops))
        for ent, ops in entries))
    resp = run(alter_client_quotas.handle(node, make_ctx(49, version), req))
    roundtrip(resp)
    return resp


def _describe(node: TestNode, version: int, components: list[tuple[str, int, str | None]],
              strict: bool = False) -> Any:
    m = importlib.import_module(f"kio.schema.describe_client_quotas.v{version}.request")
    req = build(m.DescribeClientQuotasRequest, strict=strict, components=tuple(
        m.ComponentData(entity_type=t, match_type=mt, match=x) for t, mt, x in components))
    resp = run(describe_client_quotas.handle(node, make_ctx(48, version), req))
    roundtrip(resp)
    return resp


def _found(resp: Any) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
    assert resp.error_code is ErrorCode.none, resp.error_message
    return {tuple((e.entity_type, e.entity_name) for e in x.entity):
            {v.key: v.value for v in x.values} for x in resp.entries}


@pytest.mark.parametrize("version", [0, 1])
def test_alter_then_describe_round_trip(node: TestNode, version: int) -> None:
    resp = _alter(node, version, [
        ([("user", "alice")], [("producer_byte_rate", 1024.0), ("consumer_byte_rate", 2048.0)]),
        ([("user", "alice"), ("client-id", "app")], [("request_percentage", 12.5)]),
        ([("user", None)], [("producer_byte_rate", 100.0)]),
        ([("client-id", None)], [("controller_mutation_rate", 5.0)]),
        ([("ip", "127.0.0.1")], [("connection_creation_rate", 10.0)]),
    ])
    assert [e.error_code for e in resp.entries] == [ErrorCode.none] * 5
    everything = _found(_describe(node, version, []))
    assert everything == {
        (("client-id", None),): {"controller_mutation_rate": 5.0},
        (("client-id", "app"), ("user", "alice")): {"request_percentage": 12.5},
        (("ip", "127.0.0.1"),): {"connection_creation_rate": 10.0},
        (("user", None),): {"producer_byte_rate": 100.0},
        (("user", "alice"),): {"consumer_byte_rate": 2048.0, "producer_byte_rate": 1024.0},
    }
    # exact, non-strict: alice alone and alice with a client id
    assert set(_found(_describe(node, version, [("user", 0, "alice")]))) == {
        (("user", "alice"),), (("client-id", "app"), ("user", "alice"))}
    # exact, strict: alice alone
    assert set(_found(_describe(node, version, [("user", 0, "alice")], strict=True))) == {
        (("user", "alice"),)}
    # default
    assert set(_found(_describe(node, version, [("user", 1, None)]))) == {(("user", None),)}
    # MATCH_TYPE_SPECIFIED: any entity of the type, its default too (Kafka 4.4's
    # kafka-configs --describe --entity-type users lists "the default user-principal")
    assert set(_found(_describe(node, version, [("user", 2, None)]))) == {
        (("user", None),), (("user", "alice"),), (("client-id", "app"), ("user", "alice"))}
    assert set(_found(_describe(node, version, [("user", 2, None), ("client-id", 2, None)],
                                strict=True))) == {(("client-id", "app"), ("user", "alice"))}
    # remove a key; remove the last key of an entity drops the entity
    _alter(node, version, [([("user", "alice")], [("producer_byte_rate", None)]),
                           ([("user", None)], [("producer_byte_rate", None)])])
    after = _found(_describe(node, version, [("user", 0, "alice")], strict=True))
    assert after == {(("user", "alice"),): {"consumer_byte_rate": 2048.0}}
    assert _found(_describe(node, version, [("user", 1, None)])) == {}


def test_validate_only_writes_nothing(node: TestNode) -> None:
    resp = _alter(node, 1, [([("user", "bob")], [("producer_byte_rate", 10.0)])],
                  validate_only=True)
    assert resp.entries[0].error_code is ErrorCode.none
    assert _found(_describe(node, 1, [])) == {}


@pytest.mark.parametrize(("entity", "ops", "message"), [
    ([], [("producer_byte_rate", 1.0)], "empty"),
    ([("group", "g")], [("producer_byte_rate", 1.0)], "Unhandled client quota entity type"),
    ([("user", "a"), ("user", "b")], [("producer_byte_rate", 1.0)], "Duplicate entity type"),
    ([("ip", "127.0.0.1"), ("user", "a")], [("connection_creation_rate", 1.0)],
     "IP entity should not be combined"),
    ([("ip", "not-an-ip")], [("connection_creation_rate", 1.0)], "not a valid IP"),
    ([("user", "a")], [("no_such_key", 1.0)], "Invalid configuration key"),
    ([("user", "a")], [("connection_creation_rate", 1.0)], "Invalid configuration key"),
    ([("ip", None)], [("producer_byte_rate", 1.0)], "Invalid configuration key"),
    ([("user", "a")], [("producer_byte_rate", -5.0)], "must be greater than 0"),
    ([("user", "a")], [("producer_byte_rate", 10.5)], "must be a Long value"),
    ([("user", "a")], [("producer_byte_rate", 1.0), ("producer_byte_rate", 2.0)],
     "Duplicate quota key"),
])
def test_invalid_alterations(node: TestNode, entity: list[tuple[str, str | None]],
                             ops: list[tuple[str, float | None]], message: str) -> None:
    resp = _alter(node, 1, [(entity, ops), ([("user", "ok")], [("producer_byte_rate", 5.0)])])
    bad, good = resp.entries
    assert bad.error_code is ErrorCode.invalid_request and message in bad.error_message
    assert good.error_code is ErrorCode.none
    assert _found(_describe(node, 1, [])) == {(("user", "ok"),): {"producer_byte_rate": 5.0}}


@pytest.mark.parametrize(("components", "code", "message"), [
    ([("user", 0, "a"), ("user", 1, None)], ErrorCode.invalid_request, "more than once"),
    ([("user", 0, None)], ErrorCode.invalid_request, "MATCH_TYPE_EXACT"),
    ([("user", 1, "a")], ErrorCode.invalid_request, "MATCH_TYPE_DEFAULT"),
    ([("user", 2, "a")], ErrorCode.invalid_request, "MATCH_TYPE_SPECIFIED"),
    ([("user", 7, None)], ErrorCode.unsupported_version, "Unknown match type"),
    ([("group", 2, None)], ErrorCode.unsupported_version, "Unsupported entity type"),
    ([("ip", 2, None), ("client-id", 2, None)], ErrorCode.invalid_request,
     "IP filter component should not be used"),
])
def test_bad_describe_filters(node: TestNode, components: list[tuple[str, int, str | None]],
                              code: ErrorCode, message: str) -> None:
    resp = _describe(node, 1, components)
    assert resp.error_code is code and message in resp.error_message
    assert resp.entries is None
