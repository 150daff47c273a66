"""The metadata-log record types (protobuf, from proto/skiff/metadata/v1/records.proto).

A record in `__cluster_metadata` is one serialized `MetadataRecord` envelope. This
module is the one place that imports the generated code and knows the envelope.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from broker.quotas.core import QuotaEntity, make_entity
from broker.security.authorizer import AclBinding
from broker.util import protogen

pb: Any = protogen.load("skiff.metadata.v1.records_pb2")

MetadataRecord: Any = pb.MetadataRecord

# Kafka's ConfigResource.Type codes.
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_CLIENT_METRICS = 16  # KIP-714 subscriptions
RESOURCE_GROUP = 32  # KIP-848 group configs

NO_LEADER = -1
MAX_RECORD_BYTES = 1 << 20


class InvalidRecordError(ValueError):
    """A record that cannot be applied to the image it follows (a bug or a corrupt log)."""


def uuid_to_bytes(u: uuid.UUID) -> bytes:
    return u.bytes


def uuid_from_bytes(b: bytes) -> uuid.UUID:
    if len(b) != 16:
        raise InvalidRecordError(f"a Uuid has 16 bytes, got {len(b)}")
    return uuid.UUID(bytes=b)


def wrap(message: Any) -> Any:
    """Put one record message (Topic, Partition, ...) into a MetadataRecord envelope."""
    field = _FIELD_BY_TYPE[type(message).DESCRIPTOR.full_name]
    env = pb.MetadataRecord()
    getattr(env, field).CopyFrom(message)
    return env


def kind(record: Any) -> str:
    """The oneof field name of an envelope ('topic', 'partition', ...); '' when empty."""
    name = record.WhichOneof("record")
    return name or ""


def unwrap(record: Any) -> Any:
    name = record.WhichOneof("record")
    if name is None:
        raise InvalidRecordError("empty MetadataRecord")
    return getattr(record, name)


def encode(record: Any) -> bytes:
    data: bytes = record.SerializeToString(deterministic=True)
    return data


def decode(data: bytes | memoryview) -> Any:
    if len(data) > MAX_RECORD_BYTES:
        raise InvalidRecordError(f"metadata record of {len(data)} bytes exceeds {MAX_RECORD_BYTES}")
    env = pb.MetadataRecord()
    try:
        env.ParseFromString(bytes(data))
    except Exception as exc:  # protobuf raises DecodeError; any parse failure is corruption
        raise InvalidRecordError(f"undecodable metadata record: {exc}") from exc
    if env.WhichOneof("record") is None:
        raise InvalidRecordError("metadata record carries no known record type")
    return env


def encode_all(records: Iterable[Any]) -> list[bytes]:
    return [encode(r) for r in records]


_FIELD_BY_TYPE: dict[str, str] = {
    f.message_type.full_name: f.name
    for f in pb.MetadataRecord.DESCRIPTOR.oneofs_by_name["record"].fields
}


# Constructors the controller uses, so call sites read like Kafka's record names.


def topic_record(name: str, topic_id: uuid.UUID) -> Any:
    return wrap(pb.Topic(name=name, topic_id=topic_id.bytes))


def partition_record(
    topic_id: uuid.UUID,
    partition_id: int,
    replicas: Iterable[int],
    isr: Iterable[int],
    leader: int,
    leader_epoch: int = 0,
    partition_epoch: int = 0,
    elr: Iterable[int] = (),
    last_known_elr: Iterable[int] = (),
    removing_replicas: Iterable[int] = (),
    adding_replicas: Iterable[int] = (),
    leader_recovery_state: int = 0,
    directories: Iterable[uuid.UUID] = (),
) -> Any:
    return wrap(
        pb.Partition(
            directories=[d.bytes for d in directories],
            topic_id=topic_id.bytes,
            partition_id=partition_id,
            replicas=list(replicas),
            isr=list(isr),
            leader=leader,
            leader_epoch=leader_epoch,
            partition_epoch=partition_epoch,
            elr=list(elr),
            last_known_elr=list(last_known_elr),
            removing_replicas=list(removing_replicas),
            adding_replicas=list(adding_replicas),
            leader_recovery_state=leader_recovery_state,
        )
    )


def remove_topic_record(topic_id: uuid.UUID) -> Any:
    return wrap(pb.RemoveTopic(topic_id=topic_id.bytes))


def config_record(resource_type: int, resource_name: str, name: str, value: str | None) -> Any:
    msg = pb.Config(resource_type=resource_type, resource_name=resource_name, name=name)
    if value is not None:
        msg.value = value
    return wrap(msg)


def register_controller_record(reg: Any) -> Any:
    """Kafka's RegisterControllerRecord of an image.ControllerRegistration."""
    return wrap(pb.RegisterController(
        controller_id=reg.controller_id, incarnation_id=reg.incarnation_id.bytes,
        endpoints=[pb.Endpoint(name=e.name, host=e.host, port=e.port,
                               security_protocol=e.security_protocol) for e in reg.endpoints],
        features=[pb.FeatureRange(name=n, min_supported_version=lo, max_supported_version=hi)
                  for n, lo, hi in reg.features]))


