"""ReplicationControlManager: topics, partitions, ISR changes (AlterPartition), partition
reassignments and leader elections, as records against the image."""

from __future__ import annotations

import base64
import random
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from broker import config as cfgmod
from broker.config import ConfigError
from broker.controller import partitions as parts
from broker.controller.control_base import ControlManagerBase
from broker.controller.placement import PlacementError, place_replicas, validate_assignment
from broker.controller.requests import (
    AlterPartitionItem,
    AlterPartitionItemResult,
    AlterPartitionReply,
    AlterPartitionRequest,
    AssignReplicasToDirsReply,
    AssignReplicasToDirsRequest,
    ControllerResult,
    CreatableTopic,
    CreatePartitionsResult,
    CreatePartitionsTopic,
    CreateTopicResult,
    DeleteTopicResult,
    ElectionType,
    ElectLeadersResult,
    OngoingReassignment,
    ReassignmentResult,
)
from broker.controller.validation import collision_key, has_collision_chars, topic_name_error
from broker.metadata import records as rec
from broker.metadata.delta import apply_records
from broker.metadata.image import (
    LEADER_RECOVERED,
    LEADER_RECOVERING,
    UNASSIGNED_DIR,
    MetadataImage,
    PartitionRegistration,
    dir_online,
)
from broker.metadata.records import NO_LEADER, RESOURCE_TOPIC, pb

# Kafka bounds what one user request may write (QuorumController.MAX_PARTITIONS_PER_BATCH):
# a CreateTopics or CreatePartitions asking for more new partitions fails as a whole.
MAX_PARTITIONS_PER_REQUEST = 10_000
_TOO_MANY = "Excessively large number of partitions per request."


def random_topic_id(rng: random.Random, taken: Iterable[uuid.UUID] = ()) -> uuid.UUID:
    """A Kafka topic id: random, never zero or the metadata topic's id (1), never one whose
    base64 form starts with '-' (it would read as a command-line flag), never taken."""
    used = set(taken)
    while True:
        u = uuid.UUID(int=rng.getrandbits(128), version=4)
        if u.int in (0, 1) or u in used:
            continue
        if base64.urlsafe_b64encode(u.bytes)[:1] == b"-":
            continue
        return u


