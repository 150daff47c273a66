"""Feature levels (broker/metadata/features.py) and the image's finalized view."""

from __future__ import annotations

import pytest

from broker.metadata import features as F
from broker.metadata import records as rec
from broker.metadata.image import MetadataImage
from broker.metadata.snapshot import image_from_records, image_to_records


def test_release_versions_map_to_kafka_levels() -> None:
    assert F.metadata_version_of("3.9") == 21
    assert F.metadata_version_of("4.0") == 25
    assert F.metadata_version_of("4.1") == 27
    assert F.metadata_version_of("4.0-IV1") == 23
    with pytest.raises(F.FeatureError, match=r"Unknown release version .3\.8."):
        F.metadata_version_of("3.8")


def test_bootstrap_levels_per_release() -> None:
    assert F.bootstrap_levels() == {"metadata.version": 33, "group.version": 1,
                                    "share.version": 2, "streams.version": 1,
                                    "transaction.version": 2}
    assert F.bootstrap_levels("4.1") == {"metadata.version": 27, "group.version": 1,
                                         "transaction.version": 2}
    assert F.bootstrap_levels("3.9") == {"metadata.version": 21}
    assert F.bootstrap_levels("4.0-IV0") == {"metadata.version": 22, "group.version": 1}
    assert F.bootstrap_levels("4.0", {"transaction.version": 0}) == {
        "metadata.version": 25, "group.version": 1}


def test_bootstrap_levels_refusals() -> None:
    with pytest.raises(F.FeatureError, match=r"requires metadata\.version to be at least 4\.0-IV0"):
        F.bootstrap_levels("3.9", {"group.version": 1})
    with pytest.raises(F.FeatureError, match="Unsupported feature: nope"):
        F.bootstrap_levels(None, {"nope": 1})
    with pytest.raises(F.FeatureError, match="no level 3"):
        F.bootstrap_levels(None, {"transaction.version": 3})
    with pytest.raises(F.FeatureError, match="does not match the voter configuration"):
        F.bootstrap_levels(None, {"kraft.version": 1})
    assert F.bootstrap_levels(None, {"kraft.version": 1}, kraft_version=1)["metadata.version"] \
        == 33
    with pytest.raises(F.FeatureError, match="--release-version"):
        F.bootstrap_levels("4.0", {"metadata.version": 22})


def test_supported_features_sorted_with_kafka_ranges() -> None:
    assert F.supported_features() == (
        ("group.version", 0, 1), ("kraft.version", 0, 1), ("metadata.version", 21, 33),
        ("share.version", 0, 2), ("streams.version", 0, 1), ("transaction.version", 0, 2))


def test_image_finalized_view_follows_feature_level_records() -> None:
    empty = MetadataImage.empty()
    assert empty.finalized_level("transaction.version") == 0
    image = image_from_records([rec.feature_level_record("metadata.version", 25),
                                rec.feature_level_record("transaction.version", 2)])
    assert image.finalized_level("transaction.version") == 2
    assert image.finalized.finalized_level("group.version") == 0
    assert image.finalized.metadata_version == 25
    assert image.finalized.epoch == image.offset == image.finalized_features_epoch
    # level 0 removes a feature; snapshots keep metadata.version first
    from broker.metadata.delta import MetadataDelta
    d = MetadataDelta(image)
    d.replay(rec.feature_level_record("transaction.version", 0), offset=7, epoch=1)
    later = d.apply()
    assert later.finalized_level("transaction.version") == 0
    assert later.finalized.epoch == 7
    recs = image_to_records(image)
    assert [r.feature_level.name for r in recs[:2]] == ["metadata.version",
                                                         "transaction.version"]
