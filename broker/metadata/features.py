"""Feature levels (KIP-584, KIP-778 and Kafka 4.x's features), pure.

A feature is a name with an int16 level. A node *supports* a range of levels per feature
(it says so in BrokerRegistration / ControllerRegistration and in ApiVersions); the cluster
*finalizes* one level per feature in the metadata log (FeatureLevel records, Kafka's
FeatureLevelRecord; level 0 means the feature is absent). UpdateFeatures changes a
finalized level (broker/controller/feature_control.py), `storage format --release-version`
picks the first levels (the bootstrap records).

The features Skiff knows, as Kafka 4.x names them:

  metadata.version      Kafka's MetadataVersion levels 21 (3.9-IV0) to 33 (4.4-IV2). Skiff's
                        metadata records are its own (proto/skiff/metadata/v1) and did not
                        change between these levels; the level says which release's
                        behaviour a cluster asks for and is the dependency of the others.
  kraft.version         0: static voters (controller.quorum.voters); 1: the voter set lives
                        in the log (KIP-853: KRaftVersion and Voters control records). It is
                        finalized by Raft, not by FeatureLevel records: the image never holds
                        it, the node reports the Raft's own.
  transaction.version   0-2 (KIP-890; 2 is transactions V2).
  group.version         0-1 (KIP-848; 1 enables ConsumerGroupHeartbeat / ConsumerGroupDescribe).
  share.version         0-2 (KIP-932; 1 enables share groups, bootstrapped from 4.2-IV0; 2 adds
                        their dead-letter queues, KIP-1191, bootstrapped from 4.4-IV0).
  streams.version       0-1 (KIP-1071; 1 enables streams groups, bootstrapped from 4.2-IV1).

Each level above 0 has the metadata.version from which a release bootstraps it
(`bootstrap_metadata_version`) and the levels it needs of other features
(`dependencies`), as Kafka's Feature enum declares them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

METADATA_VERSION = "metadata.version"
KRAFT_VERSION = "kraft.version"
TRANSACTION_VERSION = "transaction.version"
GROUP_VERSION = "group.version"
SHARE_VERSION = "share.version"
STREAMS_VERSION = "streams.version"

# Kafka's MetadataVersion feature levels, with their names.
MV_3_9_IV0 = 21
MV_4_0_IV0 = 22
MV_4_0_IV1 = 23
MV_4_0_IV2 = 24
MV_4_0_IV3 = 25
MV_4_1_IV0 = 26
MV_4_1_IV1 = 27
MV_4_2_IV0 = 28
MV_4_2_IV1 = 29
MV_4_3_IV0 = 30
MV_4_4_IV0 = 31
MV_4_4_IV1 = 32
MV_4_4_IV2 = 33
# Behaviour Kafka gates on metadata.version (MetadataVersion.isXSupported):
CORDONED_LOG_DIRS_METADATA_VERSION = MV_4_3_IV0  # KIP-1066
CIDR_ACL_METADATA_VERSION = MV_4_4_IV1  # KIP-1276

METADATA_VERSION_NAMES: Mapping[int, str] = {
    MV_3_9_IV0: "3.9-IV0",
    MV_4_0_IV0: "4.0-IV0",
    MV_4_0_IV1: "4.0-IV1",
    MV_4_0_IV2: "4.0-IV2",
    MV_4_0_IV3: "4.0-IV3",
    MV_4_1_IV0: "4.1-IV0",
    MV_4_1_IV1: "4.1-IV1",
    MV_4_2_IV0: "4.2-IV0",
    MV_4_2_IV1: "4.2-IV1",
    MV_4_3_IV0: "4.3-IV0",
    MV_4_4_IV0: "4.4-IV0",
    MV_4_4_IV1: "4.4-IV1",
    MV_4_4_IV2: "4.4-IV2",
}
# A release name stands for its last production level, as in kafka-storage.sh.
RELEASES: Mapping[str, int] = {"3.9": MV_3_9_IV0, "4.0": MV_4_0_IV3, "4.1": MV_4_1_IV1,
                               "4.2": MV_4_2_IV1, "4.3": MV_4_3_IV0, "4.4": MV_4_4_IV2}
MINIMUM_METADATA_VERSION = MV_3_9_IV0
LATEST_METADATA_VERSION = MV_4_4_IV2  # the highest level a node supports (Kafka 4.4's)
# What `storage format` picks without --release-version, as Kafka 4.4's kafka-storage.sh:
# 4.4-IV2, so a new cluster starts with share.version 2 and streams.version 1.
LATEST_RELEASE = "4.4"


@dataclass(frozen=True)
class FeatureLevel:
    """One level (> 0) of a feature: the metadata.version from which a release bootstraps
    it, and what it needs of other features."""

    level: int
    bootstrap_metadata_version: int
    dependencies: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Feature:
    name: str
    min_level: int
    max_level: int
    levels: tuple[FeatureLevel, ...] = ()

    def level(self, n: int) -> FeatureLevel | None:
        return next((x for x in self.levels if x.level == n), None)

    def default_level(self, metadata_version: int) -> int:
        """The level a cluster formatted at this metadata.version starts with."""
        return max((x.level for x in self.levels
                    if x.bootstrap_metadata_version <= metadata_version), default=0)


FEATURES: Mapping[str, Feature] = {
    METADATA_VERSION: Feature(METADATA_VERSION, MINIMUM_METADATA_VERSION,
                              LATEST_METADATA_VERSION),
    KRAFT_VERSION: Feature(KRAFT_VERSION, 0, 1, (
        FeatureLevel(1, MV_3_9_IV0, {METADATA_VERSION: MV_3_9_IV0}),)),
    TRANSACTION_VERSION: Feature(TRANSACTION_VERSION, 0, 2, (
        FeatureLevel(1, MV_4_0_IV2), FeatureLevel(2, MV_4_0_IV2))),
    GROUP_VERSION: Feature(GROUP_VERSION, 0, 1, (
        FeatureLevel(1, MV_4_0_IV0, {METADATA_VERSION: MV_4_0_IV0}),)),
    SHARE_VERSION: Feature(SHARE_VERSION, 0, 2, (
        FeatureLevel(1, MV_4_2_IV0), FeatureLevel(2, MV_4_4_IV0))),
    STREAMS_VERSION: Feature(STREAMS_VERSION, 0, 1, (FeatureLevel(1, MV_4_2_IV1),)),
}


def supported_features() -> tuple[tuple[str, int, int], ...]:
    """(name, min, max) this node supports, by name: what registrations and ApiVersions
    carry. A feature whose minimum is 0 is reported from 0, as Kafka reports it."""
    return tuple((f.name, f.min_level, f.max_level)
                 for f in sorted(FEATURES.values(), key=lambda f: f.name))


class FeatureError(ValueError):
    """A release version, feature name or level that is refused."""


def metadata_version_of(release: str) -> int:
    """`--release-version`: a release ("4.0") or an exact level name ("4.0-IV1")."""
    if release in RELEASES:
        return RELEASES[release]
    for level, name in METADATA_VERSION_NAMES.items():
        if name == release:
            return level
    raise FeatureError(
        f"Unknown release version '{release}'. Supported versions are: "
        f"{METADATA_VERSION_NAMES[MINIMUM_METADATA_VERSION]} to "
        f"{METADATA_VERSION_NAMES[LATEST_METADATA_VERSION]}")


def metadata_version_name(level: int) -> str:
    return METADATA_VERSION_NAMES.get(level, str(level))


def dependency_error(name: str, level: int, levels: Mapping[str, int]) -> str | None:
    """Why `name` cannot be at `level` given the other finalized `levels`, or None."""
    f = FEATURES.get(name)
    fl = f.level(level) if f is not None else None
    if fl is None:
        return None
    for dep, need in sorted(fl.dependencies.items()):
        have = levels.get(dep, 0)
        if have < need:
            shown = metadata_version_name(need) if dep == METADATA_VERSION else str(need)
            now = metadata_version_name(have) if dep == METADATA_VERSION else str(have)
            return (f"Feature {name} with level {level} requires {dep} to be at least "
                    f"{shown}, but it is {now}.")
    return None


def bootstrap_levels(release: str | None = None,
                     overrides: Mapping[str, int] | None = None,
                     kraft_version: int = 0) -> dict[str, int]:
    """The finalized levels `storage format` writes: those of the release (default the
    latest), with `--feature name=level` overrides, checked as Kafka checks them.
    kraft.version is Raft's (1 with --standalone / --initial-controllers): an override of it
    must agree."""
    mv = metadata_version_of(release or LATEST_RELEASE)
    overrides = dict(overrides or {})
    if METADATA_VERSION in overrides:
        if release is not None:
            raise FeatureError("Use --release-version instead of --feature metadata.version=X.")
        mv = overrides.pop(METADATA_VERSION)
        if not MINIMUM_METADATA_VERSION <= mv <= LATEST_METADATA_VERSION:
            raise FeatureError(f"Unsupported metadata.version level {mv}: Skiff supports "
                               f"{MINIMUM_METADATA_VERSION}-{LATEST_METADATA_VERSION}")
    levels = {METADATA_VERSION: mv}
    for name, feat in sorted(FEATURES.items()):
        if name in (METADATA_VERSION, KRAFT_VERSION):
            continue
        levels[name] = feat.default_level(mv)
    for name, level in overrides.items():
        f = FEATURES.get(name)
        if f is None:
            raise FeatureError(f"Unsupported feature: {name}. Supported features are: "
                               f"{', '.join(sorted(FEATURES))}")
        if name == KRAFT_VERSION:
            if level != kraft_version:
                raise FeatureError(
                    f"kraft.version={level} does not match the voter configuration: "
                    f"kraft.version is {kraft_version} "
                    + ("with --standalone / --initial-controllers" if kraft_version else
                       "with static voters (controller.quorum.voters); use --standalone or "
                       "--initial-controllers for kraft.version 1"))
            continue
        if not 0 <= level <= f.max_level:
            raise FeatureError(f"Feature {name} has no level {level}: supported "
                               f"{f.min_level}-{f.max_level}")
        levels[name] = level
    check = dict(levels, **{KRAFT_VERSION: kraft_version})
    for name, level in sorted(levels.items()):
        why = dependency_error(name, level, check)
        if why:
            raise FeatureError(why)
    why = dependency_error(KRAFT_VERSION, kraft_version, check)
    if why:
        raise FeatureError(why)
    return {n: v for n, v in levels.items() if v > 0 or n == METADATA_VERSION}


@dataclass(frozen=True)
class FinalizedFeatures:
    """The finalized levels of a metadata image and their epoch (the image's offset, as
    Kafka's FinalizedFeaturesEpoch), the view other parts gate on."""

    levels: Mapping[str, int]
    epoch: int

    def finalized_level(self, name: str) -> int:
        """The finalized level; 0 when the feature is not finalized."""
        return self.levels.get(name, 0)

    @property
    def metadata_version(self) -> int:
        return self.levels.get(METADATA_VERSION, 0)
