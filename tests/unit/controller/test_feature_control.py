"""FeatureControlManager (broker/controller/feature_control.py): UpdateFeatures decided as
Kafka's FeatureControlManager decides it."""

from __future__ import annotations

import uuid

from kio.schema.errors import ErrorCode as E

from broker.controller.feature_control import FeatureUpdate, UpgradeType, check_updates
from broker.metadata import MetadataImage, apply_records
from broker.metadata import records as rec
from broker.metadata.features import supported_features
from broker.metadata.records import pb, wrap

CID = "test-cluster"
UP, SAFE, UNSAFE = UpgradeType.UPGRADE, UpgradeType.SAFE_DOWNGRADE, \
    UpgradeType.UNSAFE_DOWNGRADE


def _broker(i: int, features) -> object:
    return wrap(pb.RegisterBroker(
        broker_id=i, incarnation_id=uuid.UUID(int=i).bytes, broker_epoch=i,
        endpoints=[pb.Endpoint(name="PLAINTEXT", host="h", port=i, security_protocol="PLAINTEXT")],
        features=[pb.FeatureRange(name=n, min_supported_version=lo, max_supported_version=hi)
                  for n, lo, hi in features]))


def image(levels: dict[str, int], brokers=None) -> MetadataImage:
    recs = [rec.feature_level_record(n, v) for n, v in levels.items()]
    for i, feats in (brokers or {1: supported_features(), 2: supported_features()}).items():
        recs.append(_broker(i, feats))
    return apply_records(MetadataImage.empty(CID), recs, len(recs) - 1, 1)


def run(harness, img, *updates, validate_only=False, kraft=0):
    h = harness(img)
    r = h.controller.update_features(h.image, [FeatureUpdate(*u) for u in updates],
                                     validate_only, kraft, 3000)
    outcome = h.commit(r)
    return h, r, outcome


def test_upgrade_writes_feature_level_records_metadata_version_first(harness) -> None:
    h, r, out = run(harness, image({"metadata.version": 21}),
                    ("transaction.version", 2, UP), ("metadata.version", 27, UP),
                    ("group.version", 1, UP))
    assert out.error.ok and out.kraft_version is None
    assert [(x.feature_level.name, x.feature_level.feature_level) for x in r.records] == [
        ("metadata.version", 27), ("group.version", 1), ("transaction.version", 2)]
    assert h.image.finalized_level("group.version") == 1
    assert h.image.finalized.metadata_version == 27
    # the level already finalized writes nothing
    _, r2, out2 = run(harness, h.image, ("group.version", 1, UP))
    assert out2.error.ok and r2.records == []


def test_validate_only_writes_nothing(harness) -> None:
    h, r, out = run(harness, image({"metadata.version": 21}), ("metadata.version", 25, UP),
                    validate_only=True)
    assert out.error.ok and r.records == [] and h.image.finalized.metadata_version == 21


def test_downgrade_needs_a_downgrade_type(harness) -> None:
    img = image({"metadata.version": 27, "transaction.version": 2})
    _, r, out = run(harness, img, ("transaction.version", 1, UP))
    assert out.error.error is E.invalid_update_version and r.records == []
    assert "Can't downgrade the version of this feature" in (out.error.message or "")
    _, r, out = run(harness, img, ("transaction.version", 0, SAFE))
    assert out.error.ok
    assert [(x.feature_level.name, x.feature_level.feature_level) for x in r.records] == [
        ("transaction.version", 0)]
    _, _, out = run(harness, img, ("transaction.version", 1, 7))
    assert out.error.error is E.invalid_request


def test_metadata_version_rules(harness) -> None:
    img = image({"metadata.version": 25})
    _, _, out = run(harness, img, ("metadata.version", 24, UNSAFE))
    assert out.error.error is E.invalid_update_version
    assert "Unsafe metadata downgrade is not supported" in (out.error.message or "")
    _, r, out = run(harness, img, ("metadata.version", 24, SAFE))
    assert out.error.ok and len(r.records) == 1
    for level in (0, 20):
        _, _, out = run(harness, img, ("metadata.version", level, SAFE))
        assert out.error.error is E.invalid_update_version
    _, _, out = run(harness, img, ("metadata.version", 34, UP))
    assert "Local controller 3000 only supports versions 21-33" in (out.error.message or "")


