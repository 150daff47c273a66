"""Partition leadership and ISR changes when brokers come and go (pure functions).

Rules (KRaft with KIP-966 eligible leader replicas):
  * removing a broker from a partition (fenced, session expired, controlled
    shutdown, unclean restart) takes it out of the ISR; if the ISR is then below
    min.insync.replicas, the replicas that just left join the ELR (the high
    watermark cannot have advanced past them). An unclean restart also drops the
    broker from the ELR: its log may have lost acknowledged data.
  * an ISR at or above min.insync.replicas empties the ELR.
  * a leader is chosen, in replica order, from the unfenced ISR members, then from
    the unfenced ELR members (that leader becomes the ISR); with unclean election
    enabled, then from any unfenced replica (also becoming the ISR alone);
    otherwise the leader is -1 (offline).
  * the current leader stays if it is still an unfenced ISR member.
  * a PartitionChange sets `leader` (and so bumps the leader epoch) only when the
    leader changes.
  * an unclean leader's log is RECOVERING (leader_recovery_state = 1) until it tells
    the controller, through AlterPartition, that it is RECOVERED; meanwhile its ISR
    stays just itself.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection
from typing import Any

from broker.metadata import records as rec
from broker.metadata.image import (
    LEADER_RECOVERING,
    MetadataImage,
    PartitionRegistration,
    dir_online,
)
from broker.metadata.records import NO_LEADER, pb


def _without(ids: tuple[int, ...], drop: Collection[int]) -> tuple[int, ...]:
    return tuple(i for i in ids if i not in drop)


def elect_leader(
    p: PartitionRegistration,
    isr: tuple[int, ...],
    elr: tuple[int, ...],
    usable: Callable[[int], bool],
    unclean: bool,
) -> tuple[int, tuple[int, ...], tuple[int, ...], bool]:
    """(leader, isr, elr, unclean) after an election over the given ISR and ELR; the last
    item says the leader came from outside ISR and ELR (its log must be RECOVERING).

    Kafka's order (KIP-966): the ISR, then an unfenced ELR member, then the last known
    leader if it is unfenced (what Kafka did before ELR when every replica was offline),
    and only then, if enabled, an unclean election."""
    if p.leader != NO_LEADER and p.leader in isr and usable(p.leader):
        return p.leader, isr, elr, False
    for r in p.replicas:
        if r in isr and usable(r):
            return r, isr, elr, False
    for r in p.replicas:
        if r in elr and usable(r):
            return r, (r,), _without(elr, (r,)), False
    if not isr and not elr:
        for r in p.last_known_elr:
            if r in p.replicas and usable(r):
                return r, (r,), (), False
    if unclean:
        for r in p.replicas:
            if usable(r):
                return r, (r,), (), True
    return NO_LEADER, isr, elr, False


def partition_change(
    topic_id: uuid.UUID,
    index: int,
    old: PartitionRegistration,
    leader: int,
    isr: tuple[int, ...],
    elr: tuple[int, ...],
    last_known_elr: tuple[int, ...] | None = None,
    leader_recovery_state: int | None = None,
    replicas: tuple[int, ...] | None = None,
    adding: tuple[int, ...] | None = None,
    removing: tuple[int, ...] | None = None,
    bump_leader_epoch: bool = False,
) -> Any | None:
    """A PartitionChange record for the fields that differ from `old`, or None.
    `bump_leader_epoch` sets `leader` even when unchanged, so the epoch moves on (replicas
    removed by a reassignment must not keep fetching under the old epoch)."""
    msg = pb.PartitionChange(topic_id=topic_id.bytes, partition_id=index)
    changed = False
    for name, new, current in (("replicas", replicas, old.replicas),
                               ("adding_replicas", adding, old.adding_replicas),
                               ("removing_replicas", removing, old.removing_replicas)):
        if new is not None and new != current:
            getattr(msg, name).ids.extend(new)
            getattr(msg, name).SetInParent()
            changed = True
    if leader_recovery_state is not None and leader_recovery_state != old.leader_recovery_state:
        msg.leader_recovery_state = leader_recovery_state
        changed = True
    if leader != old.leader or (bump_leader_epoch and leader != NO_LEADER):
        msg.leader = leader
        changed = True
    if isr != old.isr:
        msg.isr.ids.extend(isr)
        msg.isr.SetInParent()
        changed = True
    if elr != old.elr:
        msg.elr.ids.extend(elr)
        msg.elr.SetInParent()
        changed = True
    if last_known_elr is not None and last_known_elr != old.last_known_elr:
        msg.last_known_elr.ids.extend(last_known_elr)
        msg.last_known_elr.SetInParent()
        changed = True
    return rec.wrap(msg) if changed else None


def target_elr(p: PartitionRegistration, new_isr: tuple[int, ...], min_isr: int,
               unclean_shutdown: Collection[int] = ()) -> tuple[int, ...]:
    """The ELR after the ISR becomes `new_isr` (KIP-966): empty once the ISR reaches
    min.insync.replicas; otherwise the old ELR plus whoever just left the ISR, minus the
    new ISR and minus brokers that restarted uncleanly."""
    if len(new_isr) >= min_isr:
        return ()
    out = [r for r in (*p.elr, *p.isr) if r not in new_isr and r not in unclean_shutdown]
    return tuple(dict.fromkeys(out))


def replica_online(image: MetadataImage, p: PartitionRegistration, broker_id: int) -> bool:
    """KIP-858: is `broker_id`'s replica of `p` in one of its online log directories?"""
    reg = image.brokers.get(broker_id)
    return reg is not None and dir_online(p.directory_of(broker_id), reg.log_dirs)


