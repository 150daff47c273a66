"""FeatureService: describe from the image, update through the controller (UpdateFeatures)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import grpc

from broker.controller.requests import BrokerRegistrationRequest
from broker.metadata import features as F
from broker.metadata import records as rec
from broker.metadata.storage import bootstrap_records
from tests.unit.admin.harness import Admin, AdminTestNode, pb, serve, status_of
from tests.unit.handlers.conftest import CLUSTER_ID

S = grpc.StatusCode


def _node(tmp_path: Path) -> AdminTestNode:
    node = AdminTestNode(tmp_path)

    async def setup() -> None:
        await node.quorum.append(rec.encode_all(bootstrap_records(F.bootstrap_levels("4.0"))))
        reply = await node.controller.register_broker(BrokerRegistrationRequest(
            broker_id=1, cluster_id=CLUSTER_ID, incarnation_id=uuid.UUID(int=2),
            listeners=[("PLAINTEXT", "127.0.0.1", 19102, "PLAINTEXT")],
            features=F.supported_features()))
        assert reply.error.name == "none"

    asyncio.run(setup())
    node.ready.set()
    return node


def test_describe_then_upgrade_and_refusals(tmp_path: Path) -> None:
    node = _node(tmp_path)
    fp = pb.features

    async def body(a: Admin) -> Any:
        before = await a.features.DescribeFeatures(fp.DescribeFeaturesRequest())
        dry = await a.features.UpdateFeatures(fp.UpdateFeaturesRequest(validate_only=True, updates=[
            fp.FeatureUpdate(feature="metadata.version", version_level=27)]))
        after_dry = node.metadata.finalized.metadata_version
        await a.features.UpdateFeatures(fp.UpdateFeaturesRequest(updates=[
            fp.FeatureUpdate(feature="metadata.version", version_level=27)]))
        refused = await status_of(a.features.UpdateFeatures(fp.UpdateFeaturesRequest(updates=[
            fp.FeatureUpdate(feature="transaction.version", version_level=1)])))
        empty = await status_of(a.features.UpdateFeatures(fp.UpdateFeaturesRequest()))
        down = await a.features.UpdateFeatures(fp.UpdateFeaturesRequest(updates=[
            fp.FeatureUpdate(feature="transaction.version", version_level=1,
                             upgrade_type=fp.UPGRADE_TYPE_SAFE_DOWNGRADE)]))
        return before, dry, after_dry, refused, empty, down

    before, _dry, after_dry, refused, empty, _down = serve(node, body)
    by_name = {f.name: f for f in before.features}
    assert sorted(by_name) == ["group.version", "kraft.version", "metadata.version",
                               "share.version", "streams.version", "transaction.version"]
    mv = by_name["metadata.version"]
    assert (mv.supported_min_version, mv.supported_max_version) == (21, 33)
    assert (mv.finalized_version_level, mv.finalized_version_name) == (25, "4.0-IV3")
    assert by_name["kraft.version"].finalized_version_level == 0
    assert before.finalized_features_epoch >= 0 and before.node_id == 1
    assert after_dry == 25
    assert node.metadata.finalized.metadata_version == 27
    assert refused[0] is S.FAILED_PRECONDITION and "Can't downgrade" in refused[1]
    assert "INVALID_UPDATE_VERSION" in refused[1]
    assert empty[0] is S.INVALID_ARGUMENT
    assert node.metadata.finalized_level("transaction.version") == 1
    node.close()