def test_dependencies_use_the_levels_the_request_leaves(harness) -> None:
    img = image({"metadata.version": 21})
    _, _, out = run(harness, img, ("group.version", 1, UP))
    assert out.error.error is E.invalid_update_version
    assert "requires metadata.version to be at least 4.0-IV0" in (out.error.message or "")
    _, _, out = run(harness, img, ("group.version", 1, UP), ("metadata.version", 22, UP))
    assert out.error.ok
    # a metadata.version downgrade below what a finalized feature needs
    img = image({"metadata.version": 27, "group.version": 1})
    _, _, out = run(harness, img, ("metadata.version", 21, SAFE))
    assert out.error.error is E.invalid_update_version and "group.version" in \
        (out.error.message or "")


def test_every_registered_broker_must_support_the_level(harness) -> None:
    old = tuple((n, lo, 25 if n == "metadata.version" else hi)
                for n, lo, hi in supported_features())
    img = image({"metadata.version": 21}, {1: supported_features(), 2: old})
    _, _, out = run(harness, img, ("metadata.version", 27, UP))
    assert out.error.error is E.invalid_update_version
    assert "Broker 2 only supports versions 21-25" in (out.error.message or "")
    _, _, out = run(harness, img, ("metadata.version", 25, UP))
    assert out.error.ok
    # a broker that does not declare a feature supports level 0 only
    img = image({"metadata.version": 27}, {1: [("metadata.version", 21, 27)]})
    _, _, out = run(harness, img, ("transaction.version", 2, UP))
    assert "Broker 1 only supports versions 0-0" in (out.error.message or "")


def test_kraft_version_goes_to_raft_and_never_down(harness) -> None:
    img = image({"metadata.version": 27})
    _, r, out = run(harness, img, ("kraft.version", 1, UP))
    assert out.error.ok and out.kraft_version == 1 and r.records == []
    _, _, out = run(harness, img, ("kraft.version", 1, UP), kraft=1)
    assert out.error.ok and out.kraft_version is None
    _, _, out = run(harness, img, ("kraft.version", 0, UNSAFE), kraft=1)
    assert "Downgrading kraft.version is not supported" in (out.error.message or "")


def test_unknown_feature_and_repeats() -> None:
    img = image({"metadata.version": 27})
    out = check_updates(img, [FeatureUpdate("nope", 1)])
    assert out.error.error is E.invalid_update_version
    assert "does not support this feature" in (out.error.message or "")
    out = check_updates(img, [FeatureUpdate("group.version", 1), FeatureUpdate("group.version", 0)])
    assert out.error.error is E.invalid_request


def test_controller_registrations_are_checked_too(harness) -> None:
    """KIP-919: a registered controller that does not support a level refuses the update;
    a controller that does not support a finalized level cannot register."""
    from broker.controller.requests import ControllerRegistrationRequest

    h = harness(image({"metadata.version": 21}))
    old = [(n, lo, 25 if n == "metadata.version" else hi) for n, lo, hi in supported_features()]
    req = ControllerRegistrationRequest(7, uuid.UUID(int=7),
                                        [("CONTROLLER", "127.0.0.1", 9093, "PLAINTEXT")], old)
    assert h.commit(h.controller.register_controller(h.image, req)).ok
    assert h.image.controllers[7].features == tuple(old)
    assert h.image.controllers[7].endpoints[0].port == 9093
    # the same registration again writes nothing
    assert h.controller.register_controller(h.image, req).records == []
    r = h.controller.update_features(h.image, [FeatureUpdate("metadata.version", 27)],
                                     False, 0, 3000)
    assert r.response.error.error is E.invalid_update_version
    assert "Controller 7 only supports versions 21-25" in (r.response.error.message or "")
    h.commit(h.controller.update_features(h.image, [FeatureUpdate("metadata.version", 25)],
                                          False, 0, 3000))
    refused = h.controller.register_controller(
        h.image, ControllerRegistrationRequest(8, uuid.UUID(int=8), [], [
            ("metadata.version", 21, 24)]))
    assert refused.records == [] and refused.response.error is E.unsupported_version
    # registrations are in snapshots
    from broker.metadata.snapshot import image_from_records, image_to_records
    assert image_from_records(image_to_records(h.image)).controllers == h.image.controllers
