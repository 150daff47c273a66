"""FeatureService: feature levels, described from this node's image and updated through the
controller channel with the same operation as UpdateFeatures (API 57), which reaches the
active controller wherever it is."""

from __future__ import annotations

from typing import Any

import grpc
from kio.schema.errors import ErrorCode

from broker.admin.errors import AdminError, S, rpc_errors
from broker.admin.pb import features as fpb
from broker.admin.pb import features_grpc
from broker.admin.services import AdminServices
from broker.controller.feature_control import FeatureUpdate, UpgradeType
from broker.errors import KafkaError
from broker.metadata import features as F


class FeatureService(features_grpc.FeatureServiceServicer):  # type: ignore[misc]
    def __init__(self, node: AdminServices) -> None:
        self.node = node

    @rpc_errors
    async def DescribeFeatures(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        image = self.node.metadata
        levels = dict(image.features)
        kraft = self.node.kraft_version
        if kraft > 0:
            levels[F.KRAFT_VERSION] = kraft
        out = []
        for name, lo, hi in F.supported_features():
            level = levels.get(name, 0)
            out.append(fpb.FeatureDescription(
                name=name, supported_min_version=lo, supported_max_version=hi,
                finalized_version_level=level,
                finalized_version_name=F.metadata_version_name(level)
                if name == F.METADATA_VERSION and level else ""))
        return fpb.DescribeFeaturesResponse(
            features=out, finalized_features_epoch=image.finalized_features_epoch,
            node_id=self.node.node_id)

    @rpc_errors
    async def UpdateFeatures(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        if not request.updates:
            raise AdminError(S.INVALID_ARGUMENT, "no feature updates given")
        updates = [FeatureUpdate(u.feature, int(u.version_level),
                                 int(u.upgrade_type) or int(UpgradeType.UPGRADE))
                   for u in request.updates]
        error = await self.node.controller.update_features(updates, request.validate_only)
        if error.error is not ErrorCode.none:
            raise KafkaError(error.error, error.message or "")
        return fpb.UpdateFeaturesResponse()
