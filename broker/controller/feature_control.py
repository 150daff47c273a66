"""FeatureControlManager: UpdateFeatures on the controller (KIP-584, KIP-778), as Kafka's
FeatureControlManager decides it. Pure: image + updates -> FeatureLevel records and one
ApiError for the whole request (Kafka 3.9+ applies the updates of a request all together or
not at all).

Each update is (feature, level, upgrade type); a level of 0 removes the feature. Checked in
this order, the first problem is the answer (INVALID_UPDATE_VERSION unless said otherwise):
  an unknown upgrade type                       INVALID_REQUEST
  a feature this controller does not know, or a level outside its supported range
  a level below the finalized one with upgrade type UPGRADE ("Can't downgrade ...")
  metadata.version: below the minimum, removed (level 0), or UNSAFE_DOWNGRADE (not supported,
    as in Kafka); a SAFE_DOWNGRADE is allowed, Skiff's metadata records being the same at
    every supported level
  kraft.version: any downgrade (Raft cannot go back to static voters)
  a registered controller (KIP-919) or broker that does not support the level (its
    registration's ranges; a feature it does not declare supports 0 only)
  a dependency not met by the levels the request leaves (e.g. group.version 1 needs
    metadata.version 4.0-IV0; lowering metadata.version below what a finalized feature needs)
validate_only writes nothing. An update to the level already finalized writes nothing.
kraft.version is finalized by Raft, not by records: an accepted change of it comes back in
`FeatureUpdateOutcome.kraft_version` for the controller's shell to apply through Raft
(KRaftVersion and Voters control records, KIP-853's upgrade).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from broker.controller.requests import OK, ApiError, ControllerResult
from broker.metadata import features as F
from broker.metadata import records as rec
from broker.metadata.image import MetadataImage


class UpgradeType(enum.IntEnum):
    """Kafka's FeatureUpdate.UpgradeType codes."""

    UPGRADE = 1
    SAFE_DOWNGRADE = 2
    UNSAFE_DOWNGRADE = 3


@dataclass(frozen=True, slots=True)
class FeatureUpdate:
    feature: str
    level: int
    upgrade_type: int = UpgradeType.UPGRADE


@dataclass(frozen=True, slots=True)
class FeatureUpdateOutcome:
    error: ApiError = OK
    kraft_version: int | None = None  # the kraft.version Raft must move to, if any


def _invalid(message: str) -> FeatureUpdateOutcome:
    return FeatureUpdateOutcome(ApiError(ErrorCode.invalid_update_version, message))


class FeatureControlManager:
    def update_features(self, image: MetadataImage, updates: Sequence[FeatureUpdate],
                        validate_only: bool = False, kraft_version: int = 0,
                        local_node_id: int = -1) -> ControllerResult[FeatureUpdateOutcome]:
        """`kraft_version`: Raft's current one (not in the image)."""
        outcome = check_updates(image, updates, kraft_version, local_node_id)
        if outcome.error.error is ErrorCode.invalid_update_version:
            # as Kafka's QuorumController.updateFeatures words a refused update
            outcome = FeatureUpdateOutcome(ApiError(
                outcome.error.error, "The update failed for all features since the following "
                f"feature had an error: {outcome.error.message}"))
        if not outcome.error.ok or validate_only:
            return ControllerResult([], outcome)
        records = [rec.feature_level_record(u.feature, u.level) for u in _ordered(updates)
                   if u.feature != F.KRAFT_VERSION
                   and image.finalized_level(u.feature) != u.level]
        return ControllerResult(records, outcome)


def _ordered(updates: Sequence[FeatureUpdate]) -> list[FeatureUpdate]:
    # metadata.version first, as Kafka orders an upgrade's records
    return sorted(updates, key=lambda u: (u.feature != F.METADATA_VERSION, u.feature))