def _and_online(usable: Callable[[int], bool], image: MetadataImage,
                p: PartitionRegistration) -> Callable[[int], bool]:
    return lambda b: usable(b) and replica_online(image, p, b)


def remove_broker(
    image: MetadataImage,
    broker_id: int,
    min_isr: Callable[[str], int],
    unclean_enabled: Callable[[str], bool],
    unclean_shutdown: bool = False,
    only: Callable[[uuid.UUID, int, PartitionRegistration], bool] | None = None,
) -> list[Any]:
    """PartitionChanges taking `broker_id` out of every ISR it is in and moving its
    leaderships (the broker is being fenced or shut down). With `only`, just the partitions
    it selects, and the broker leaves their ELR too (KIP-858: its replicas there are in a
    failed log directory)."""

    def usable(b: int) -> bool:
        reg = image.brokers.get(b)
        return (b != broker_id and reg is not None and not reg.fenced
                and not reg.in_controlled_shutdown)

    drop_elr = unclean_shutdown or only is not None
    out: list[Any] = []
    for t in image.topics_by_id.values():
        mi = None
        for i, p in t.partitions.items():
            in_elr = drop_elr and broker_id in p.elr
            if broker_id not in p.isr and p.leader != broker_id and not in_elr:
                continue
            if only is not None and not only(t.topic_id, i, p):
                continue
            if mi is None:
                mi = min_isr(t.name)
            isr = _without(p.isr, (broker_id,))
            elr = target_elr(p, isr, mi, (broker_id,) if drop_elr else ())
            if drop_elr:
                elr = _without(elr, (broker_id,))
            leader, isr, elr, unclean = elect_leader(
                p, isr, elr, _and_online(usable, image, p),
                unclean_enabled(t.name))
            r = partition_change(t.topic_id, i, p, leader, isr, elr,
                                 last_known_elr=_last_known(p, leader, isr, elr),
                                 leader_recovery_state=LEADER_RECOVERING if unclean else None)
            if r is not None:
                out.append(r)
    return out


