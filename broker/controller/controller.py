"""The pure controller: requests + the current image + now_ms -> records and results.

Nothing here does IO, reads a clock or uses global randomness. The caller (the
controller driver on the Raft leader) owns:
  * the image: pass the latest image *including records this controller returned
    that are not yet committed* (apply each returned batch to a working image at
    once), so consecutive requests see each other's effects. After losing and
    regaining leadership, rebuild the working image from committed records.
  * atomicity: append each ControllerResult's records as one batch, and send its
    response only once that batch is committed. validate_only results carry no records.
  * time: `now_ms` is an argument; call `tick(image, now_ms)` about every
    broker.heartbeat.interval.ms to fence brokers whose session expired.

Broker liveness is a state machine (KIP-631), all transitions here:

  (none)      --register-->                   FENCED        RegisterBroker(fenced)
  FENCED      --heartbeat, caught up-->       UNFENCED      UnfenceBroker (+ elections)
  FENCED      --heartbeat want_shut_down-->   FENCED, should_shut_down = true
  UNFENCED    --heartbeat want_fence-->       FENCED        FenceBroker (+ ISR/leader moves)
  UNFENCED    --heartbeat want_shut_down-->   CONTROLLED_SHUTDOWN
                                              BrokerRegistrationChange(in_controlled_shutdown)
                                              (+ ISR/leader moves)
  CONTROLLED_SHUTDOWN --heartbeat, leads nothing, caught up--> should_shut_down = true
  UNFENCED or CONTROLLED_SHUTDOWN --no heartbeat for broker.session.timeout.ms (tick)-->
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
image; a new active controller starts every unfenced broker's session at its first
tick. A broker process that dies closes its connections at once, while a broker that
is alive but whose connection dropped heartbeats again on a new one within an interval:
the second session rule above fences the first kind long before its session expires
(Skiff's; Kafka waits for the session). A session ends when its broker is fenced;
while a session is alive (the broker heartbeats, fenced or not) another incarnation of
that broker id is refused with DUPLICATE_BROKER_REGISTRATION, as in Kafka.
"""

from __future__ import annotations

import base64
import random
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from broker import config as cfgmod
from broker.config import ConfigError, NodeConfig
from broker.controller import partitions as parts
from broker.controller.placement import PlacementError, place_replicas, validate_assignment
from broker.controller.requests import (
    AllocateProducerIdsReply,
    AlterConfigOp,
    AlterConfigsResource,
    AlterConfigsResult,
    AlterPartitionItem,
    AlterPartitionItemResult,
    AlterPartitionReply,
    AlterPartitionRequest,
    BrokerHeartbeatReply,
    BrokerHeartbeatRequest,
    BrokerRegistrationReply,
    BrokerRegistrationRequest,
    ConfigResource,
    ControllerResult,
    CreatableTopic,
    CreatePartitionsResult,
    CreatePartitionsTopic,
    CreateTopicResult,
    DeleteTopicResult,
    ElectionType,
    ElectLeadersResult,
    IncrementalAlterConfigsResource,
    OngoingReassignment,
    ReassignmentResult,
)
from broker.controller.validation import collision_key, has_collision_chars, topic_name_error
from broker.metadata import records as rec
from broker.metadata.delta import apply_records
from broker.metadata.image import (
    LEADER_RECOVERED,
    LEADER_RECOVERING,
    MetadataImage,
    PartitionRegistration,
)
from broker.metadata.records import NO_LEADER, RESOURCE_BROKER, RESOURCE_TOPIC, pb

PRODUCER_ID_BLOCK_SIZE = 1000
# Kafka bounds what one user request may write (QuorumController.MAX_PARTITIONS_PER_BATCH):
# a CreateTopics or CreatePartitions asking for more new partitions fails as a whole.
MAX_PARTITIONS_PER_REQUEST = 10_000
_TOO_MANY = "Excessively large number of partitions per request."
METADATA_VERSION_FEATURE = "metadata.version"

# Broker keys that AlterConfigs may set dynamically (cluster default or per broker):
# the broker-level fallbacks of topic configs, as Kafka's DynamicLogConfig allows.
DYNAMIC_BROKER_KEYS = frozenset(
    k for d in cfgmod.TOPIC_CONFIGS.values() for k in d.synonyms
) | {"log.cleaner.threads", "num.io.threads", "num.network.threads", "num.replica.fetchers",
     "max.connections", "max.connections.per.ip", "log.retention.check.interval.ms"}