class ReplicationControlManager(ControlManagerBase):
    # -- CreateTopics --------------------------------------------------------------

    def create_topics(self, image: MetadataImage, topics: Sequence[CreatableTopic],
                      validate_only: bool = False) -> ControllerResult[list[CreateTopicResult]]:
        total = 0
        for t in topics:
            if t.assignments:
                total += len(t.assignments)
            elif t.num_partitions == -1:
                total += self.settings.num_partitions
            elif t.num_partitions > 0:
                total += t.num_partitions
        if total > MAX_PARTITIONS_PER_REQUEST:
            return ControllerResult([], [CreateTopicResult(t.name, ErrorCode.policy_violation,
                                                           _TOO_MANY) for t in topics])
        counts: dict[str, int] = {}
        for t in topics:
            counts[t.name] = counts.get(t.name, 0) + 1
        existing_keys = {collision_key(n): n for n in image.topics_by_name
                         if has_collision_chars(n)}
        taken_ids = set(image.topics_by_id)
        usable = self.placeable_brokers(image)
        records: list[Any] = []
        results: list[CreateTopicResult] = []
        for t in topics:
            if counts[t.name] > 1:
                results.append(CreateTopicResult(t.name, ErrorCode.invalid_request,
                                                  "Duplicate topic name."))
                continue
            res = self._create_one(image, t, usable, existing_keys, taken_ids)
            if isinstance(res, CreateTopicResult):
                results.append(res)
                continue
            topic_records, result = res
            results.append(result)
            if not validate_only:
                records.extend(topic_records)
                if has_collision_chars(t.name):
                    existing_keys[collision_key(t.name)] = t.name
                assert result.topic_id is not None
                taken_ids.add(result.topic_id)
        return ControllerResult(records, results)

    def _create_one(
        self, image: MetadataImage, t: CreatableTopic, usable: Mapping[int, str | None],
        existing_keys: dict[str, str], taken_ids: set[uuid.UUID],
    ) -> CreateTopicResult | tuple[list[Any], CreateTopicResult]:
        def fail(code: ErrorCode, msg: str) -> CreateTopicResult:
            return CreateTopicResult(t.name, code, msg)

        err = topic_name_error(t.name)
        if err is not None:
            return fail(ErrorCode.invalid_topic_exception, err)
        if t.name in image.topics_by_name:
            return fail(ErrorCode.topic_already_exists, f"Topic '{t.name}' already exists.")
        if has_collision_chars(t.name):
            other = existing_keys.get(collision_key(t.name))
            if other is not None and other != t.name:
                return fail(ErrorCode.invalid_topic_exception,
                            f"Topic '{t.name}' collides with existing topic: {other}")
        # configs
        configs: dict[str, str] = {}
        for name, value in t.configs.items():
            if value is None:
                return fail(ErrorCode.invalid_config,
                            f"Null value not supported for topic configs: {name}")
            try:
                cfgmod.validate_topic_configs({name: value})
            except ConfigError as exc:
                return fail(ErrorCode.invalid_config, str(exc))
            configs[name] = value
        # replicas
        if t.assignments:
            if t.num_partitions != -1 or t.replication_factor != -1:
                return fail(ErrorCode.invalid_request,
                            "Both numPartitions or replicationFactor and replicasAssignments "
                            "were set. Both cannot be used at the same time.")
            idx = sorted(t.assignments)
            if idx != list(range(len(idx))):
                return fail(ErrorCode.invalid_replica_assignment,
                            "Partitions should be a consecutive 0-based integer sequence.")
            assignment = [list(t.assignments[i]) for i in idx]
            bad = self._check_manual(image, assignment)
            if bad is not None:
                return fail(ErrorCode.invalid_replica_assignment, bad)
            rf = len(assignment[0])
        else:
            n = t.num_partitions if t.num_partitions != -1 else self.settings.num_partitions
            rf = (t.replication_factor if t.replication_factor != -1
                  else self.settings.default_replication_factor)
            if n <= 0:
                return fail(ErrorCode.invalid_partitions,
                            "Number of partitions was set to an invalid non-positive value.")
            if rf <= 0:
                return fail(ErrorCode.invalid_replication_factor,
                            "Replication factor must be larger than 0, or -1 to use the "
                            "default value.")
            if rf > 32767:
                return fail(ErrorCode.invalid_replication_factor,
                            f"Replication factor {rf} is larger than 32767.")
            try:
                assignment = place_replicas(usable, n, rf, self.rng)
            except PlacementError as exc:
                return fail(ErrorCode.invalid_replication_factor, str(exc))
        topic_id = random_topic_id(self.rng, taken_ids)
        out = [rec.topic_record(t.name, topic_id)]
        alive = self._usable(image)
        for i, replicas in enumerate(assignment):
            isr = [b for b in replicas if alive(b)]
            out.append(rec.partition_record(topic_id, i, replicas, isr,
                                            isr[0] if isr else NO_LEADER))
        for name in sorted(configs):
            out.append(rec.config_record(RESOURCE_TOPIC, t.name, name, configs[name]))
        return out, CreateTopicResult(t.name, ErrorCode.none, None, topic_id, len(assignment),
                                      rf, configs)

    def _check_manual(self, image: MetadataImage, assignment: list[list[int]],
                      replication_factor: int | None = None,
                      first_partition: int = 0) -> str | None:
        """Kafka's checks of a manual assignment (CreateTopics, CreatePartitions): each
        replica list is valid, all have the same size (the existing partitions' when given),
        and each has a broker that is active."""
        usable = self.usable_brokers(image)
        placeable = self._placeable(image)
        rf = replication_factor
        for i, replicas in enumerate(assignment):
            problem = validate_assignment(replicas, placeable, rf)
            if problem is not None:
                return problem
            rf = len(replicas)
            if not any(b in usable for b in replicas):
                return (f"All brokers specified in the manual partition assignment for "
                        f"partition {first_partition + i} are fenced or in controlled shutdown.")
        return None

    @staticmethod
    def _placeable(image: MetadataImage) -> dict[int, bool]:
        return {b: r.has_uncordoned_dirs for b, r in image.brokers.items()}

    # -- DeleteTopics ----------------------------------------------------------------

    def delete_topics(
        self, image: MetadataImage, names: Sequence[str] = (),
        topic_ids: Sequence[uuid.UUID] = (),
    ) -> ControllerResult[list[DeleteTopicResult]]:
        """Delete by name and/or by id; results come in request order (names, then ids)."""
        records: list[Any] = []
        results: list[DeleteTopicResult] = []
        name_counts: dict[str, int] = {}
        for n in names:
            name_counts[n] = name_counts.get(n, 0) + 1
        id_counts: dict[uuid.UUID, int] = {}
        for u in topic_ids:
            id_counts[u] = id_counts.get(u, 0) + 1
        removed: set[uuid.UUID] = set()
        targets: list[tuple[str | None, uuid.UUID | None, bool]] = \
            [(n, None, name_counts[n] > 1) for n in names] + \
            [(None, u, id_counts[u] > 1) for u in topic_ids]
        for name, tid, dup in targets:
            if dup:
                results.append(DeleteTopicResult(name, tid, ErrorCode.invalid_request,
                                                 "Duplicate topic name." if name is not None
                                                 else "Duplicate topic id."))
                continue
            if not self.settings.delete_topic_enable:
                results.append(DeleteTopicResult(name, tid, ErrorCode.topic_deletion_disabled,
                                                 "Topic deletion is disabled."))
                continue
            if name is not None:
                t = image.topic(name)
                if t is None:
                    results.append(DeleteTopicResult(
                        name, None, ErrorCode.unknown_topic_or_partition,
                        "This server does not host this topic-partition."))
                    continue
            else:
                assert tid is not None
                t = image.topic_by_id(tid)
                if t is None:
                    results.append(DeleteTopicResult(None, tid, ErrorCode.unknown_topic_id,
                                                     "This server does not host this topic ID."))
                    continue
            if t.topic_id not in removed:
                records.append(rec.remove_topic_record(t.topic_id))
                removed.add(t.topic_id)
            results.append(DeleteTopicResult(t.name, t.topic_id))
        return ControllerResult(records, results)

    # -- CreatePartitions ------------------------------------------------------------

    def create_partitions(
        self, image: MetadataImage, topics: Sequence[CreatePartitionsTopic],
        validate_only: bool = False,
    ) -> ControllerResult[list[CreatePartitionsResult]]:
        total = 0
        for t in topics:
            existing = image.topic(t.name)
            total += max(0, t.count - (existing.num_partitions if existing else 0))
        if total > MAX_PARTITIONS_PER_REQUEST:
            return ControllerResult([], [CreatePartitionsResult(
                t.name, ErrorCode.policy_violation, _TOO_MANY) for t in topics])
        counts: dict[str, int] = {}
        for t in topics:
            counts[t.name] = counts.get(t.name, 0) + 1
        usable = self.placeable_brokers(image)
        records: list[Any] = []
        results: list[CreatePartitionsResult] = []
        for t in topics:
            def fail(code: ErrorCode, msg: str, name: str = t.name) -> None:
                results.append(CreatePartitionsResult(name, code, msg))

            if counts[t.name] > 1:
                fail(ErrorCode.invalid_request, "Duplicate topic name.")
                continue
            topic = image.topic(t.name)
            if topic is None:
                fail(ErrorCode.unknown_topic_or_partition,
                     "This server does not host this topic-partition.")
                continue
            current = topic.num_partitions
            if t.count < current:
                fail(ErrorCode.invalid_partitions,
                     f"The topic {t.name} currently has {current} partition(s); {t.count} "
                     "would not be an increase.")
                continue
            if t.count == current:
                fail(ErrorCode.invalid_partitions, f"Topic already has {current} partition(s).")
                continue
            add = t.count - current
            existing_rf = len(topic.partitions[0].replicas) if 0 in topic.partitions else 1
            if t.assignments is not None:
                if len(t.assignments) != add:
                    fail(ErrorCode.invalid_replica_assignment,
                         f"Attempted to add {add} additional partition(s), but only "
                         f"{len(t.assignments)} assignment(s) were specified.")
                    continue
                assignment = [list(a) for a in t.assignments]
                bad = self._check_manual(image, assignment, existing_rf, current)
                if bad is not None:
                    fail(ErrorCode.invalid_replica_assignment, bad)
                    continue
            else:
                try:
                    assignment = place_replicas(usable, add, existing_rf, self.rng,
                                                start_partition=current)
                except PlacementError as exc:
                    fail(ErrorCode.invalid_replication_factor, str(exc))
                    continue
            results.append(CreatePartitionsResult(t.name))
            if validate_only:
                continue
            alive = self._usable(image)
            for k, replicas in enumerate(assignment):
                isr = [b for b in replicas if alive(b)]
                records.append(rec.partition_record(topic.topic_id, current + k, replicas, isr,
                                                    isr[0] if isr else NO_LEADER))
        return ControllerResult(records, results)

    # -- AlterPartition (ISR changes from partition leaders) ----------------------------

    def assign_replicas_to_dirs(self, image: MetadataImage, req: AssignReplicasToDirsRequest
                                ) -> ControllerResult[AssignReplicasToDirsReply]:
        """KIP-858 (Kafka's handleAssignReplicasToDirs): record in which log directory a
        broker keeps each replica (a PartitionChange with the directories). A replica placed
        in a directory the broker no longer lists as online loses its ISR, ELR and
        leadership at once, as when the directory is reported offline."""
        reg = image.brokers.get(req.broker_id)
        if reg is None:
            return ControllerResult([], AssignReplicasToDirsReply(
                ErrorCode.broker_id_not_registered))
        if reg.epoch != req.broker_epoch:
            return ControllerResult([], AssignReplicasToDirsReply(ErrorCode.stale_broker_epoch))
        records: list[Any] = []
        results: list[tuple[uuid.UUID, uuid.UUID, int, ErrorCode]] = []
        offline: set[tuple[uuid.UUID, int]] = set()
        changed: dict[tuple[uuid.UUID, int], list[uuid.UUID]] = {}  # one record each
        for directory, topic_id, index in req.assignments:
            t = image.topics_by_id.get(topic_id)
            p = None if t is None else t.partitions.get(index)
            if t is None:
                code = ErrorCode.unknown_topic_id
            elif p is None:
                code = ErrorCode.unknown_topic_or_partition
            elif req.broker_id not in p.replicas:
                code = ErrorCode.not_leader_or_follower
            else:
                code = ErrorCode.none
                if not dir_online(directory, reg.log_dirs):
                    offline.add((topic_id, index))
                dirs = changed.get((topic_id, index))
                if dirs is None:
                    dirs = list(p.directories[:len(p.replicas)])
                    dirs += [UNASSIGNED_DIR] * (len(p.replicas) - len(dirs))
                dirs[p.replicas.index(req.broker_id)] = directory
                current = p.directories or (UNASSIGNED_DIR,) * len(p.replicas)
                if tuple(dirs) != current or (topic_id, index) in changed:
                    changed[(topic_id, index)] = dirs
            results.append((directory, topic_id, index, code))
        for (topic_id, index), dirs in changed.items():
            msg = pb.PartitionChange(topic_id=topic_id.bytes, partition_id=index)
            msg.directories.ids.extend(d.bytes for d in dirs)
            msg.directories.SetInParent()
            records.append(rec.wrap(msg))
        if offline:
            image = apply_records(image, records, image.offset, image.epoch)
            moves = parts.remove_broker(
                image, req.broker_id, self._topic_min_isr(image), self._topic_unclean(image),
                only=lambda tid, i, _p: (tid, i) in offline)
            records.extend(moves)
        return ControllerResult(records, AssignReplicasToDirsReply(results=results))

    def alter_partition(self, image: MetadataImage,
                        req: AlterPartitionRequest) -> ControllerResult[AlterPartitionReply]:
        """A leader's ISR change, checked as Kafka does: the sender's broker epoch, that it
        leads the partition at that leader epoch, the partition epoch (INVALID_UPDATE_VERSION),
        and that every new ISR member is an assigned, unfenced, not shutting-down replica
        with a current broker epoch (INELIGIBLE_REPLICA)."""
        sender = image.brokers.get(req.broker_id)
        if sender is None or sender.epoch != req.broker_epoch:
            return ControllerResult([], AlterPartitionReply(ErrorCode.stale_broker_epoch))
        min_isr = self._topic_min_isr(image)
        records: list[Any] = []
        topics_out: list[tuple[uuid.UUID, list[AlterPartitionItemResult]]] = []
        for topic_id, items in req.topics:
            t = image.topic_by_id(topic_id)
            results: list[AlterPartitionItemResult] = []
            topics_out.append((topic_id, results))
            for item in items:
                idx = item.partition_index
                if t is None:
                    results.append(AlterPartitionItemResult(idx, ErrorCode.unknown_topic_id))
                    continue
                p = t.partitions.get(idx)
                if p is None:
                    results.append(AlterPartitionItemResult(
                        idx, ErrorCode.unknown_topic_or_partition))
                    continue
                error = self._check_alter_partition(image, req.broker_id, p, item)
                if error is not ErrorCode.none:
                    results.append(AlterPartitionItemResult(idx, error))
                    continue
                new_isr = tuple(dict.fromkeys(b for b, _ in item.new_isr))
                elr = parts.target_elr(p, new_isr, min_isr(t.name))
                change = parts.partition_change(t.topic_id, idx, p, p.leader, new_isr, elr,
                                                leader_recovery_state=item.leader_recovery_state)
                epoch = p.partition_epoch
                if change is not None:
                    records.append(change)
                    epoch += 1
                results.append(AlterPartitionItemResult(
                    idx, ErrorCode.none, p.leader, p.leader_epoch, new_isr, epoch,
                    item.leader_recovery_state))
                # The new replicas of a reassignment caught up: finish it in the same batch.
                if change is not None and parts.reassigning(p):
                    after = apply_records(image, [change]).topic_by_id(topic_id)
                    assert after is not None
                    done = parts.maybe_complete_reassignment(
                        topic_id, idx, after.partitions[idx], new_isr,
                        self._usable(image), min_isr(t.name))
                    if done is not None:
                        records.append(done)
        return ControllerResult(records, AlterPartitionReply(ErrorCode.none, topics_out))

    @staticmethod
    def _check_alter_partition(image: MetadataImage, leader: int, p: PartitionRegistration,
                               item: AlterPartitionItem) -> ErrorCode:
        if p.leader != leader:
            return ErrorCode.not_leader_or_follower
        if item.leader_epoch > p.leader_epoch:
            return ErrorCode.unknown_leader_epoch
        if item.leader_epoch < p.leader_epoch:
            return ErrorCode.fenced_leader_epoch
        if item.partition_epoch != p.partition_epoch:
            return ErrorCode.invalid_update_version
        if item.leader_recovery_state not in (LEADER_RECOVERED, LEADER_RECOVERING):
            return ErrorCode.invalid_request
        # A recovered log cannot go back to recovering; a recovering one has no followers.
        if (item.leader_recovery_state == LEADER_RECOVERING
                and p.leader_recovery_state == LEADER_RECOVERED):
            return ErrorCode.invalid_request
        if item.leader_recovery_state == LEADER_RECOVERING and len(item.new_isr) != 1:
            return ErrorCode.invalid_request
        ids = [b for b, _ in item.new_isr]
        if leader not in ids or len(set(ids)) != len(ids):
            return ErrorCode.invalid_request
        for b, epoch in item.new_isr:
            reg = image.brokers.get(b)
            if (b not in p.replicas or reg is None or reg.fenced or reg.in_controlled_shutdown
                    or (epoch != -1 and epoch != reg.epoch)
                    or not dir_online(p.directory_of(b), reg.log_dirs)):  # KIP-858
                return ErrorCode.ineligible_replica
        return ErrorCode.none

    # -- AlterPartitionReassignments / ListPartitionReassignments -------------------------

    def alter_partition_reassignments(
        self, image: MetadataImage,
        reassignments: Sequence[tuple[str, int, Sequence[int] | None]],
    ) -> ControllerResult[list[ReassignmentResult]]:
        """Start (target replicas) or cancel (None) reassignments, per partition (KIP-455).
        New replicas join `replicas` at once so they fetch; the old ones leave when the new
        ones are all in the ISR (see alter_partition)."""
        usable = self._usable(image)
        min_isr = self._topic_min_isr(image)
        records: list[Any] = []
        results: list[ReassignmentResult] = []
        for name, idx, target in reassignments:
            def res(code: ErrorCode = ErrorCode.none, msg: str | None = None,
                    name: str = name, idx: int = idx) -> None:
                results.append(ReassignmentResult(name, idx, code, msg))

            t = image.topic(name)
            p = None if t is None else t.partitions.get(idx)
            if t is None or p is None:
                res(ErrorCode.unknown_topic_or_partition, "The partition does not exist.")
                continue
            if target is None:
                if not parts.reassigning(p):
                    res(ErrorCode.no_reassignment_in_progress,
                        f"No ongoing reassignment for {name}-{idx}.")
                    continue
                original = parts.original_replicas(p)
                isr = tuple(r for r in p.isr if r in original)
                change = parts.change_replicas(t.topic_id, idx, p, original, isr, (), (),
                                               usable, min_isr(name))
            else:
                new = tuple(target)
                problem = validate_assignment(new, self._placeable(image))
                if problem is not None:
                    res(ErrorCode.invalid_replica_assignment, problem)
                    continue
                current = parts.original_replicas(p) if parts.reassigning(p) else p.replicas
                adding = tuple(r for r in new if r not in current)
                removing = tuple(r for r in current if r not in new)
                merged = new + removing
                isr = tuple(r for r in p.isr if r in merged)
                target_isr = tuple(r for r in isr if r in new)
                if not adding and target_isr:
                    # Nothing to copy (a reorder or a pure removal): done at once.
                    change = parts.change_replicas(t.topic_id, idx, p, new, target_isr, (), (),
                                                   usable, min_isr(name))
                else:
                    change = parts.change_replicas(t.topic_id, idx, p, merged, isr, adding,
                                                   removing, usable, min_isr(name))
            if change is not None:
                records.append(change)
            res()
        return ControllerResult(records, results)

    @staticmethod
    def list_partition_reassignments(
        image: MetadataImage, partitions: Sequence[tuple[str, int]] | None = None,
    ) -> list[OngoingReassignment]:
        if partitions is None:
            wanted = [(t.name, i, p) for t, i, p in image.iter_partitions()]
        else:
            wanted = [(n, i, p) for n, i in partitions if (p := image.partition(n, i)) is not None]
        return [OngoingReassignment(n, i, p.replicas, p.adding_replicas, p.removing_replicas)
                for n, i, p in wanted if parts.reassigning(p)]

    # -- ElectLeaders and auto leader rebalance -------------------------------------------

    def elect_leaders(
        self, image: MetadataImage, election_type: ElectionType,
        partitions: Sequence[tuple[str, int]] | None = None,
    ) -> ControllerResult[list[ElectLeadersResult]]:
        """Preferred or unclean elections for the given partitions (None: all partitions,
        and then, as Kafka's controller answers, without the partitions whose election was
        not needed)."""
        every = partitions is None
        if partitions is None:
            partitions = [(t.name, i) for t, i, _ in image.iter_partitions()]

        def usable(b: int) -> bool:
            reg = image.brokers.get(b)
            return reg is not None and not reg.fenced and not reg.in_controlled_shutdown

        records: list[Any] = []
        results: list[ElectLeadersResult] = []
        for name, idx in partitions:
            t = image.topic(name)
            p = None if t is None else t.partitions.get(idx)
            # Kafka 4.4's words (ReplicationControlManager.electLeader); its other refusals
            # carry no message, the client then shows the error's own
            if t is None or p is None:
                results.append(ElectLeadersResult(
                    name, idx, ErrorCode.unknown_topic_or_partition,
                    f"No such topic as {name}" if t is None
                    else f"No such partition as {name}-{idx}"))
                continue
            if election_type is ElectionType.PREFERRED:
                pref = p.preferred_leader
                if p.leader == pref:
                    results.append(ElectLeadersResult(name, idx, ErrorCode.election_not_needed))
                    continue
                if pref not in p.isr or not usable(pref):
                    results.append(ElectLeadersResult(
                        name, idx, ErrorCode.preferred_leader_not_available))
                    continue
                change = parts.partition_change(t.topic_id, idx, p, pref, p.isr, p.elr)
            else:
                if p.leader != NO_LEADER and usable(p.leader):
                    results.append(ElectLeadersResult(name, idx, ErrorCode.election_not_needed))
                    continue
                leader, isr, elr, unclean = parts.elect_leader(p, p.isr, p.elr, usable,
                                                               unclean=True)
                if leader == NO_LEADER:
                    results.append(ElectLeadersResult(
                        name, idx, ErrorCode.eligible_leaders_not_available))
                    continue
                change = parts.partition_change(
                    t.topic_id, idx, p, leader, isr, elr,
                    leader_recovery_state=LEADER_RECOVERING if unclean else None)
            if change is not None:
                records.append(change)
            results.append(ElectLeadersResult(name, idx))
        if every:
            results = [r for r in results if r.error is not ErrorCode.election_not_needed]
        return ControllerResult(records, results)

    def rebalance_leaders(self, image: MetadataImage, imbalance_percentage: int = 10) -> list[Any]:
        """auto.leader.rebalance.enable: preferred elections on every broker whose share of
        partitions not led by their preferred replica exceeds the percentage."""
        total: dict[int, int] = {}
        off: dict[int, list[tuple[str, int]]] = {}
        for t, i, p in image.iter_partitions():
            pref = p.preferred_leader
            total[pref] = total.get(pref, 0) + 1
            if p.leader != pref:
                off.setdefault(pref, []).append((t.name, i))
        wanted = [tp for b, tps in sorted(off.items())
                  if len(tps) * 100 > imbalance_percentage * total[b] for tp in tps]
        if not wanted:
            return []
        return self.elect_leaders(image, ElectionType.PREFERRED, wanted).records
