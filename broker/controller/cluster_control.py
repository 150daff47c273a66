"""ClusterControlManager: broker registration, heartbeats, sessions and fencing.

Broker liveness is a state machine (KIP-631), all transitions here:

  (none)      --register-->                   FENCED        RegisterBroker(fenced)
  FENCED      --heartbeat, caught up-->       UNFENCED      UnfenceBroker (+ elections)
  FENCED      --heartbeat want_shut_down-->   FENCED, should_shut_down = true
  UNFENCED    --heartbeat want_fence-->       FENCED        FenceBroker (+ ISR/leader moves)
  UNFENCED    --heartbeat want_shut_down-->   CONTROLLED_SHUTDOWN
                                              BrokerRegistrationChange(in_controlled_shutdown)
                                              (+ ISR/leader moves)
  CONTROLLED_SHUTDOWN --heartbeat, leads nothing, caught up-->
                                              FENCED        FenceBroker, should_shut_down =
                                              true; its session ends (Kafka's SHUTDOWN_NOW)
  any         --heartbeat naming an online log dir as offline (KIP-858)--> same state
                                              BrokerRegistrationChange(log_dirs: the rest)
                                              (+ ISR/ELR/leader moves of its replicas there)
  UNFENCED or CONTROLLED_SHUTDOWN --no heartbeat for broker.session.timeout.ms (tick), and
                                  none waiting in the controller-->
                                              FENCED        FenceBroker (+ ISR/leader moves)
  UNFENCED or CONTROLLED_SHUTDOWN --no heartbeat to this controller within
                                  2 x broker.heartbeat.interval.ms of its activation (tick)-->
                                              FENCED        FenceBroker (+ ISR/leader moves)
  UNFENCED or CONTROLLED_SHUTDOWN --the connection of its latest heartbeat closed
                                  (broker_disconnected), no heartbeat since for
                                  broker.session.disconnect.timeout.ms (tick)-->
                                              FENCED        FenceBroker (+ ISR/leader moves)
  any         --register again (new incarnation)--> FENCED  RegisterBroker with a new epoch
                                              (+ ISR/leader moves; an unclean restart,
                                              previous_broker_epoch != current epoch, also
                                              leaves the ELR)

The soft state (last heartbeat time, reported metadata offset) is not in the
image. A new active controller (reset_sessions at activation) knows nothing of the
heartbeats its predecessor took: Kafka gives every unfenced broker a full session from
the activation, so the brokers of a node that died with the old controller (a combined
node) kept their partitions unserved for a whole session. Here an unfenced broker starts
with a short provisional session instead, 2 x broker.heartbeat.interval.ms from the
activation (capped at the session timeout): every live broker heartbeats the new
controller as soon as it learns of it (the node heartbeats at once on a change of the
metadata quorum's leader), which turns its session into a full one; one that stays silent
that long is fenced. A broker process that dies closes its connections at once, while a
broker that is alive but whose connection dropped heartbeats again on a new one within an
interval: the disconnect rule above fences the first kind long before its session expires
(Skiff's; Kafka waits for the session).

A session ends when its broker is fenced; while a session is alive (the broker
heartbeats, fenced or not) another incarnation of that broker id is refused with
DUPLICATE_BROKER_REGISTRATION, as in Kafka (ClusterControlManager.registerBroker asks
BrokerHeartbeatManager.hasValidSession). A controlled shutdown ends with the broker fenced
and its session over, so the next incarnation (a restart after SIGTERM) registers at
once; heartbeats of the stopped epoch after that (a retried want_shut_down) start no new
session. Kafka 4.4 fences it too but keeps the contact time of its last heartbeat, so
a broker restarted within broker.session.timeout.ms of its clean stop is refused until
then, like one restarted after kill -9. After a kill -9 the new incarnation waits until
the old session lapses: its last heartbeat plus the session timeout, or sooner when the
disconnect rule or the activation grace fences it.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from broker.controller import partitions as parts
from broker.controller.control_base import ControlManagerBase
from broker.controller.requests import (
    ApiError,
    BrokerHeartbeatReply,
    BrokerHeartbeatRequest,
    BrokerRegistrationReply,
    BrokerRegistrationRequest,
    ControllerRegistrationRequest,
    ControllerResult,
)
from broker.controller.settings import ControllerSettings
from broker.metadata import records as rec
from broker.metadata.delta import apply_records
from broker.metadata.features import CORDONED_LOG_DIRS_METADATA_VERSION, METADATA_VERSION
from broker.metadata.image import (
    LOST_DIR,
    MIGRATING_DIR,
    UNASSIGNED_DIR,
    ControllerRegistration,
    Endpoint,
    MetadataImage,
)
from broker.metadata.records import pb

RESERVED_DIRS = frozenset({UNASSIGNED_DIR, LOST_DIR, MIGRATING_DIR})


@dataclass
class _BrokerSession:
    last_seen_ms: int
    metadata_offset: int = -1
    register_offset: int = 0   # the broker is caught up once it has applied this offset
    disconnected_ms: int | None = None  # when its latest heartbeat's connection closed
    waiting: int = 0  # heartbeats that arrived and wait their turn (heartbeat_arrived)
    # carried over by a newly active controller, no heartbeat to it yet: lasts only the
    # activation grace (ClusterControlManager.activation_grace_ms)
    provisional: bool = False
    # its node ran the active controller this one replaced (reset_sessions' `deposed`)
    with_deposed_controller: bool = False


def _unsupported_finalized(image: MetadataImage,
                           features: Iterable[tuple[str, int, int]], who: str) -> str | None:
    """Why a registering broker or controller (`who`) is refused, None if it supports every
    finalized feature at its level, as Kafka checks it: a feature it does not declare
    supports level 0 only."""
    declared = {name: (lo, hi) for name, lo, hi in features}
    for name, level in sorted(image.features.items()):
        lo, hi = declared.get(name, (0, 0))
        if not lo <= level <= hi:
            return (f"Unable to register because the {who} does not support finalized "
                    f"version {level} of {name}. The {who} wants a version between {lo} and "
                    f"{hi}, inclusive.")
    return None


class ClusterControlManager(ControlManagerBase):
    def __init__(self, settings: ControllerSettings, rng: random.Random) -> None:
        super().__init__(settings, rng)
        self._sessions: dict[int, _BrokerSession] = {}
        # broker id -> why tick fenced it (the shell logs and clears them)
        self.fence_causes: dict[int, str] = {}
        # when this controller last became active (reset_sessions), or -1
        self._activated_ms = -1
        # the node that was the active controller before this one (reset_sessions), or -1
        self._deposed = -1

    # -- broker registration and heartbeats -------------------------------------------

    def register_controller(self, image: MetadataImage,
                            req: ControllerRegistrationRequest) -> ControllerResult[ApiError]:
        """KIP-919: record a controller's listeners and supported features
        (RegisterController). A controller that does not support a finalized level is
        refused, as a broker is; the same registration again writes nothing."""
        refusal = _unsupported_finalized(image, req.features, "controller")
        if refusal is not None:
            return ControllerResult([], ApiError(ErrorCode.unsupported_version, refusal))
        reg = ControllerRegistration(
            req.controller_id, req.incarnation_id,
            tuple(Endpoint(n, h, p, sp) for n, h, p, sp in req.listeners),
            tuple((n, lo, hi) for n, lo, hi in req.features))
        if image.controllers.get(req.controller_id) == reg:
            return ControllerResult([], ApiError())
        return ControllerResult([rec.register_controller_record(reg)], ApiError())

    def register_broker(self, image: MetadataImage, req: BrokerRegistrationRequest,
                        now_ms: int) -> ControllerResult[BrokerRegistrationReply]:
        if self.settings.cluster_id and req.cluster_id != self.settings.cluster_id:
            return ControllerResult([], BrokerRegistrationReply(
                ErrorCode.inconsistent_cluster_id,
                f"Expected cluster ID {self.settings.cluster_id}, but got {req.cluster_id}"))
        if req.broker_id < 0:
            return ControllerResult([], BrokerRegistrationReply(
                ErrorCode.invalid_registration, f"Invalid broker id {req.broker_id}"))
        bad_dirs = self._log_dirs_refusal(image, req)
        if bad_dirs is not None:
            return ControllerResult([], BrokerRegistrationReply(ErrorCode.invalid_registration,
                                                                bad_dirs))
        existing = image.brokers.get(req.broker_id)
        session = self._session(image, req.broker_id, now_ms)
        if (existing is not None and existing.incarnation_id != req.incarnation_id
                and session is not None and not self._heartbeats_lapsed(session, now_ms)):
            return ControllerResult([], BrokerRegistrationReply(
                ErrorCode.duplicate_broker_registration,
                f"Another broker is registered with that broker id ({req.broker_id})."))
        refusal = _unsupported_finalized(image, req.features, "broker")
        if refusal is not None:
            return ControllerResult([], BrokerRegistrationReply(ErrorCode.unsupported_version,
                                                                refusal))
        records: list[Any] = []
        if existing is not None:
            unclean = req.previous_broker_epoch != existing.epoch
            records.extend(parts.remove_broker(image, req.broker_id, self._topic_min_isr(image),
                                               self._topic_unclean(image),
                                               unclean_shutdown=unclean))
        epoch = image.last_broker_epoch + 1
        msg = pb.RegisterBroker(
            broker_id=req.broker_id,
            incarnation_id=req.incarnation_id.bytes,
            broker_epoch=epoch,
            endpoints=[pb.Endpoint(name=n, host=h, port=p, security_protocol=sp)
                       for n, h, p, sp in req.listeners],
            features=[pb.FeatureRange(name=n, min_supported_version=lo, max_supported_version=hi)
                      for n, lo, hi in req.features],
            fenced=True,
            log_dirs=[d.bytes for d in req.log_dirs],
        )
        if req.rack is not None:
            msg.rack = req.rack
        records.append(rec.wrap(msg))
        self._sessions[req.broker_id] = _BrokerSession(
            last_seen_ms=now_ms, register_offset=image.offset + len(records))
        return ControllerResult(records, BrokerRegistrationReply(broker_epoch=epoch))

    @staticmethod
    def _log_dirs_refusal(image: MetadataImage, req: BrokerRegistrationRequest) -> str | None:
        """Kafka's checks of the registered directory ids (KIP-858): none reserved, none
        twice, none another broker registered (a copied disk)."""
        dirs = list(req.log_dirs)
        if any(d in RESERVED_DIRS for d in dirs):
            return "Reserved directory ID in request"
        if len(set(dirs)) != len(dirs):
            return "Duplicate directory ID in request"
        for bid, reg in image.brokers.items():
            if bid == req.broker_id:
                continue
            for d in dirs:
                if d in reg.log_dirs:
                    return f"Broker {bid} is already registered with directory {d}"
        return None

    def broker_heartbeat(self, image: MetadataImage, req: BrokerHeartbeatRequest,
                         now_ms: int) -> ControllerResult[BrokerHeartbeatReply]:
        reg = image.brokers.get(req.broker_id)
        if reg is None:
            return ControllerResult([], BrokerHeartbeatReply(
                ErrorCode.broker_id_not_registered,
                f"No registration found for broker {req.broker_id}"))
        if reg.epoch != req.broker_epoch:
            return ControllerResult([], BrokerHeartbeatReply(
                ErrorCode.stale_broker_epoch,
                f"Expected broker epoch {reg.epoch}, but got {req.broker_epoch}"))
        s = self._sessions.get(req.broker_id)
        if s is None and reg.fenced and req.want_shut_down:
            # a fenced epoch on its way out (its controlled shutdown is over, a retried
            # heartbeat): go, and start no session that would refuse the next incarnation
            return ControllerResult([], BrokerHeartbeatReply(
                is_caught_up=req.current_metadata_offset >= 0, is_fenced=True,
                should_shut_down=True))
        if s is None:
            # Registered under a previous controller, or fenced since: its registration is
            # somewhere in what this controller has applied. Kafka keeps the offset of each
            # RegisterBrokerRecord to decide; the image does not, so the broker must have
            # applied all of it before it is unfenced. Caught up from offset 0 on, a broker
            # restarted under one controller was unfenced by the next before it had read
            # its own registration, and opened its listener on a stale image.
            s = _BrokerSession(last_seen_ms=now_ms, register_offset=image.offset)
            self._sessions[req.broker_id] = s
        s.last_seen_ms = max(s.last_seen_ms, now_ms)
        s.disconnected_ms = None
        s.with_deposed_controller = False
        s.provisional = False
        s.metadata_offset = req.current_metadata_offset
        caught_up = req.current_metadata_offset >= s.register_offset
        records: list[Any] = []
        min_isr, unclean = self._topic_min_isr(image), self._topic_unclean(image)
        lost = self.directories_offline(image, reg.broker_id, reg.epoch, req.offline_log_dirs)
        if lost:
            records.extend(lost)
            image = apply_records(image, lost, image.offset, image.epoch)
            reg = image.brokers[req.broker_id]
        cordoned = self.directories_cordoned(image, reg.broker_id, req.cordoned_log_dirs)
        if cordoned:
            records.extend(cordoned)
            image = apply_records(image, cordoned, image.offset, image.epoch)
            reg = image.brokers[req.broker_id]
        if reg.fenced:
            if req.want_shut_down:
                return ControllerResult(records, BrokerHeartbeatReply(
                    is_caught_up=caught_up, is_fenced=True, should_shut_down=True))
            if req.want_fence or not caught_up:
                return ControllerResult(records, BrokerHeartbeatReply(
                    is_caught_up=caught_up, is_fenced=True))
            records.extend(parts.elect_for_unfenced(image, req.broker_id, unclean))
            records.append(rec.wrap(pb.UnfenceBroker(broker_id=reg.broker_id,
                                                     broker_epoch=reg.epoch)))
            if reg.in_controlled_shutdown:
                records.append(rec.wrap(pb.BrokerRegistrationChange(
                    broker_id=reg.broker_id, broker_epoch=reg.epoch,
                    in_controlled_shutdown=False)))
            return ControllerResult(records, BrokerHeartbeatReply(
                is_caught_up=True, is_fenced=False))
        # unfenced or in controlled shutdown
        if req.want_fence:
            records.extend(parts.remove_broker(image, req.broker_id, min_isr, unclean))
            records.append(rec.wrap(pb.FenceBroker(broker_id=reg.broker_id,
                                                   broker_epoch=reg.epoch)))
            del self._sessions[req.broker_id]
            return ControllerResult(records, BrokerHeartbeatReply(
                is_caught_up=caught_up, is_fenced=True, should_shut_down=req.want_shut_down))
        if req.want_shut_down:
            if not reg.in_controlled_shutdown:
                records.extend(parts.remove_broker(image, req.broker_id, min_isr, unclean))
                records.append(rec.wrap(pb.BrokerRegistrationChange(
                    broker_id=reg.broker_id, broker_epoch=reg.epoch,
                    in_controlled_shutdown=True)))
                return ControllerResult(records, BrokerHeartbeatReply(
                    is_caught_up=caught_up, is_fenced=False, should_shut_down=False))
            done = (not records and not self._has_duties(image, req.broker_id)
                    and req.current_metadata_offset >= image.offset)
            if not done:
                return ControllerResult(records, BrokerHeartbeatReply(
                    is_caught_up=caught_up, is_fenced=False, should_shut_down=False))
            # Kafka's SHUTDOWN_NOW: the broker is fenced (handleBrokerFenced) and may stop;
            # its session is over, so its next incarnation registers at once
            records.extend(parts.remove_broker(image, req.broker_id, min_isr, unclean))
            records.append(rec.wrap(pb.FenceBroker(broker_id=reg.broker_id,
                                                   broker_epoch=reg.epoch)))
            del self._sessions[req.broker_id]
            return ControllerResult(records, BrokerHeartbeatReply(
                is_caught_up=caught_up, is_fenced=True, should_shut_down=True))
        return ControllerResult(records, BrokerHeartbeatReply(is_caught_up=caught_up,
                                                              is_fenced=False))

    def directories_offline(self, image: MetadataImage, broker_id: int, broker_epoch: int,
                            offline: Any) -> list[Any]:
        """KIP-858 (Kafka's handleDirectoriesOffline): of the directories a broker reports
        offline, those still registered as online leave its registration
        (BrokerRegistrationChange with the remaining log dirs), and the partitions whose
        replica on it lives there lose it from their ISR, ELR and leadership."""
        reg = image.brokers.get(broker_id)
        if reg is None:
            return []
        newly = {d for d in offline if d in reg.log_dirs}
        if not newly:
            return []
        records = parts.remove_broker(
            image, broker_id, self._topic_min_isr(image), self._topic_unclean(image),
            only=lambda _tid, _i, p: p.directory_of(broker_id) in newly)
        change = pb.BrokerRegistrationChange(broker_id=broker_id, broker_epoch=broker_epoch)
        change.log_dirs.ids.extend(d.bytes for d in reg.log_dirs if d not in newly)
        change.log_dirs.SetInParent()
        records.append(rec.wrap(change))
        return records

    @staticmethod
    def directories_cordoned(image: MetadataImage, broker_id: int,
                             cordoned: Any) -> list[Any]:
        """KIP-1066 (Kafka's handleDirectoriesCordoned): the directories a broker's heartbeat
        reports cordoned become its registration's when they differ (a
        BrokerRegistrationChange); nothing before metadata.version 4.3-IV0, or while the
        broker has not caught up (it sends none)."""
        reg = image.brokers.get(broker_id)
        if (reg is None or cordoned is None or image.finalized_level(METADATA_VERSION)
                < CORDONED_LOG_DIRS_METADATA_VERSION):
            return []
        now = frozenset(d for d in cordoned if d in reg.log_dirs)
        if now == reg.cordoned_log_dirs:
            return []
        change = pb.BrokerRegistrationChange(broker_id=broker_id, broker_epoch=reg.epoch)
        change.cordoned_log_dirs.ids.extend(d.bytes for d in sorted(now))
        change.cordoned_log_dirs.SetInParent()
        return [rec.wrap(change)]

    @staticmethod
    def _has_duties(image: MetadataImage, broker_id: int) -> bool:
        if image.leaderships.get(broker_id):
            return True
        return any(broker_id in p.isr for _, _, p in image.iter_partitions())

    def heartbeat_received(self, image: MetadataImage, broker_id: int, broker_epoch: int,
                           now_ms: int, want_shut_down: bool = False) -> None:
        """A heartbeat of the broker's current registration arrived at `now_ms`: its session
        is alive from then on, even if the heartbeat itself is processed later. The shell
        calls this on arrival, before the heartbeat waits its turn behind other operations
        (a big CreateTopics holds the controller while it commits): a session counted only
        from when the heartbeat is processed expired behind such a queue, and the tick
        fenced every live broker at once (issue 17: "only 0 broker(s) are registered").
        An unfenced broker without a session yet (its first heartbeat to a newly active
        controller) gets a full one from now, so the activation grace cannot fence it
        while its heartbeat waits; a fenced broker's session is started by broker_heartbeat
        itself (or none, for a stopped epoch); registration and fencing stay with
        broker_heartbeat and tick."""
        reg = image.brokers.get(broker_id)
        if reg is None or reg.epoch != broker_epoch:
            return
        s = self._sessions.get(broker_id)
        if s is None:
            if reg.fenced or want_shut_down:
                return
            s = self._sessions[broker_id] = _BrokerSession(last_seen_ms=now_ms)
        s.last_seen_ms = max(s.last_seen_ms, now_ms)
        s.disconnected_ms = None
        s.with_deposed_controller = False
        s.provisional = False

    def broker_disconnected(self, broker_id: int, now_ms: int) -> None:
        """The connection that carried `broker_id`'s latest heartbeat closed: unless it
        heartbeats again, tick fences it after broker.session.disconnect.timeout.ms."""
        s = self._sessions.get(broker_id)
        if s is not None and s.disconnected_ms is None:
            s.disconnected_ms = now_ms

    def heartbeat_arrived(self, broker_id: int) -> None:
        """A heartbeat of `broker_id` reached the controller; it is processed in its turn,
        after the operations before it (each waits for its records to commit). Until
        heartbeat_left, tick takes the broker as alive: a busy controller is no sign of a
        dead broker. Kafka likewise counts a heartbeat that timed out in its controller's
        queue as contact (processExpiredBrokerHeartbeat)."""
        s = self._sessions.get(broker_id)
        if s is not None:
            s.waiting += 1

    def heartbeat_left(self, broker_id: int) -> None:
        """The heartbeat of heartbeat_arrived was processed, or failed."""
        s = self._sessions.get(broker_id)
        if s is not None and s.waiting > 0:
            s.waiting -= 1

    def activation_grace_ms(self) -> int:
        """How long a newly active controller waits for the first heartbeat of a broker its
        predecessor took the heartbeats of: two heartbeat intervals, at most a session."""
        return min(2 * self.settings.broker_heartbeat_interval_ms,
                   self.settings.broker_session_timeout_ms)

    def _heartbeats_lapsed(self, s: _BrokerSession, now_ms: int) -> bool:
        """No heartbeat for broker.session.timeout.ms (Kafka's session rule), or, for a
        session carried over at activation, none within the activation grace."""
        limit = (self.activation_grace_ms() if s.provisional
                 else self.settings.broker_session_timeout_ms)
        return now_ms - s.last_seen_ms >= limit

    def _session_expired(self, s: _BrokerSession, now_ms: int) -> bool:
        """The session rule, or a closed heartbeat connection past its timeout."""
        return self._fence_cause(s, now_ms) is not None

    def _fence_cause(self, s: _BrokerSession, now_ms: int) -> str | None:
        """Why the broker of session `s` is to be fenced now, in words for the log (None:
        it is not): its heartbeat connection closed and no heartbeat came within
        broker.session.disconnect.timeout.ms, no heartbeat for broker.session.timeout.ms, or
        none to this controller within the activation grace."""
        grace = self.settings.broker_session_disconnect_timeout_ms
        if grace >= 0 and s.disconnected_ms is not None and now_ms - s.disconnected_ms >= grace:
            if s.with_deposed_controller:
                return (f"its node ran the controller this one replaced and it has not "
                        f"heartbeated in the {now_ms - s.disconnected_ms} ms since the "
                        f"activation (broker.session.disconnect.timeout.ms={grace})")
            return (f"its heartbeat connection closed {now_ms - s.disconnected_ms} ms ago and "
                    f"no heartbeat came since (broker.session.disconnect.timeout.ms={grace})")
        if self._heartbeats_lapsed(s, now_ms) and s.provisional:
            return (f"no heartbeat since this controller became active "
                    f"{now_ms - s.last_seen_ms} ms ago (activation grace "
                    f"{self.activation_grace_ms()} ms)")
        if self._heartbeats_lapsed(s, now_ms):
            return (f"session expired: no heartbeat for {now_ms - s.last_seen_ms} ms "
                    f"(broker.session.timeout.ms="
                    f"{self.settings.broker_session_timeout_ms})")
        return None

    def _session(self, image: MetadataImage, broker_id: int,
                 now_ms: int) -> _BrokerSession | None:
        """The broker's session; an unfenced broker this controller has not heard from since
        its activation gets a provisional one, from the activation (reset_sessions)."""
        s = self._sessions.get(broker_id)
        reg = image.brokers.get(broker_id)
        if s is None and reg is not None and not reg.fenced:
            since = self._activated_ms if 0 <= self._activated_ms <= now_ms else now_ms
            s = self._sessions[broker_id] = _BrokerSession(last_seen_ms=since, provisional=True)
            if broker_id == self._deposed:
                # the broker shares a process with the controller the quorum just lost
                # (a combined node): that loss is the closed connection of the disconnect
                # rule, so it is fenced after broker.session.disconnect.timeout.ms unless
                # it heartbeats, as a live one does at once
                s.disconnected_ms = since
                s.with_deposed_controller = True
        return s

    def awaiting_first_heartbeat(self, image: MetadataImage) -> set[int]:
        """Unfenced brokers this controller has not heard from since its activation (their
        sessions last the activation grace): for the shell's log of why a broker was
        fenced."""
        return {b for b, reg in image.brokers.items() if not reg.fenced
                and ((s := self._sessions.get(b)) is None or s.provisional)}

    def reset_sessions(self, now_ms: int = -1, deposed: int = -1) -> None:
        """A controller that becomes active at `now_ms` starts every broker's session afresh
        (Kafka's BrokerHeartbeatManager is new with each activation). Deadlines kept from an
        earlier term of this node, before another controller took the heartbeats, would
        fence live brokers at the first tick. The unfenced brokers' new sessions are
        provisional (tick): they last the activation grace from `now_ms` unless the broker
        heartbeats (-1: from the first tick). `deposed` is the node that was the active
        controller before this one: the broker of that id, on a combined node, has the
        disconnect rule's shorter wait from `now_ms` instead of the activation grace."""
        self._sessions.clear()
        self._activated_ms = now_ms
        self._deposed = deposed

    def tick(self, image: MetadataImage, now_ms: int) -> list[Any]:
        """Fence one broker whose session expired (the lowest id); returns the records to
        append (one batch). One per tick, as Kafka's controller fences one stale broker per
        event: after a stall of this process every session may look expired while the
        heartbeats that renew them wait to be read, and fencing them all at once left no
        broker registered (issue 17); the next tick, a heartbeat interval later, fences the
        next if its session is still expired."""
        records: list[Any] = []
        for bid in sorted(image.brokers):
            reg = image.brokers[bid]
            s = self._session(image, bid, now_ms)
            if s is None or reg.fenced or s.waiting:
                continue
            cause = self._fence_cause(s, now_ms)
            if cause is None:
                continue
            self.fence_causes[bid] = cause
            # Later brokers in this tick must see this one as fenced: apply as we go.
            changes = parts.remove_broker(image, bid, self._topic_min_isr(image),
                                          self._topic_unclean(image))
            fence = rec.wrap(pb.FenceBroker(broker_id=bid, broker_epoch=reg.epoch))
            records.extend(changes)
            records.append(fence)
            del self._sessions[bid]  # a fenced broker's session is over
            break
        for bid in [b for b in self._sessions if b not in image.brokers]:
            del self._sessions[bid]
        return records

    def unregister_broker(self, image: MetadataImage,
                          broker_id: int) -> ControllerResult[tuple[ErrorCode, str | None]]:
        reg = image.brokers.get(broker_id)
        if reg is None:
            return ControllerResult([], (ErrorCode.broker_id_not_registered,
                                         f"Broker ID {broker_id} is not currently registered"))
        records = parts.remove_broker(image, broker_id, self._topic_min_isr(image),
                                      self._topic_unclean(image))
        records.append(rec.wrap(pb.UnregisterBroker(broker_id=broker_id,
                                                    broker_epoch=reg.epoch)))
        self._sessions.pop(broker_id, None)
        return ControllerResult(records, (ErrorCode.none, None))
