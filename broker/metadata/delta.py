"""MetadataDelta: replays committed records on top of an image and yields the next image.

Record types and their effect (one place, as the state machine's transition list):

  register_broker            add or replace the registration of broker_id (new epoch)
  unregister_broker          drop the registration if the epoch matches
  fence_broker               fenced = True             (epoch must match)
  unfence_broker             fenced = False            (epoch must match)
  broker_registration_change set fenced / in_controlled_shutdown when present
  topic                      add a topic (name and id must be new)
  partition                  set a partition of an existing topic
  partition_change           merge the present fields (incl. leader_recovery_state) into
                             an existing partition;
                             partition_epoch += 1; leader_epoch += 1 iff `leader` is present
                             (the controller sets it, possibly to the same broker, to bump it)
  remove_topic               drop the topic, its partitions and its topic configs
  config                     set a key, or delete it when value is absent
  producer_ids               next_producer_id = the record's value (must not go back)
  feature_level              set a finalized feature level; 0 removes it
  register_controller        add or replace a controller's registration (KIP-919)
  user_scram_credential      set (mechanism, user)'s SCRAM credential
  remove_user_scram_credential  drop it
  access_control_entry       add an ACL under its id (an id already present is a corrupt log)
  remove_access_control_entry  drop the ACL with that id (absent: corrupt log)
  client_quota               set an entity's quota key, or drop it (remove); an entity left
                             with no keys is dropped
  delegation_token           add or replace a delegation token (created, renewed, expired
                             to a later time)
  remove_delegation_token    drop it (absent: nothing, as Kafka's cache does)
  no_op                      nothing

A record that does not fit the image raises InvalidRecordError: the log is
corrupt or the controller has a bug, and applying it anyway would diverge.

The delta also says what changed (partitions, created and deleted topics,
brokers, configs) so the replica manager reacts to deltas, not full scans.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from broker.metadata.image import (
    UNASSIGNED_DIR,
    BrokerRegistration,
    ControllerRegistration,
    Endpoint,
    MetadataImage,
    PartitionRegistration,
    TopicImage,
)
from broker.metadata.records import (
    RESOURCE_TOPIC,
    SCRAM_MECHANISM_NAMES,
    InvalidRecordError,
    client_quota_entity,
    uuid_from_bytes,
)
from broker.quotas.core import QuotaEntity, validate_entity
from broker.security.authorizer import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from broker.security.delegation_token import TokenInformation
from broker.security.scram import ScramCredential

# Small int tuples recur (every partition on the same 3 brokers); share them.
_TUPLES: dict[tuple[int, ...], tuple[int, ...]] = {}


def _ids(values: Iterable[int]) -> tuple[int, ...]:
    t = tuple(values)
    if not t:
        return ()
    if len(_TUPLES) > 100_000:
        _TUPLES.clear()
    return _TUPLES.setdefault(t, t)


@dataclass(frozen=True, slots=True)
class LocalPartition:
    topic: str
    topic_id: uuid.UUID
    partition: int
    registration: PartitionRegistration


@dataclass(slots=True)
class LocalReplicaChanges:
    deletes: list[LocalPartition] = field(default_factory=list)
    leaders: list[LocalPartition] = field(default_factory=list)
    followers: list[LocalPartition] = field(default_factory=list)


class MetadataDelta:
    def __init__(self, image: MetadataImage) -> None:
        self.base = image
        self._offset = image.offset
        self._epoch = image.epoch
        self._cluster_id = image.cluster_id
        self._controller_id = image.controller_id
        self._brokers: dict[int, BrokerRegistration] | None = None
        self._topics_by_id: dict[uuid.UUID, TopicImage] | None = None
        self._topics_by_name: dict[str, TopicImage] | None = None
        # topic id -> its partition map, copied on first write in this delta
        self._partitions: dict[uuid.UUID, dict[int, PartitionRegistration]] = {}
        self._configs: dict[tuple[int, str], dict[str, str]] | None = None
        self._copied_configs: set[tuple[int, str]] = set()
        self._features: dict[str, int] | None = None
        self._controllers: dict[int, ControllerRegistration] | None = None
        self._scram: dict[tuple[str, str], ScramCredential] | None = None
        self._acls: dict[uuid.UUID, AclBinding] | None = None
        self._quotas: dict[QuotaEntity, dict[str, float]] | None = None
        self._tokens: dict[str, TokenInformation] | None = None
        self.changed_client_quotas = False
        self._next_producer_id = image.next_producer_id
        self._last_broker_epoch = image.last_broker_epoch
        # what changed, for listeners
        self.changed_partitions: dict[tuple[uuid.UUID, int], PartitionRegistration] = {}
        self.created_topics: set[uuid.UUID] = set()
        self.deleted_topics: dict[uuid.UUID, TopicImage] = {}
        self.changed_brokers: set[int] = set()
        self.changed_configs: set[tuple[int, str]] = set()
        self.record_count = 0
        self._applied = False

    # -- public --------------------------------------------------------------

    def set_cluster_id(self, cluster_id: str) -> None:
        self._cluster_id = cluster_id

    def set_controller_id(self, controller_id: int) -> None:
        self._controller_id = controller_id

    def replay(self, record: Any, offset: int | None = None, epoch: int | None = None) -> None:
        """Apply one MetadataRecord envelope committed at (offset, epoch)."""
        if self._applied:
            raise RuntimeError("a MetadataDelta is applied once; start a new one from the image")
        name = record.WhichOneof("record")
        if name is None:
            raise InvalidRecordError("empty MetadataRecord")
        handler = _HANDLERS.get(name)
        if handler is None:  # pragma: no cover - every oneof field has a handler
            raise InvalidRecordError(f"no handler for record type {name}")
        handler(self, getattr(record, name))
        self.record_count += 1
        if offset is not None:
            self._offset = offset
        if epoch is not None:
            self._epoch = epoch

    def replay_all(self, records: Iterable[Any], offset: int | None = None,
                   epoch: int | None = None) -> None:
        """Apply a batch of records; (offset, epoch) is where the last one sits."""
        for r in records:
            self.replay(r)
        if offset is not None:
            self._offset = offset
        if epoch is not None:
            self._epoch = epoch

    def apply(self) -> MetadataImage:
        """The new image. The delta's maps now belong to it: apply a delta once."""
        self._applied = True
        b = self.base
        topics_by_id: dict[uuid.UUID, TopicImage] | Any = b.topics_by_id
        topics_by_name: dict[str, TopicImage] | Any = b.topics_by_name
        if self._topics_by_id is not None or self._partitions:
            topics_by_id = dict(self._topics_by_id if self._topics_by_id is not None
                                else b.topics_by_id)
            topics_by_name = dict(self._topics_by_name if self._topics_by_name is not None
                                  else b.topics_by_name)
            for tid, parts in self._partitions.items():
                t = topics_by_id.get(tid)
                if t is None:
                    continue  # deleted in this delta after being changed
                nt = TopicImage(t.name, t.topic_id, parts)
                topics_by_id[tid] = nt
                topics_by_name[t.name] = nt
        configs: Any = b.configs
        if self._configs is not None:
            configs = {k: v for k, v in self._configs.items() if v}
        return MetadataImage(
            cluster_id=self._cluster_id,
            offset=self._offset,
            epoch=self._epoch,
            controller_id=self._controller_id,
            brokers=self._brokers if self._brokers is not None else b.brokers,
            topics_by_id=topics_by_id,
            topics_by_name=topics_by_name,
            configs=configs,
            features=self._features if self._features is not None else b.features,
            next_producer_id=self._next_producer_id,
            last_broker_epoch=self._last_broker_epoch,
            scram_credentials=self._scram if self._scram is not None else b.scram_credentials,
            acls=self._acls if self._acls is not None else b.acls,
            client_quotas=({e: v for e, v in self._quotas.items() if v}
                           if self._quotas is not None else b.client_quotas),
            controllers=self._controllers if self._controllers is not None else b.controllers,
            delegation_tokens=(self._tokens if self._tokens is not None
                               else b.delegation_tokens),
        )

    def local_changes(self, broker_id: int) -> LocalReplicaChanges:
        """What this delta means for the replicas on one broker (Kafka's
        TopicsDelta.localChanges): partitions to delete, to lead, to follow."""
        out = LocalReplicaChanges()
        for tid, gone in self.deleted_topics.items():
            for i, p in gone.partitions.items():
                if broker_id in p.replicas:
                    out.deletes.append(LocalPartition(gone.name, tid, i, p))
        for (tid, i), p in self.changed_partitions.items():
            t = self._topic(tid)
            if t is None:
                continue
            prev_topic = self.base.topics_by_id.get(tid)
            prev = prev_topic.partitions.get(i) if prev_topic is not None else None
            lp = LocalPartition(t.name, tid, i, p)
            if broker_id not in p.replicas:
                if prev is not None and broker_id in prev.replicas:
                    out.deletes.append(lp)
            elif p.leader == broker_id:
                out.leaders.append(lp)
            else:
                out.followers.append(lp)
        return out

    # -- copy-on-write helpers ------------------------------------------------

    def _brokers_w(self) -> dict[int, BrokerRegistration]:
        if self._brokers is None:
            self._brokers = dict(self.base.brokers)
        return self._brokers

    def _topics_w(self) -> tuple[dict[uuid.UUID, TopicImage], dict[str, TopicImage]]:
        if self._topics_by_id is None or self._topics_by_name is None:
            self._topics_by_id = dict(self.base.topics_by_id)
            self._topics_by_name = dict(self.base.topics_by_name)
        return self._topics_by_id, self._topics_by_name

    def _topic(self, tid: uuid.UUID) -> TopicImage | None:
        src = self._topics_by_id if self._topics_by_id is not None else self.base.topics_by_id
        return src.get(tid)

    def _partitions_w(self, tid: uuid.UUID) -> dict[int, PartitionRegistration]:
        parts = self._partitions.get(tid)
        if parts is None:
            t = self._topic(tid)
            if t is None:
                raise InvalidRecordError(f"partition record for unknown topic id {tid}")
            parts = dict(t.partitions)
            self._partitions[tid] = parts
        return parts

    def _configs_w(self, key: tuple[int, str]) -> dict[str, str]:
        if self._configs is None:
            self._configs = dict(self.base.configs)  # type: ignore[arg-type]
        if key not in self._copied_configs:
            self._configs[key] = dict(self._configs.get(key, {}))
            self._copied_configs.add(key)
        return self._configs[key]

    def _registration(self, broker_id: int, epoch: int) -> BrokerRegistration:
        reg = (self._brokers if self._brokers is not None else self.base.brokers).get(broker_id)
        if reg is None:
            raise InvalidRecordError(f"broker {broker_id} is not registered")
        if reg.epoch != epoch:
            raise InvalidRecordError(
                f"broker {broker_id} has epoch {reg.epoch}, record says {epoch}")
        return reg

    def _set_broker(self, reg: BrokerRegistration) -> None:
        self._brokers_w()[reg.broker_id] = reg
        self.changed_brokers.add(reg.broker_id)

    # -- record handlers --------------------------------------------------------

    def _register_broker(self, r: Any) -> None:
        reg = BrokerRegistration(
            broker_id=r.broker_id,
            epoch=r.broker_epoch,
            incarnation_id=uuid_from_bytes(r.incarnation_id),
            endpoints=tuple(
                Endpoint(e.name, e.host, e.port, e.security_protocol or "PLAINTEXT")
                for e in r.endpoints
            ),
            rack=r.rack if r.HasField("rack") else None,
            fenced=r.fenced,
            in_controlled_shutdown=r.in_controlled_shutdown,
            features=tuple(
                (f.name, f.min_supported_version, f.max_supported_version) for f in r.features
            ),
            log_dirs=tuple(uuid_from_bytes(d) for d in r.log_dirs),
            cordoned_log_dirs=frozenset(uuid_from_bytes(d) for d in r.cordoned_log_dirs),
        )
        self._set_broker(reg)
        self._last_broker_epoch = max(self._last_broker_epoch, r.broker_epoch)

    def _register_controller(self, r: Any) -> None:
        if self._controllers is None:
            self._controllers = dict(self.base.controllers)
        self._controllers[r.controller_id] = ControllerRegistration(
            controller_id=r.controller_id,
            incarnation_id=uuid_from_bytes(r.incarnation_id),
            endpoints=tuple(Endpoint(e.name, e.host, e.port, e.security_protocol or "PLAINTEXT")
                            for e in r.endpoints),
            features=tuple((f.name, f.min_supported_version, f.max_supported_version)
                           for f in r.features))

    def _unregister_broker(self, r: Any) -> None:
        self._registration(r.broker_id, r.broker_epoch)
        del self._brokers_w()[r.broker_id]
        self.changed_brokers.add(r.broker_id)

    def _fence_broker(self, r: Any) -> None:
        reg = self._registration(r.broker_id, r.broker_epoch)
        self._set_broker(_replace_broker(reg, fenced=True))

    def _unfence_broker(self, r: Any) -> None:
        reg = self._registration(r.broker_id, r.broker_epoch)
        self._set_broker(_replace_broker(reg, fenced=False))

    def _broker_registration_change(self, r: Any) -> None:
        reg = self._registration(r.broker_id, r.broker_epoch)
        fenced = r.fenced if r.HasField("fenced") else reg.fenced
        shutdown = (r.in_controlled_shutdown if r.HasField("in_controlled_shutdown")
                    else reg.in_controlled_shutdown)
        log_dirs = (tuple(uuid_from_bytes(d) for d in r.log_dirs.ids) if r.HasField("log_dirs")
                    else reg.log_dirs)
        cordoned = (frozenset(uuid_from_bytes(d) for d in r.cordoned_log_dirs.ids)
                    if r.HasField("cordoned_log_dirs") else reg.cordoned_log_dirs)
        self._set_broker(_replace_broker(reg, fenced=fenced, in_controlled_shutdown=shutdown,
                                         log_dirs=log_dirs, cordoned_log_dirs=cordoned))

    def _topic_record(self, r: Any) -> None:
        tid = uuid_from_bytes(r.topic_id)
        by_id, by_name = self._topics_w()
        if tid in by_id:
            raise InvalidRecordError(f"topic id {tid} already exists")
        if r.name in by_name:
            raise InvalidRecordError(f"topic {r.name!r} already exists")
        t = TopicImage(r.name, tid, {})
        by_id[tid] = t
        by_name[r.name] = t
        self._partitions[tid] = {}
        self.created_topics.add(tid)

    def _partition(self, r: Any) -> None:
        tid = uuid_from_bytes(r.topic_id)
        if r.partition_id < 0:
            raise InvalidRecordError(f"negative partition id {r.partition_id}")
        parts = self._partitions_w(tid)
        p = PartitionRegistration(
            replicas=_ids(r.replicas),
            isr=_ids(r.isr),
            leader=r.leader,
            leader_epoch=r.leader_epoch,
            partition_epoch=r.partition_epoch,
            elr=_ids(r.elr),
            last_known_elr=_ids(r.last_known_elr),
            removing_replicas=_ids(r.removing_replicas),
            adding_replicas=_ids(r.adding_replicas),
            leader_recovery_state=r.leader_recovery_state,
            directories=tuple(uuid_from_bytes(d) for d in r.directories),
        )
        parts[r.partition_id] = p
        self.changed_partitions[(tid, r.partition_id)] = p

    def _partition_change(self, r: Any) -> None:
        tid = uuid_from_bytes(r.topic_id)
        parts = self._partitions_w(tid)
        old = parts.get(r.partition_id)
        if old is None:
            raise InvalidRecordError(
                f"partition change for unknown partition {tid}-{r.partition_id}")

        def pick(field: str, current: tuple[int, ...]) -> tuple[int, ...]:
            return _ids(getattr(r, field).ids) if r.HasField(field) else current

        leader, leader_epoch = old.leader, old.leader_epoch
        if r.HasField("leader"):
            leader, leader_epoch = r.leader, old.leader_epoch + 1
        replicas = pick("replicas", old.replicas)
        if r.HasField("directories"):
            directories = tuple(uuid_from_bytes(d) for d in r.directories.ids)
        elif replicas != old.replicas and old.directories:
            # replicas that stay keep their directory, new ones have none yet (Kafka's)
            known = dict(zip(old.replicas, old.directories, strict=False))
            directories = tuple(known.get(b, UNASSIGNED_DIR) for b in replicas)
        else:
            directories = old.directories
        p = PartitionRegistration(
            replicas=replicas,
            isr=pick("isr", old.isr),
            leader=leader,
            leader_epoch=leader_epoch,
            partition_epoch=old.partition_epoch + 1,
            elr=pick("elr", old.elr),
            last_known_elr=pick("last_known_elr", old.last_known_elr),
            removing_replicas=pick("removing_replicas", old.removing_replicas),
            adding_replicas=pick("adding_replicas", old.adding_replicas),
            leader_recovery_state=(r.leader_recovery_state if r.HasField("leader_recovery_state")
                                   else old.leader_recovery_state),
            directories=directories,
        )
        parts[r.partition_id] = p
        self.changed_partitions[(tid, r.partition_id)] = p

    def _remove_topic(self, r: Any) -> None:
        tid = uuid_from_bytes(r.topic_id)
        by_id, by_name = self._topics_w()
        t = by_id.pop(tid, None)
        if t is None:
            raise InvalidRecordError(f"remove of unknown topic id {tid}")
        del by_name[t.name]
        parts = self._partitions.pop(tid, None)
        self.deleted_topics[tid] = TopicImage(t.name, tid, parts if parts is not None
                                              else t.partitions)
        self.created_topics.discard(tid)
        for key in [k for k in self.changed_partitions if k[0] == tid]:
            del self.changed_partitions[key]
        ckey = (RESOURCE_TOPIC, t.name)
        cfgs = self._configs if self._configs is not None else self.base.configs
        if ckey in cfgs:
            self._configs_w(ckey).clear()
            self.changed_configs.add(ckey)

    def _config(self, r: Any) -> None:
        key = (r.resource_type, r.resource_name)
        cfg = self._configs_w(key)
        if r.HasField("value"):
            cfg[r.name] = r.value
        else:
            cfg.pop(r.name, None)
        self.changed_configs.add(key)

    def _producer_ids(self, r: Any) -> None:
        if r.next_producer_id < self._next_producer_id:
            raise InvalidRecordError(
                f"producer id block goes back from {self._next_producer_id} "
                f"to {r.next_producer_id}")
        self._next_producer_id = r.next_producer_id

    def _feature_level(self, r: Any) -> None:
        if self._features is None:
            self._features = dict(self.base.features)
        if r.feature_level == 0:
            self._features.pop(r.name, None)
        else:
            self._features[r.name] = r.feature_level

    def _scram_w(self) -> dict[tuple[str, str], ScramCredential]:
        if self._scram is None:
            self._scram = dict(self.base.scram_credentials)
        return self._scram

    def _user_scram_credential(self, r: Any) -> None:
        mechanism = SCRAM_MECHANISM_NAMES.get(r.mechanism)
        if mechanism is None:
            raise InvalidRecordError(f"unknown SCRAM mechanism code {r.mechanism}")
        self._scram_w()[(mechanism, r.name)] = ScramCredential(
            mechanism, bytes(r.salt), bytes(r.stored_key), bytes(r.server_key), r.iterations)

    def _remove_user_scram_credential(self, r: Any) -> None:
        mechanism = SCRAM_MECHANISM_NAMES.get(r.mechanism)
        if mechanism is None:
            raise InvalidRecordError(f"unknown SCRAM mechanism code {r.mechanism}")
        self._scram_w().pop((mechanism, r.name), None)

    def _acls_w(self) -> dict[uuid.UUID, AclBinding]:
        if self._acls is None:
            self._acls = dict(self.base.acls)
        return self._acls

    def _access_control_entry(self, r: Any) -> None:
        acl_id = uuid_from_bytes(r.id)
        try:
            binding = AclBinding(
                ResourceType(r.resource_type), r.resource_name, PatternType(r.pattern_type),
                r.principal, r.host, AclOperation(r.operation),
                AclPermissionType(r.permission_type))
        except ValueError as exc:
            raise InvalidRecordError(f"AccessControlEntry {acl_id}: {exc}") from None
        acls = self._acls_w()
        if acl_id in acls:
            raise InvalidRecordError(f"an ACL with id {acl_id} already exists")
        acls[acl_id] = binding

    def _remove_access_control_entry(self, r: Any) -> None:
        acl_id = uuid_from_bytes(r.id)
        if self._acls_w().pop(acl_id, None) is None:
            raise InvalidRecordError(f"no ACL with id {acl_id} to remove")
    def _client_quota(self, r: Any) -> None:
        if self._quotas is None:
            self._quotas = {e: dict(v) for e, v in self.base.client_quotas.items()}
        entity = client_quota_entity(r)
        problem = validate_entity(entity)
        if problem is not None:
            raise InvalidRecordError(f"client quota record: {problem}")
        values = self._quotas.setdefault(entity, {})
        if r.remove:
            values.pop(r.key, None)
        else:
            values[r.key] = r.value
        self.changed_client_quotas = True

    def _tokens_w(self) -> dict[str, TokenInformation]:
        if self._tokens is None:
            self._tokens = dict(self.base.delegation_tokens)
        return self._tokens

    def _delegation_token(self, r: Any) -> None:
        if not r.token_id:
            raise InvalidRecordError("DelegationToken record without a token id")
        self._tokens_w()[r.token_id] = TokenInformation(
            r.token_id, r.owner, r.requester, tuple(r.renewers), r.issue_timestamp,
            r.max_timestamp, r.expiration_timestamp)

    def _remove_delegation_token(self, r: Any) -> None:
        self._tokens_w().pop(r.token_id, None)

    def _no_op(self, r: Any) -> None:
        return None