def _last_known(p: PartitionRegistration, leader: int, isr: tuple[int, ...],
                elr: tuple[int, ...]) -> tuple[int, ...]:
    """Kafka's LastKnownElr: who led (or was in sync) when the partition lost every ISR
    and ELR member; cleared once a leader is elected again."""
    if leader != NO_LEADER or isr or elr:
        return ()
    if p.last_known_elr:
        return p.last_known_elr
    known = p.isr or p.elr or ((p.leader,) if p.leader != NO_LEADER else ())
    return tuple(known)


def elect_for_unfenced(
    image: MetadataImage,
    broker_id: int,
    unclean_enabled: Callable[[str], bool],
) -> list[Any]:
    """PartitionChanges giving leaderless partitions a leader now that `broker_id` is back
    (`image` still shows it fenced; it counts as usable here)."""

    def usable(b: int) -> bool:
        if b == broker_id:
            return True
        reg = image.brokers.get(b)
        return reg is not None and not reg.fenced and not reg.in_controlled_shutdown

    out: list[Any] = []
    for t in image.topics_by_id.values():
        for i, p in t.partitions.items():
            if p.leader != NO_LEADER or broker_id not in p.replicas:
                continue
            leader, isr, elr, unclean = elect_leader(
                p, p.isr, p.elr, _and_online(usable, image, p),
                unclean_enabled(t.name))
            if leader == NO_LEADER:
                continue
            r = partition_change(t.topic_id, i, p, leader, isr, elr, last_known_elr=(),
                                 leader_recovery_state=LEADER_RECOVERING if unclean else None)
            if r is not None:
                out.append(r)
    return out


# -- reassignment (KIP-455) ----------------------------------------------------------
#
#   start:    replicas = target + (current - target), adding = target - current,
#             removing = current - target
#   complete: once the ISR holds every adding replica and some target replica:
#             replicas = target, ISR = ISR - removing, no adding/removing, a new leader
#             from the target if the old one is being removed, leader epoch bumped
#   cancel:   replicas = current - adding, ISR = ISR - adding


def original_replicas(p: PartitionRegistration) -> tuple[int, ...]:
    return tuple(r for r in p.replicas if r not in p.adding_replicas)


def target_replicas(p: PartitionRegistration) -> tuple[int, ...]:
    return tuple(r for r in p.replicas if r not in p.removing_replicas)


def reassigning(p: PartitionRegistration) -> bool:
    return bool(p.adding_replicas or p.removing_replicas)


def change_replicas(
    topic_id: uuid.UUID, index: int, p: PartitionRegistration, replicas: tuple[int, ...],
    isr: tuple[int, ...], adding: tuple[int, ...], removing: tuple[int, ...],
    usable: Callable[[int], bool], min_isr: int,
) -> Any | None:
    """The PartitionChange that makes `replicas` the assignment, electing a leader among them
    when the current one leaves; the leader epoch is bumped when replicas are dropped."""
    shaped = PartitionRegistration(replicas=replicas, isr=isr, leader=p.leader,
                                   leader_epoch=p.leader_epoch, elr=p.elr)
    elr = tuple(r for r in p.elr if r in replicas)
    leader, isr, elr, _ = elect_leader(shaped, isr, elr, usable, unclean=False)
    if len(isr) >= min_isr:
        elr = ()
    dropped = any(r not in replicas for r in p.replicas)
    return partition_change(topic_id, index, p, leader, isr, elr, replicas=replicas,
                            adding=adding, removing=removing, bump_leader_epoch=dropped)


def maybe_complete_reassignment(
    topic_id: uuid.UUID, index: int, p: PartitionRegistration, isr: tuple[int, ...],
    usable: Callable[[int], bool], min_isr: int,
) -> Any | None:
    """The completing PartitionChange when `isr` allows it, else None."""
    if not reassigning(p) or any(a not in isr for a in p.adding_replicas):
        return None
    new_isr = tuple(r for r in isr if r not in p.removing_replicas)
    if not new_isr:
        return None
    return change_replicas(topic_id, index, p, target_replicas(p), new_isr, (), (), usable,
                           min_isr)
