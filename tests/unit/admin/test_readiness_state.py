"""broker/admin/readiness.py: when a broker is ready (what the `skiff.readiness` health
service, a Kubernetes readiness probe, reports), over hand-built metadata images."""

from __future__ import annotations

import uuid

from broker.admin.readiness import READY, REASON_PARTITIONS, broker_readiness
from broker.metadata.image import (
    LOST_DIR,
    BrokerRegistration,
    MetadataImage,
    PartitionRegistration,
    TopicImage,
)
from broker.metadata.records import NO_LEADER

DIR_A, DIR_B = uuid.uuid4(), uuid.uuid4()


def broker(i: int, fenced: bool = False, shutting_down: bool = False,
           log_dirs: tuple[uuid.UUID, ...] = ()) -> BrokerRegistration:
    return BrokerRegistration(i, 10 + i, uuid.uuid4(), (), fenced=fenced,
                              in_controlled_shutdown=shutting_down, log_dirs=log_dirs)


def image(brokers: list[BrokerRegistration],
          partitions: dict[str, dict[int, PartitionRegistration]]) -> MetadataImage:
    topics = {n: TopicImage(n, uuid.uuid4(), ps) for n, ps in partitions.items()}
    return MetadataImage(brokers={b.broker_id: b for b in brokers},
                         topics_by_id={t.topic_id: t for t in topics.values()},
                         topics_by_name=topics)


def part(replicas: tuple[int, ...], isr: tuple[int, ...], leader: int,
         **kw: object) -> PartitionRegistration:
    return PartitionRegistration(replicas, isr, leader, **kw)  # type: ignore[arg-type]


ALL_UP = [broker(1), broker(2), broker(3)]


def test_a_broker_in_every_isr_is_ready() -> None:
    img = image(ALL_UP, {"t": {0: part((1, 2, 3), (1, 2, 3), 1), 1: part((2, 3), (2, 3), 2)}})
    assert broker_readiness(img, 1, fenced=False) == READY
    assert broker_readiness(img, 3, fenced=False) == READY


def test_fenced_by_its_heartbeat_or_in_the_image_is_not_ready() -> None:
    img = image(ALL_UP, {})
    r = broker_readiness(img, 1, fenced=True)
    assert not r.ready and "fenced" in r.reason
    img = image([broker(1, fenced=True), broker(2)], {})
    assert not broker_readiness(img, 1, fenced=False).ready
    r = broker_readiness(img, 7, fenced=False)
    assert not r.ready and "not registered" in r.reason


def test_a_controlled_shutdown_is_not_ready() -> None:
    img = image([broker(1, shutting_down=True), broker(2)], {})
    r = broker_readiness(img, 1, fenced=False)
    assert not r.ready and "controlled shutdown" in r.reason


def test_a_follower_out_of_the_isr_with_a_live_leader_is_not_ready() -> None:
    img = image(ALL_UP, {"t": {0: part((1, 2, 3), (1, 3), 1), 1: part((2, 3), (2, 3), 2)},
                         "u": {0: part((3, 2), (3,), 3)}})
    r = broker_readiness(img, 2, fenced=False)
    assert not r.ready
    assert r.reason == "2 replica(s) of broker 2 not yet in the ISR: t-0, u-0"
    assert broker_readiness(img, 3, fenced=False) == READY  # the other brokers are in sync


def test_the_reason_names_a_few_partitions_and_counts_all() -> None:
    n = REASON_PARTITIONS + 3
    img = image(ALL_UP, {"t": {i: part((1, 2), (1,), 1) for i in range(n)}})
    r = broker_readiness(img, 2, fenced=False)
    assert r.reason.startswith(f"{n} replica(s) of broker 2 not yet in the ISR: t-0, t-1")
    assert r.reason.endswith(" and 3 more")


def test_nothing_to_catch_up_from_does_not_hold_readiness() -> None:
    """No leader, a fenced leader, or this broker leading: the partition waits on another
    broker (or none), not on this one."""
    img = image([broker(1), broker(2), broker(3, fenced=True)], {
        "leaderless": {0: part((1, 2), (2,), NO_LEADER)},
        "fenced-leader": {0: part((3, 1), (3,), 3)},
        "own": {0: part((1, 2), (1,), 1)},  # an unclean election's leader is its ISR
    })
    assert broker_readiness(img, 1, fenced=False) == READY
    # the same partitions with a live leader hold it
    img = image(ALL_UP, {"fenced-leader": {0: part((3, 1), (3,), 3)}})
    assert not broker_readiness(img, 1, fenced=False).ready


def test_a_reassignment_newcomer_does_not_hold_readiness() -> None:
    img = image(ALL_UP, {"t": {0: part((1, 2, 3), (1, 2), 1, adding_replicas=(3,))}})
    assert broker_readiness(img, 3, fenced=False) == READY
    # a replica being removed that fell behind still counts until it is gone
    img = image(ALL_UP, {"t": {0: part((1, 2, 3), (1, 2), 1, removing_replicas=(3,))}})
    assert not broker_readiness(img, 3, fenced=False).ready


def test_a_replica_on_an_offline_log_dir_does_not_hold_readiness() -> None:
    """KIP-858: the broker registered DIR_A online; a replica in LOST_DIR or in a dir it no
    longer lists cannot catch up until the disk is back."""
    brokers = [broker(1), broker(2, log_dirs=(DIR_A,))]
    img = image(brokers, {
        "lost": {0: part((1, 2), (1,), 1, directories=(DIR_A, LOST_DIR))},
        "gone": {0: part((1, 2), (1,), 1, directories=(DIR_A, DIR_B))},
    })
    assert broker_readiness(img, 2, fenced=False) == READY
    img = image(brokers, {"ok": {0: part((1, 2), (1,), 1, directories=(DIR_A, DIR_A))}})
    assert not broker_readiness(img, 2, fenced=False).ready