def feature_level_record(name: str, level: int) -> Any:
    return wrap(pb.FeatureLevel(name=name, feature_level=level))


# Kafka's ScramMechanism type codes.
SCRAM_MECHANISM_CODES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
SCRAM_MECHANISM_NAMES = {v: k for k, v in SCRAM_MECHANISM_CODES.items()}


def user_scram_credential_record(name: str, mechanism: str, salt: bytes, stored_key: bytes,
                                 server_key: bytes, iterations: int) -> Any:
    return wrap(pb.UserScramCredential(
        name=name, mechanism=SCRAM_MECHANISM_CODES[mechanism], salt=salt,
        stored_key=stored_key, server_key=server_key, iterations=iterations))


def remove_user_scram_credential_record(name: str, mechanism: str) -> Any:
    return wrap(pb.RemoveUserScramCredential(name=name,
                                             mechanism=SCRAM_MECHANISM_CODES[mechanism]))


def access_control_entry_record(acl_id: uuid.UUID, binding: AclBinding) -> Any:
    return wrap(pb.AccessControlEntry(
        id=acl_id.bytes, resource_type=int(binding.resource_type),
        resource_name=binding.resource_name, pattern_type=int(binding.pattern_type),
        principal=binding.principal, host=binding.host, operation=int(binding.operation),
        permission_type=int(binding.permission)))


def remove_access_control_entry_record(acl_id: uuid.UUID) -> Any:
    return wrap(pb.RemoveAccessControlEntry(id=acl_id.bytes))
def client_quota_record(entity: QuotaEntity, key: str, value: float | None) -> Any:
    """Kafka's ClientQuotaRecord: set `key` on `entity`, or remove it when value is None."""
    msg = pb.ClientQuota(key=key)
    for entity_type, name in entity:
        data = msg.entity.add(entity_type=entity_type)
        if name is not None:
            data.entity_name = name
    if value is None:
        msg.remove = True
    else:
        msg.value = value
    return wrap(msg)


def client_quota_entity(r: Any) -> QuotaEntity:
    """The entity of a ClientQuota record (absent names are default entities)."""
    return make_entity(
        (d.entity_type, d.entity_name if d.HasField("entity_name") else None) for d in r.entity)


def producer_ids_record(broker_id: int, broker_epoch: int, next_producer_id: int) -> Any:
    return wrap(
        pb.ProducerIds(
            broker_id=broker_id, broker_epoch=broker_epoch, next_producer_id=next_producer_id
        )
    )


def delegation_token_record(token: Any) -> Any:
    """Kafka's DelegationTokenRecord of a delegation_token.TokenInformation."""
    return wrap(pb.DelegationToken(
        owner=token.owner, requester=token.requester, renewers=list(token.renewers),
        issue_timestamp=token.issue_ms, max_timestamp=token.max_ms,
        expiration_timestamp=token.expiry_ms, token_id=token.token_id))


def remove_delegation_token_record(token_id: str) -> Any:
    return wrap(pb.RemoveDelegationToken(token_id=token_id))