@dataclass(frozen=True)
class ControllerSettings:
    cluster_id: str = ""
    num_partitions: int = 1
    default_replication_factor: int = 1
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    delete_topic_enable: bool = True
    broker_session_timeout_ms: int = 9000
    # Skiff's: -1 waits for the session timeout after a disconnect, as Kafka does.
    broker_session_disconnect_timeout_ms: int = -1
    node_config: NodeConfig | None = None  # for broker-level fallbacks in validation

    @staticmethod
    def from_config(cfg: NodeConfig, cluster_id: str) -> ControllerSettings:
        return ControllerSettings(
            cluster_id=cluster_id,
            num_partitions=cfg["num.partitions"],
            default_replication_factor=cfg["default.replication.factor"],
            min_insync_replicas=cfg["min.insync.replicas"],
            unclean_leader_election_enable=cfg["unclean.leader.election.enable"],
            delete_topic_enable=cfg["delete.topic.enable"],
            broker_session_timeout_ms=cfg["broker.session.timeout.ms"],
            broker_session_disconnect_timeout_ms=cfgmod.session_disconnect_timeout_ms(cfg),
            node_config=cfg,
        )


@dataclass
class _BrokerSession:
    last_seen_ms: int
    metadata_offset: int = -1
    register_offset: int = 0   # the broker is caught up once it has applied this offset
    disconnected_ms: int | None = None  # when its latest heartbeat's connection closed


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