def _replace_broker(reg: BrokerRegistration, **changes: Any) -> BrokerRegistration:
    from dataclasses import replace

    return replace(reg, **changes)


_HANDLERS: dict[str, Any] = {
    "register_broker": MetadataDelta._register_broker,
    "unregister_broker": MetadataDelta._unregister_broker,
    "fence_broker": MetadataDelta._fence_broker,
    "unfence_broker": MetadataDelta._unfence_broker,
    "broker_registration_change": MetadataDelta._broker_registration_change,
    "topic": MetadataDelta._topic_record,
    "partition": MetadataDelta._partition,
    "partition_change": MetadataDelta._partition_change,
    "remove_topic": MetadataDelta._remove_topic,
    "config": MetadataDelta._config,
    "producer_ids": MetadataDelta._producer_ids,
    "feature_level": MetadataDelta._feature_level,
    "register_controller": MetadataDelta._register_controller,
    "user_scram_credential": MetadataDelta._user_scram_credential,
    "remove_user_scram_credential": MetadataDelta._remove_user_scram_credential,
    "access_control_entry": MetadataDelta._access_control_entry,
    "remove_access_control_entry": MetadataDelta._remove_access_control_entry,
    "client_quota": MetadataDelta._client_quota,
    "delegation_token": MetadataDelta._delegation_token,
    "remove_delegation_token": MetadataDelta._remove_delegation_token,
    "no_op": MetadataDelta._no_op,
}


def apply_records(image: MetadataImage, records: Iterable[Any], offset: int | None = None,
                  epoch: int | None = None) -> MetadataImage:
    """The image after `records`; (offset, epoch) is where the last record sits in the log."""
    delta = MetadataDelta(image)
    delta.replay_all(records, offset, epoch)
    return delta.apply()
