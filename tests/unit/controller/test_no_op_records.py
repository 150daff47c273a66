"""KIP-835: the active controller writes a NoOp record every metadata.max.idle.interval.ms,
so a node's metadata lag measures lag, not the time since the last change."""

from __future__ import annotations

import dataclasses
import random

from broker.controller import Controller, ControllerSettings
from broker.metadata import MetadataImage, apply_records
from broker.metadata.records import kind


def controller(interval_ms: int) -> Controller:
    return Controller(ControllerSettings(cluster_id="c",
                                         metadata_max_idle_interval_ms=interval_ms),
                      random.Random(1))


def test_a_no_op_at_once_then_every_interval() -> None:
    c = controller(500)
    first = c.no_op_records(1_000)
    assert [kind(r) for r in first] == ["no_op"]
    assert c.no_op_records(1_001) == []
    assert c.no_op_records(1_499) == []
    assert [kind(r) for r in c.no_op_records(1_500)] == ["no_op"]
    assert c.no_op_records(1_999) == []
    assert len(c.no_op_records(2_600)) == 1


def test_zero_disables_them() -> None:
    c = controller(0)
    assert all(c.no_op_records(t) == [] for t in (0, 500, 10_000))


def test_a_no_op_advances_the_image_and_changes_nothing_else() -> None:
    image = MetadataImage.empty("c")
    after = apply_records(image, controller(500).no_op_records(0), 5, 1)
    assert after.offset == 5
    assert dataclasses.replace(after, offset=image.offset, epoch=image.epoch) == image
