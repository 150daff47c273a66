"""UpdateFeatures v0-v2 through the handler and the local controller: FeatureLevel records
reach the image, ApiVersions then reports them, refusals come back as Kafka's top-level
errors, validate_only changes nothing."""

from __future__ import annotations

import importlib
import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.controller.requests import BrokerRegistrationRequest
from broker.handlers import api_versions, update_features
from broker.metadata import features as F
from broker.metadata import records as rec
from broker.metadata.storage import bootstrap_records
from broker.protocol.kio_build import build
from tests.unit.handlers.conftest import CLUSTER_ID, TestNode, make_ctx, roundtrip, run


def _node(node_factory: Any, release: str = "3.9") -> TestNode:
    node: TestNode = node_factory(register=False)
    run(node.quorum.append(rec.encode_all(bootstrap_records(F.bootstrap_levels(release)))))
    reply = run(node.controller.register_broker(BrokerRegistrationRequest(
        broker_id=1, cluster_id=CLUSTER_ID, incarnation_id=uuid.UUID(int=2),
        listeners=[("PLAINTEXT", "127.0.0.1", 19102, "PLAINTEXT")],
        features=F.supported_features())))
    assert reply.error is ErrorCode.none, reply
    return node


def _update(node: TestNode, version: int, updates: list[tuple[str, int, int]],
            validate_only: bool = False) -> Any:
    m = importlib.import_module(f"kio.schema.update_features.v{version}.request")
    keys = tuple(build(m.FeatureUpdateKey, feature=n, max_version_level=level,
                       upgrade_type=kind, allow_downgrade=kind != 1)
                 for n, level, kind in updates)
    req = build(m.UpdateFeaturesRequest, feature_updates=keys, validate_only=validate_only)
    resp = run(update_features.handle(node, make_ctx(57, version), req))
    roundtrip(resp)
    return resp


@pytest.mark.parametrize("version", [0, 1, 2])
def test_upgrade_reaches_the_image_and_api_versions(node_factory: Any, version: int) -> None:
    node = _node(node_factory)
    assert node.metadata.finalized.metadata_version == F.MV_3_9_IV0
    resp = _update(node, version, [("metadata.version", 27, 1), ("group.version", 1, 1)])
    assert resp.error_code is ErrorCode.none, resp.error_message
    if version < 2:
        assert sorted((r.feature, r.error_code) for r in resp.results) == [
            ("group.version", ErrorCode.none), ("metadata.version", ErrorCode.none)]
    assert node.metadata.finalized_level("metadata.version") == 27
    assert node.metadata.finalized_level("group.version") == 1
    av_req = importlib.import_module("kio.schema.api_versions.v4.request").ApiVersionsRequest(
        client_software_name="t", client_software_version="1")
    av = run(api_versions.handle(node, make_ctx(18, 4), av_req))
    assert {f.name: f.max_version_level for f in av.finalized_features} == {
        "metadata.version": 27, "group.version": 1}
    assert av.finalized_features_epoch == node.metadata.offset


def test_validate_only_changes_nothing(node_factory: Any) -> None:
    node = _node(node_factory)
    before = node.metadata.offset
    resp = _update(node, 1, [("metadata.version", 25, 1)], validate_only=True)
    assert resp.error_code is ErrorCode.none
    assert node.metadata.offset == before
    assert node.metadata.finalized.metadata_version == F.MV_3_9_IV0


def test_refusals_are_top_level_errors(node_factory: Any) -> None:
    node = _node(node_factory, "4.1")
    resp = _update(node, 2, [("transaction.version", 1, 1)])
    assert resp.error_code is ErrorCode.invalid_update_version
    assert "Can't downgrade the version of this feature" in resp.error_message
    resp = _update(node, 1, [("group.version", 1, 1), ("no.such.feature", 1, 1)])
    assert resp.error_code is ErrorCode.invalid_update_version
    # a refused update lists no features at v0-v1: Kafka 4.4 answers so (the differential
    # harness, tests/compat/kafka/test_differential.py, compares it)
    assert resp.results == ()
    assert _update(node, 0, [("no.such.feature", 1, 1)]).results == ()
    assert node.metadata.finalized_level("transaction.version") == 2
    # v0's allow_downgrade is a safe downgrade
    resp = _update(node, 0, [("transaction.version", 1, 2)])
    assert resp.error_code is ErrorCode.none
    assert node.metadata.finalized_level("transaction.version") == 1


def test_no_updates_is_an_invalid_request(node_factory: Any) -> None:
    node = _node(node_factory)
    assert _update(node, 2, []).error_code is ErrorCode.invalid_request


def test_error_response_keeps_the_version() -> None:
    m = importlib.import_module("kio.schema.update_features.v1.request")
    req = m.UpdateFeaturesRequest(feature_updates=(m.FeatureUpdateKey(
        feature="group.version", max_version_level=1, upgrade_type=1),), validate_only=False)
    resp = update_features.error_response(make_ctx(57, 1), req,
                                          ErrorCode.cluster_authorization_failed)
    assert resp.__version__ == 1
    assert resp.error_code is ErrorCode.cluster_authorization_failed