@dataclass
class Controller:
    settings: ControllerSettings
    # Required: the shell seeds it (random.Random(os.urandom(16)) in production, a fixed
    # seed in tests); a default would give every controller the same topic ids.
    rng: random.Random
    _sessions: dict[int, _BrokerSession] = field(default_factory=dict)

    # -- helpers ------------------------------------------------------------------

    def _topic_min_isr(self, image: MetadataImage) -> Callable[[str], int]:
        def get(topic: str) -> int:
            v = image.topic_config(topic).get("min.insync.replicas")
            if v is None:
                v = image.broker_config().get("min.insync.replicas")
            try:
                return int(v) if v is not None else self.settings.min_insync_replicas
            except ValueError:
                return self.settings.min_insync_replicas
        return get

    def _topic_unclean(self, image: MetadataImage) -> Callable[[str], bool]:
        def get(topic: str) -> bool:
            v = image.topic_config(topic).get("unclean.leader.election.enable")
            if v is None:
                v = image.broker_config().get("unclean.leader.election.enable")
            if v is None:
                return self.settings.unclean_leader_election_enable
            return v.strip().lower() == "true"
        return get

    @staticmethod
    def usable_brokers(image: MetadataImage) -> dict[int, str | None]:
        """Brokers that may receive new replicas: registered, unfenced, not shutting down."""
        return {b: r.rack for b, r in image.brokers.items()
                if not r.fenced and not r.in_controlled_shutdown}

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
        usable = self.usable_brokers(image)
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
        for i, replicas in enumerate(assignment):
            isr = [b for b in replicas if b in usable]
            out.append(rec.partition_record(topic_id, i, replicas, isr,
                                            isr[0] if isr else NO_LEADER))
        for name in sorted(configs):
            out.append(rec.config_record(RESOURCE_TOPIC, t.name, name, configs[name]))
        return out, CreateTopicResult(t.name, ErrorCode.none, None, topic_id, len(assignment),
                                      rf, configs)

    def _check_manual(self, image: MetadataImage, assignment: list[list[int]]) -> str | None:
        usable = self.usable_brokers(image)
        rf = len(assignment[0]) if assignment else 0
        for i, replicas in enumerate(assignment):
            problem = validate_assignment(replicas)
            if problem is not None:
                return f"{problem} (partition {i})"
            if len(replicas) != rf:
                return ("All partitions in the manual partition assignment must have the same "
                        "number of replicas.")
            for b in replicas:
                if b not in image.brokers:
                    return (f"The manual partition assignment includes broker {b}, but no such "
                            "broker is registered.")
            if not any(b in usable for b in replicas):
                return (f"All brokers specified in the manual partition assignment for "
                        f"partition {i} are fenced or in controlled shutdown.")
        return None

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
        usable = self.usable_brokers(image)
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
                     f"Topic currently has {current} partitions, which is higher than the "
                     f"requested {t.count}.")
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
                bad = self._check_manual(image, assignment)
                if bad is None and assignment and len(assignment[0]) != existing_rf:
                    bad = (f"The manual partition assignment includes a partition with "
                           f"{len(assignment[0])} replica(s), but this is not consistent with "
                           f"previous partitions, which have {existing_rf} replica(s).")
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
            for k, replicas in enumerate(assignment):
                isr = [b for b in replicas if b in usable]
                records.append(rec.partition_record(topic.topic_id, current + k, replicas, isr,
                                                    isr[0] if isr else NO_LEADER))
        return ControllerResult(records, results)

    # -- AlterConfigs / IncrementalAlterConfigs --------------------------------------

    def _check_resource(self, image: MetadataImage,
                        r: ConfigResource) -> tuple[ErrorCode, str] | None:
        if r.resource_type == RESOURCE_TOPIC:
            if topic_name_error(r.resource_name) is not None:
                return ErrorCode.invalid_topic_exception, topic_name_error(r.resource_name) or ""
            if r.resource_name not in image.topics_by_name:
                return (ErrorCode.unknown_topic_or_partition,
                        f"The topic '{r.resource_name}' does not exist.")
            return None
        if r.resource_type == RESOURCE_BROKER:
            if r.resource_name == "":
                return None
            try:
                int(r.resource_name)
            except ValueError:
                return (ErrorCode.invalid_request,
                        f"Invalid broker name {r.resource_name!r}: must be a broker id or empty")
            return None
        return ErrorCode.invalid_request, f"Unsupported resource type {r.resource_type}"

    def _check_value(self, r: ConfigResource, name: str, value: str | None) -> str | None:
        """Why (name, value) cannot be set on the resource, or None."""
        try:
            if r.resource_type == RESOURCE_TOPIC:
                cfgmod.validate_topic_configs({name: value})
                return None
            d = cfgmod.BROKER_CONFIGS.get(name)
            if d is None:
                return f"Unknown broker config name: {name}"
            if name not in DYNAMIC_BROKER_KEYS:
                return f"Cannot update these configs dynamically: {name}"
            if value is not None:
                d.parse(value)
        except ConfigError as exc:
            return str(exc)
        return None

    def _diff(self, r: ConfigResource, old: Mapping[str, str],
              new: Mapping[str, str]) -> list[Any]:
        out = []
        for k in sorted(set(old) | set(new)):
            if k in new and old.get(k) != new[k]:
                out.append(rec.config_record(r.resource_type, r.resource_name, k, new[k]))
            elif k not in new:
                out.append(rec.config_record(r.resource_type, r.resource_name, k, None))
        return out

    def alter_configs(
        self, image: MetadataImage, resources: Sequence[AlterConfigsResource],
        validate_only: bool = False,
    ) -> ControllerResult[list[AlterConfigsResult]]:
        """Legacy AlterConfigs: each resource's dynamic configs become exactly the given set."""
        counts: dict[ConfigResource, int] = {}
        for res in resources:
            counts[res.resource] = counts.get(res.resource, 0) + 1
        records: list[Any] = []
        results: list[AlterConfigsResult] = []
        for res in resources:
            r = res.resource
            if counts[r] > 1:
                results.append(AlterConfigsResult(r, ErrorCode.invalid_request,
                                                  "Duplicate resource."))
                continue
            bad = self._check_resource(image, r)
            if bad is not None:
                results.append(AlterConfigsResult(r, *bad))
                continue
            new: dict[str, str] = {}
            problem = None
            for name, value in res.configs.items():
                if value is None:
                    problem = f"Null value not supported for : {name}"
                    break
                problem = self._check_value(r, name, value)
                if problem is not None:
                    break
                new[name] = value
            if problem is not None:
                results.append(AlterConfigsResult(r, ErrorCode.invalid_config, problem))
                continue
            old = image.configs.get((r.resource_type, r.resource_name), {})
            results.append(AlterConfigsResult(r))
            if not validate_only:
                records.extend(self._diff(r, old, new))
        return ControllerResult(records, results)

    def incremental_alter_configs(
        self, image: MetadataImage, resources: Sequence[IncrementalAlterConfigsResource],
        validate_only: bool = False,
    ) -> ControllerResult[list[AlterConfigsResult]]:
        counts: dict[ConfigResource, int] = {}
        for res in resources:
            counts[res.resource] = counts.get(res.resource, 0) + 1
        records: list[Any] = []
        results: list[AlterConfigsResult] = []
        for res in resources:
            r = res.resource
            if counts[r] > 1:
                results.append(AlterConfigsResult(r, ErrorCode.invalid_request,
                                                  "Duplicate resource."))
                continue
            bad = self._check_resource(image, r)
            if bad is not None:
                results.append(AlterConfigsResult(r, *bad))
                continue
            old = dict(image.configs.get((r.resource_type, r.resource_name), {}))
            new = dict(old)
            seen: set[str] = set()
            problem: tuple[ErrorCode, str] | None = None
            for name, op, value in res.ops:
                if name in seen:
                    problem = (ErrorCode.invalid_request, f"Duplicate config key: {name}")
                    break
                seen.add(name)
                try:
                    op = AlterConfigOp(op)
                except ValueError:
                    problem = (ErrorCode.invalid_request, f"Unknown alter config operation {op}")
                    break
                msg = self._check_value(r, name, value if op is not AlterConfigOp.DELETE
                                        else None)
                if msg is not None:
                    problem = (ErrorCode.invalid_config, msg)
                    break
                if op is AlterConfigOp.SET:
                    if value is None:
                        problem = (ErrorCode.invalid_config,
                                   f"Null value not supported for : {name}")
                        break
                    new[name] = value
                elif op is AlterConfigOp.DELETE:
                    new.pop(name, None)
                else:
                    ctype = self._config_type(r, name)
                    if ctype is not cfgmod.ConfigType.LIST:
                        problem = (ErrorCode.invalid_config,
                                   f"Config value append is not allowed for config key: {name}"
                                   if op is AlterConfigOp.APPEND else
                                   f"Config value subtract is not allowed for config key: {name}")
                        break
                    current = self._current_list(r, name, new)
                    items = [x.strip() for x in (value or "").split(",") if x.strip()]
                    if op is AlterConfigOp.APPEND:
                        merged = current + [x for x in items if x not in current]
                    else:
                        merged = [x for x in current if x not in items]
                    joined = ",".join(merged)
                    msg = self._check_value(r, name, joined)
                    if msg is not None:
                        problem = (ErrorCode.invalid_config, msg)
                        break
                    new[name] = joined
            if problem is not None:
                results.append(AlterConfigsResult(r, *problem))
                continue
            results.append(AlterConfigsResult(r))
            if not validate_only:
                records.extend(self._diff(r, old, new))
        return ControllerResult(records, results)

    @staticmethod
    def _config_type(r: ConfigResource, name: str) -> cfgmod.ConfigType | None:
        if r.resource_type == RESOURCE_TOPIC:
            td = cfgmod.TOPIC_CONFIGS.get(name)
            return None if td is None else td.type
        bd = cfgmod.BROKER_CONFIGS.get(name)
        return None if bd is None else bd.type

    def _current_list(self, r: ConfigResource, name: str, new: Mapping[str, str]) -> list[str]:
        """The list value APPEND/SUBTRACT start from: the dynamic value, else the default."""
        if name in new:
            return [x.strip() for x in new[name].split(",") if x.strip()]
        if r.resource_type == RESOURCE_TOPIC:
            td = cfgmod.TOPIC_CONFIGS[name]
            nc = self.settings.node_config
            if nc is not None:
                v = cfgmod.effective_topic_configs(nc, {}).get(name)
            else:
                syn = cfgmod.BROKER_CONFIGS.get(td.synonyms[0]) if td.synonyms else None
                v = syn.default if syn is not None else td.default
            return list(v or [])
        bd = cfgmod.BROKER_CONFIGS[name]
        return list(bd.default or [])

    # -- broker registration and heartbeats -------------------------------------------

    def register_broker(self, image: MetadataImage, req: BrokerRegistrationRequest,
                        now_ms: int) -> ControllerResult[BrokerRegistrationReply]:
        if self.settings.cluster_id and req.cluster_id != self.settings.cluster_id:
            return ControllerResult([], BrokerRegistrationReply(
                ErrorCode.inconsistent_cluster_id,
                f"Expected cluster ID {self.settings.cluster_id}, but got {req.cluster_id}"))
        if req.broker_id < 0:
            return ControllerResult([], BrokerRegistrationReply(
                ErrorCode.invalid_registration, f"Invalid broker id {req.broker_id}"))
        existing = image.brokers.get(req.broker_id)
        session = self._sessions.get(req.broker_id)
        if (existing is not None and existing.incarnation_id != req.incarnation_id
                and session is not None and not self._heartbeats_lapsed(session, now_ms)):
            return ControllerResult([], BrokerRegistrationReply(
                ErrorCode.duplicate_broker_registration,
                f"Another broker is registered with that broker id ({req.broker_id})."))
        # A feature the broker declares must include the finalized level; one it does not
        # declare is taken as supported (Skiff brokers of one version all share it).
        for name, lo, hi in req.features:
            level = image.features.get(name)
            if level is not None and not lo <= level <= hi:
                return ControllerResult([], BrokerRegistrationReply(
                    ErrorCode.unsupported_version,
                    f"Unable to register because the broker does not support finalized "
                    f"version {level} of {name}. The broker wants a version between {lo} and "
                    f"{hi}, inclusive."))
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
        if s is None:  # registered under a previous controller
            s = _BrokerSession(last_seen_ms=now_ms, register_offset=0)
            self._sessions[req.broker_id] = s
        s.last_seen_ms = now_ms
        s.disconnected_ms = None
        s.metadata_offset = req.current_metadata_offset
        caught_up = req.current_metadata_offset >= s.register_offset
        records: list[Any] = []
        min_isr, unclean = self._topic_min_isr(image), self._topic_unclean(image)
        if reg.fenced:
            if req.want_shut_down:
                return ControllerResult([], BrokerHeartbeatReply(
                    is_caught_up=caught_up, is_fenced=True, should_shut_down=True))
            if req.want_fence or not caught_up:
                return ControllerResult([], BrokerHeartbeatReply(
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
            done = (not self._has_duties(image, req.broker_id)
                    and req.current_metadata_offset >= image.offset)
            return ControllerResult([], BrokerHeartbeatReply(
                is_caught_up=caught_up, is_fenced=False, should_shut_down=done))
        return ControllerResult([], BrokerHeartbeatReply(is_caught_up=caught_up,
                                                         is_fenced=False))

    @staticmethod
    def _has_duties(image: MetadataImage, broker_id: int) -> bool:
        if image.leaderships.get(broker_id):
            return True
        return any(broker_id in p.isr for _, _, p in image.iter_partitions())

    def broker_disconnected(self, broker_id: int, now_ms: int) -> None:
        """The connection that carried `broker_id`'s latest heartbeat closed: unless it
        heartbeats again, tick fences it after broker.session.disconnect.timeout.ms."""
        s = self._sessions.get(broker_id)
        if s is not None and s.disconnected_ms is None:
            s.disconnected_ms = now_ms

    def _heartbeats_lapsed(self, s: _BrokerSession, now_ms: int) -> bool:
        """No heartbeat for broker.session.timeout.ms (Kafka's session rule)."""
        return now_ms - s.last_seen_ms >= self.settings.broker_session_timeout_ms

    def _session_expired(self, s: _BrokerSession, now_ms: int) -> bool:
        """The session rule, or a closed heartbeat connection past its timeout."""
        if self._heartbeats_lapsed(s, now_ms):
            return True
        grace = self.settings.broker_session_disconnect_timeout_ms
        return grace >= 0 and s.disconnected_ms is not None and now_ms - s.disconnected_ms >= grace

    def tick(self, image: MetadataImage, now_ms: int) -> list[Any]:
        """Fence brokers whose session expired; returns the records to append (one batch)."""
        records: list[Any] = []
        for bid in sorted(image.brokers):
            reg = image.brokers[bid]
            s = self._sessions.get(bid)
            if s is None:
                if not reg.fenced:
                    self._sessions[bid] = _BrokerSession(last_seen_ms=now_ms)
                continue
            if reg.fenced or not self._session_expired(s, now_ms):
                continue
            # Later brokers in this tick must see this one as fenced: apply as we go.
            changes = parts.remove_broker(image, bid, self._topic_min_isr(image),
                                          self._topic_unclean(image))
            fence = rec.wrap(pb.FenceBroker(broker_id=bid, broker_epoch=reg.epoch))
            records.extend(changes)
            records.append(fence)
            del self._sessions[bid]  # a fenced broker's session is over
            image = apply_records(image, [*changes, fence], image.offset, image.epoch)
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

    # -- AlterPartition (ISR changes from partition leaders) ----------------------------

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
                    or (epoch != -1 and epoch != reg.epoch)):
                return ErrorCode.ineligible_replica
        return ErrorCode.none

    # -- AlterPartitionReassignments / ListPartitionReassignments -------------------------

    @staticmethod
    def _usable(image: MetadataImage) -> Callable[[int], bool]:
        def usable(b: int) -> bool:
            reg = image.brokers.get(b)
            return reg is not None and not reg.fenced and not reg.in_controlled_shutdown
        return usable

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
                problem = validate_assignment(new)
                if problem is None:
                    missing = [b for b in new if b not in image.brokers]
                    if missing:
                        problem = (f"The manual partition assignment includes broker "
                                   f"{missing[0]}, but no such broker is registered.")
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
        """Preferred or unclean elections for the given partitions (None: all partitions)."""
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
            if t is None or p is None:
                results.append(ElectLeadersResult(
                    name, idx, ErrorCode.unknown_topic_or_partition,
                    "The partition does not exist."))
                continue
            if election_type is ElectionType.PREFERRED:
                pref = p.preferred_leader
                if p.leader == pref:
                    results.append(ElectLeadersResult(name, idx, ErrorCode.election_not_needed,
                                                      "Leader is already the preferred replica."))
                    continue
                if pref not in p.isr or not usable(pref):
                    results.append(ElectLeadersResult(
                        name, idx, ErrorCode.preferred_leader_not_available,
                        f"Failed to elect leader for partition {name}-{idx} under strategy "
                        "PreferredReplicaPartitionLeaderElectionStrategy"))
                    continue
                change = parts.partition_change(t.topic_id, idx, p, pref, p.isr, p.elr)
            else:
                if p.leader != NO_LEADER and usable(p.leader):
                    results.append(ElectLeadersResult(name, idx, ErrorCode.election_not_needed,
                                                      "The partition has a leader."))
                    continue
                leader, isr, elr, unclean = parts.elect_leader(p, p.isr, p.elr, usable,
                                                               unclean=True)
                if leader == NO_LEADER:
                    results.append(ElectLeadersResult(
                        name, idx, ErrorCode.eligible_leaders_not_available,
                        "No live replica can become leader."))
                    continue
                change = parts.partition_change(
                    t.topic_id, idx, p, leader, isr, elr,
                    leader_recovery_state=LEADER_RECOVERING if unclean else None)
            if change is not None:
                records.append(change)
            results.append(ElectLeadersResult(name, idx))
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

    # -- producer ids ------------------------------------------------------------------

    def allocate_producer_ids(self, image: MetadataImage, broker_id: int,
                              broker_epoch: int) -> ControllerResult[AllocateProducerIdsReply]:
        reg = image.brokers.get(broker_id)
        if reg is None:
            return ControllerResult(
                [], AllocateProducerIdsReply(ErrorCode.broker_id_not_registered))
        if reg.epoch != broker_epoch:
            return ControllerResult([], AllocateProducerIdsReply(ErrorCode.stale_broker_epoch))
        start = image.next_producer_id
        if start > 2**63 - 1 - PRODUCER_ID_BLOCK_SIZE:
            return ControllerResult([], AllocateProducerIdsReply(ErrorCode.unknown_server_error))
        return ControllerResult(
            [rec.producer_ids_record(broker_id, broker_epoch, start + PRODUCER_ID_BLOCK_SIZE)],
            AllocateProducerIdsReply(producer_id_start=start,
                                     producer_id_len=PRODUCER_ID_BLOCK_SIZE))

    # -- bootstrap ---------------------------------------------------------------------

    @staticmethod
    def bootstrap_records(image: MetadataImage, bootstrap: Iterable[Any]) -> list[Any]:
        """Records to write when the first active controller starts: the bootstrap records
        (feature levels from `skiff storage format`), unless the log already carries
        finalized features. Offsets are no guide: Raft's LeaderChange control record
        comes first, so the image of a fresh log is already at offset 0."""
        if image.features:
            return []
        return list(bootstrap)
