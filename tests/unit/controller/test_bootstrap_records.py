"""What the first active controller writes from the bootstrap file, and the move of a log
written before feature levels (Skiff's own metadata.version 1) to this release's levels."""

from __future__ import annotations

from broker.controller import Controller
from broker.metadata import MetadataImage, apply_records
from broker.metadata import features as F
from broker.metadata import records as rec


def levels(records: list) -> dict[str, int]:
    return {r.feature_level.name: r.feature_level.feature_level for r in records
            if rec.kind(r) == "feature_level"}


def image_with(**finalized: int) -> MetadataImage:
    return apply_records(MetadataImage.empty("c"), [
        rec.feature_level_record(name.replace("_", "."), level)
        for name, level in finalized.items()], 3, 1)


def test_a_fresh_log_gets_the_bootstrap_records() -> None:
    bootstrap = [rec.feature_level_record(F.METADATA_VERSION, F.LATEST_METADATA_VERSION),
                 rec.feature_level_record(F.GROUP_VERSION, 1)]
    out = Controller.bootstrap_records(MetadataImage.empty("c"), bootstrap)
    assert levels(out) == {F.METADATA_VERSION: F.LATEST_METADATA_VERSION, F.GROUP_VERSION: 1}


def test_a_log_with_levels_gets_nothing() -> None:
    bootstrap = [rec.feature_level_record(F.METADATA_VERSION, F.LATEST_METADATA_VERSION)]
    assert Controller.bootstrap_records(image_with(metadata_version=F.MV_4_0_IV3),
                                        bootstrap) == []


def test_a_log_from_before_feature_levels_moves_to_the_lowest_supported_level() -> None:
    out = Controller.bootstrap_records(image_with(metadata_version=1), [])
    assert levels(out) == {F.METADATA_VERSION: F.MINIMUM_METADATA_VERSION}
    after = apply_records(image_with(metadata_version=1), out, 4, 1)
    assert after.features[F.METADATA_VERSION] == F.MINIMUM_METADATA_VERSION
    assert Controller.bootstrap_records(after, []) == []


def test_an_old_bootstrap_file_is_lifted_too() -> None:
    out = Controller.bootstrap_records(
        MetadataImage.empty("c"), [rec.feature_level_record(F.METADATA_VERSION, 1)])
    assert levels(out) == {F.METADATA_VERSION: F.MINIMUM_METADATA_VERSION}
