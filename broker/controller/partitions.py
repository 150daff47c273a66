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
from broker.metadata.image import LEADER_RECOVERING, MetadataImage, PartitionRegistration
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
    item says the leader came from outside ISR and ELR (its log must be RECOVERING)."""
    if p.leader != NO_LEADER and p.leader in isr and usable(p.leader):
        return p.leader, isr, elr, False
    for r in p.replicas:
        if r in isr and usable(r):
            return r, isr, elr, False
    for r in p.replicas:
        if r in elr and usable(r):
            return r, (r,), _without(elr, (r,)), False
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
) -> Any | None:
    """A PartitionChange record for the fields that differ from `old`, or None."""
    msg = pb.PartitionChange(topic_id=topic_id.bytes, partition_id=index)
    changed = False
    if leader_recovery_state is not None and leader_recovery_state != old.leader_recovery_state:
        msg.leader_recovery_state = leader_recovery_state
        changed = True
    if leader != old.leader:
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


def remove_broker(
    image: MetadataImage,
    broker_id: int,
    min_isr: Callable[[str], int],
    unclean_enabled: Callable[[str], bool],
    unclean_shutdown: bool = False,
) -> list[Any]:
    """PartitionChanges taking `broker_id` out of every ISR it is in and moving its
    leaderships (the broker is being fenced or shut down)."""

    def usable(b: int) -> bool:
        reg = image.brokers.get(b)
        return (b != broker_id and reg is not None and not reg.fenced
                and not reg.in_controlled_shutdown)

    out: list[Any] = []
    for t in image.topics_by_id.values():
        mi = None
        for i, p in t.partitions.items():
            in_elr = unclean_shutdown and broker_id in p.elr
            if broker_id not in p.isr and p.leader != broker_id and not in_elr:
                continue
            if mi is None:
                mi = min_isr(t.name)
            isr = _without(p.isr, (broker_id,))
            elr = target_elr(p, isr, mi, (broker_id,) if unclean_shutdown else ())
            leader, isr, elr, unclean = elect_leader(p, isr, elr, usable,
                                                     unclean_enabled(t.name))
            r = partition_change(t.topic_id, i, p, leader, isr, elr,
                                 leader_recovery_state=LEADER_RECOVERING if unclean else None)
            if r is not None:
                out.append(r)
    return out


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
            leader, isr, elr, unclean = elect_leader(p, p.isr, p.elr, usable,
                                                     unclean_enabled(t.name))
            if leader == NO_LEADER:
                continue
            r = partition_change(t.topic_id, i, p, leader, isr, elr,
                                 leader_recovery_state=LEADER_RECOVERING if unclean else None)
            if r is not None:
                out.append(r)
    return out
