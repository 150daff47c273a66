from __future__ import annotations

import random
import uuid
from collections.abc import Sequence

import pytest

from broker.controller import Controller, ControllerSettings
from broker.metadata import MetadataImage, apply_records
from broker.metadata.records import pb, wrap


def register(broker_id: int, epoch: int, rack: str | None = None, fenced: bool = False):
    msg = pb.RegisterBroker(
        broker_id=broker_id,
        incarnation_id=uuid.UUID(int=broker_id + 1000).bytes,
        broker_epoch=epoch,
        endpoints=[pb.Endpoint(name="PLAINTEXT", host="127.0.0.1", port=9000 + broker_id,
                               security_protocol="PLAINTEXT")],
        fenced=fenced,
    )
    if rack is not None:
        msg.rack = rack
    return wrap(msg)


def cluster(n: int = 3, racks: Sequence[str | None] | None = None,
            fenced: Sequence[int] = ()) -> MetadataImage:
    recs = [register(i, 10 + i, racks[i] if racks else None, i in fenced) for i in range(n)]
    return apply_records(MetadataImage.empty("test-cluster"), recs, len(recs) - 1, 1)


class Harness:
    """A controller plus a working image that every returned batch is applied to."""

    def __init__(self, image: MetadataImage, seed: int = 7, **settings: object) -> None:
        self.controller = Controller(ControllerSettings(cluster_id="test-cluster",
                                                        **settings),  # type: ignore[arg-type]
                                     random.Random(seed))
        self.image = image

    def commit(self, result):
        if result.records:
            self.image = apply_records(self.image, result.records,
                                       self.image.offset + len(result.records), 1)
        return result.response


@pytest.fixture
def harness():
    return Harness