def check_updates(image: MetadataImage, updates: Sequence[FeatureUpdate],
                  kraft_version: int = 0, local_node_id: int = -1) -> FeatureUpdateOutcome:
    current: dict[str, int] = dict(image.features)
    current[F.KRAFT_VERSION] = kraft_version
    seen: set[str] = set()
    for u in updates:
        if u.feature in seen:
            return FeatureUpdateOutcome(ApiError(
                ErrorCode.invalid_request, f"Feature {u.feature} appears more than once."))
        seen.add(u.feature)
    proposed = dict(current)
    proposed.update({u.feature: u.level for u in updates})
    kraft_target: int | None = None
    for u in updates:
        why = _check_one(image, u, current.get(u.feature, 0), local_node_id)
        if why is not None:
            return why
        if u.feature == F.KRAFT_VERSION and u.level != kraft_version:
            kraft_target = u.level
    for name, level in sorted(proposed.items()):
        if level <= 0:
            continue
        why_dep = F.dependency_error(name, level, proposed)
        if why_dep is not None:
            return _invalid(f"Invalid update version {level} for feature {name}. {why_dep}")
    return FeatureUpdateOutcome(OK, kraft_target)


def _check_one(image: MetadataImage, u: FeatureUpdate, level_now: int,
               local_node_id: int) -> FeatureUpdateOutcome | None:
    if u.upgrade_type not in {int(t) for t in UpgradeType}:
        return FeatureUpdateOutcome(ApiError(
            ErrorCode.invalid_request,
            f"Unknown upgrade type {u.upgrade_type} for feature {u.feature}."))
    feature = F.FEATURES.get(u.feature)
    if feature is None:
        return _invalid(f"Invalid update version {u.level} for feature {u.feature}. Local "
                        f"controller {local_node_id} does not support this feature.")
    if not (u.level == 0 or feature.min_level <= u.level <= feature.max_level):
        return _invalid(f"Invalid update version {u.level} for feature {u.feature}. Local "
                        f"controller {local_node_id} only supports versions "
                        f"{feature.min_level}-{feature.max_level}")
    downgrade = u.level < level_now
    if downgrade and u.upgrade_type == UpgradeType.UPGRADE:
        return _invalid(f"Invalid update version {u.level} for feature {u.feature}. Can't "
                        "downgrade the version of this feature without setting the upgrade "
                        "type to either safe or unsafe downgrade.")
    if u.feature == F.METADATA_VERSION:
        if u.level < F.MINIMUM_METADATA_VERSION:
            return _invalid(f"Invalid metadata.version {u.level}. Unable to set a "
                            "metadata.version less than "
                            f"{F.metadata_version_name(F.MINIMUM_METADATA_VERSION)}")
        if downgrade and u.upgrade_type == UpgradeType.UNSAFE_DOWNGRADE:
            return _invalid(f"Invalid metadata.version {u.level}. Unsafe metadata downgrade "
                            "is not supported in this version.")
    if u.feature == F.KRAFT_VERSION and downgrade:
        return _invalid(f"Invalid update version {u.level} for feature kraft.version. "
                        "Downgrading kraft.version is not supported.")
    regs_by_kind: tuple[tuple[str, Mapping[int, Any]], ...] = (
        ("Controller", image.controllers), ("Broker", image.brokers))
    for kind, regs in regs_by_kind:
        for nid, reg in sorted(regs.items()):
            ranges = {name: (lo, hi) for name, lo, hi in reg.features}
            lo, hi = ranges.get(u.feature, (0, 0))
            if u.level > 0 and not lo <= u.level <= hi:
                return _invalid(f"Invalid update version {u.level} for feature {u.feature}. "
                                f"{kind} {nid} only supports versions {lo}-{hi}")
    return None


def describe(image: MetadataImage, kraft_version: int) -> Mapping[str, int]:
    """The finalized levels as DescribeFeatures shows them, kraft.version included."""
    out = dict(image.features)
    if kraft_version > 0:
        out[F.KRAFT_VERSION] = kraft_version
    return out
