"""Translation between the core's messages and the Kafka wire: kio's protocol entities for
the RPCs, and Kafka v2 record batches for the log's `Batch`es.

A Batch's records become the values of the batch's records (keys null); a control batch
(attributes bit 5) holds LeaderChange control records whose key is (version 0, type 2).
partitionLeaderEpoch carries the Raft epoch. The bytes are written and read by the wire
package's narrow value-batch codec (broker/protocol/records.py).

Outbound requests use Vote v2 (KIP-996 pre_vote), BeginQuorumEpoch v1,
EndQuorumEpoch v1, Fetch v17 (KRaft: topic id, replica_state) and
FetchSnapshot v1.  Inbound requests of any version kio knows are read, and
answered in the version they came in.
"""

from __future__ import annotations

import datetime
import functools
import io
import struct
import uuid
from types import ModuleType
from typing import Any

from kio.index import load_payload_module
from kio.schema.errors import ErrorCode
from kio.schema.k_raft_version_record.v0.data import KRaftVersionRecord
from kio.schema.types import BrokerId
from kio.schema.voters_record.v0 import data as voters_v0
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType
from kio.static.primitive import i16, u16

from broker.protocol.fetch_codec import REQUEST_VERSION as FETCH_REQUEST_VERSION
from broker.protocol.fetch_codec import RESPONSE_VERSIONS as FETCH_RESPONSE_VERSIONS
from broker.protocol.fetch_codec import (
    PartitionFetch,
    TopicFetch,
    encode_fetch_request_body,
    encode_fetch_response_body,
)
from broker.protocol.records import HEADER_SIZE, decode_value_batches, encode_value_batch
from broker.protocol.records import CorruptBatch as CorruptBatch
from broker.protocol.records import batch_length_at as _batch_length_at
from broker.protocol.records import read_varint as _read_varint
from raft.control import LEADER_CHANGE_TYPE, Endpoint, Voter, VoterSet
from raft.messages import (
    Batch,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Request,
    Response,
    SnapshotId,
    VoteRequest,
    VoteResponse,
)

METADATA_TOPIC = "__cluster_metadata"
METADATA_TOPIC_ID = uuid.UUID(int=1)  # Kafka's Uuid.METADATA_TOPIC_ID (AAAAAAAAAAAAAAAAAAAAAQ)

VOTE, BEGIN_QUORUM_EPOCH, END_QUORUM_EPOCH, DESCRIBE_QUORUM, FETCH, FETCH_SNAPSHOT = (
    52, 53, 54, 55, 1, 59,
)
ADD_RAFT_VOTER, REMOVE_RAFT_VOTER, UPDATE_RAFT_VOTER = 80, 81, 82
# KIP-853's membership RPCs, answered by the leader (a non-leader answers NOT_LEADER...)
VOTER_APIS = {ADD_RAFT_VOTER: (0, 1), REMOVE_RAFT_VOTER: (0, 0), UPDATE_RAFT_VOTER: (0, 0)}
RAFT_APIS = {
    **VOTER_APIS,
    VOTE: (0, 2),
    BEGIN_QUORUM_EPOCH: (0, 1),
    END_QUORUM_EPOCH: (0, 1),
    DESCRIBE_QUORUM: (0, 2),
    FETCH: (13, 17),
    FETCH_SNAPSHOT: (0, 1),
}
OUTBOUND_VERSION = {
    VoteRequest: (VOTE, 2),
    BeginQuorumEpochRequest: (BEGIN_QUORUM_EPOCH, 1),
    EndQuorumEpochRequest: (END_QUORUM_EPOCH, 1),
    FetchRequest: (FETCH, 17),
    FetchSnapshotRequest: (FETCH_SNAPSHOT, 1),
}
_ZERO = datetime.timedelta(0)
MAX_BATCH_BYTES = 8 * 1024 * 1024  # the largest metadata-log batch read back



def encode_batch(batch: Batch) -> bytes:
    """`batch` as Kafka v2 bytes (its own bytes when it was read from disk or the wire)."""
    if batch.raw is not None:
        return batch.raw
    return encode_value_batch(
        batch.base_offset, batch.epoch, batch.records, control=batch.control,
        key=_CONTROL_KEY.pack(0, batch.control_type) if batch.control else None,
        timestamp=batch.timestamp)


def encode_batches(batches: tuple[Batch, ...] | list[Batch]) -> bytes:
    return b"".join(encode_batch(b) for b in batches)


def decode_batches(data: bytes | memoryview,
                   max_batch_bytes: int = MAX_BATCH_BYTES) -> list[Batch]:
    """Every whole batch in `data` (a trailing partial batch is ignored, as a Fetch answer
    may cut one); raises CorruptBatch on a bad length or CRC."""
    return decode_value_batches(data, _batch, max_batch_bytes)


def _batch(base_offset: int, epoch: int, records: tuple[bytes, ...], control: bool,
           raw: bytes, timestamp: int) -> Batch:
    ctype = _control_type(raw) if control else LEADER_CHANGE_TYPE
    return Batch(base_offset, epoch, records, control, raw=raw, timestamp=timestamp,
                 control_type=ctype)


_CONTROL_KEY = struct.Struct(">hh")  # a control record's key: version, type


def _control_type(raw: bytes) -> int:
    """The type in the key of a control batch's first record (the decoder checked the
    batch's lengths and CRC; one type per batch, as this log writes them)."""
    try:
        pos = HEADER_SIZE
        _len, pos = _read_varint(raw, pos)
        pos += 1  # attributes
        _ts, pos = _read_varint(raw, pos)
        _delta, pos = _read_varint(raw, pos)
        klen, pos = _read_varint(raw, pos)
    except Exception as e:
        raise CorruptBatch(f"control record: {e}") from None
    if klen < _CONTROL_KEY.size or pos + klen > len(raw):
        raise CorruptBatch("control record without a (version, type) key")
    _version, ctype = _CONTROL_KEY.unpack_from(raw, pos)
    return int(ctype)


class KioVoterCodec:
    """KIP-853's control record values, VotersRecord v0 and KRaftVersionRecord v0, written
    and read by kio."""

    _write_voters = staticmethod(entity_writer(voters_v0.VotersRecord))
    _read_voters = staticmethod(entity_reader(voters_v0.VotersRecord))
    _write_kv = staticmethod(entity_writer(KRaftVersionRecord))
    _read_kv = staticmethod(entity_reader(KRaftVersionRecord))

    def encode_voters(self, voters: VoterSet) -> bytes:
        rec = voters_v0.VotersRecord(version=i16(0), voters=tuple(
            voters_v0.Voter(
                voter_id=BrokerId(v.node_id), voter_directory_id=v.directory_id,
                endpoints=tuple(voters_v0.Endpoint(name=e.name, host=e.host, port=u16(e.port))
                                for e in v.endpoints),
                k_raft_version_feature=voters_v0.KRaftVersionFeature(
                    min_supported_version=i16(0), max_supported_version=i16(1)))
            for v in voters))
        buf = io.BytesIO()
        self._write_voters(buf, rec)
        return buf.getvalue()

    def decode_voters(self, value: bytes) -> VoterSet:
        try:
            rec, _n = self._read_voters(value, 0)
        except Exception as e:  # kio raises BufferUnderflow, UnicodeDecodeError, ...
            raise ValueError(f"malformed VotersRecord: {e!r}") from None
        return tuple(sorted(
            (Voter(int(v.voter_id),
                   None if v.voter_directory_id in (None, uuid.UUID(int=0))
                   else v.voter_directory_id,
                   tuple(Endpoint(e.name, e.host, int(e.port)) for e in v.endpoints))
             for v in rec.voters), key=lambda v: v.node_id))

    def encode_kraft_version(self, version: int) -> bytes:
        buf = io.BytesIO()
        self._write_kv(buf, KRaftVersionRecord(version=i16(0), k_raft_version=i16(version)))
        return buf.getvalue()

    def decode_kraft_version(self, value: bytes) -> int:
        try:
            rec, _n = self._read_kv(value, 0)
        except Exception as e:
            raise ValueError(f"malformed KRaftVersionRecord: {e!r}") from None
        return int(rec.k_raft_version)


VOTER_CODEC = KioVoterCodec()


def batch_length_at(data: bytes | memoryview, pos: int) -> int | None:
    """Total size of the batch starting at `pos`, or None if incomplete/invalid."""
    return _batch_length_at(data, pos, MAX_BATCH_BYTES)


class WireError(ValueError):
    """A request this node cannot read as a metadata-quorum RPC."""

    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error


@functools.cache
def schema_module(api_key: int, version: int, kind: EntityType) -> ModuleType:
    return load_payload_module(api_key, version, kind)  # type: ignore[arg-type]


@functools.cache
def _fields(mod: ModuleType, cls_name: str) -> tuple[Any, frozenset[str]]:
    cls = getattr(mod, cls_name)
    return cls, frozenset(cls.__dataclass_fields__)


def build(mod: ModuleType, cls_name: str, /, **kw: Any) -> Any:
    cls, names = _fields(mod, cls_name)
    return cls(**{k: v for k, v in kw.items() if k in names})


def _the_partition(request: Any, topics_attr: str = "topics") -> Any:
    topics = getattr(request, topics_attr)
    if len(topics) != 1 or len(topics[0].partitions) != 1:
        raise WireError(ErrorCode.invalid_request, "expected exactly one topic partition")
    topic = topics[0]
    name = getattr(topic, "topic_name", None) or getattr(topic, "name", None)
    tid = getattr(topic, "topic_id", None)
    if name is not None and name != METADATA_TOPIC:
        raise WireError(ErrorCode.unknown_topic_or_partition, f"not the metadata topic: {name}")
    if tid is not None and tid != METADATA_TOPIC_ID:
        raise WireError(ErrorCode.unknown_topic_id, f"not the metadata topic id: {tid}")
    p = topic.partitions[0]
    index = getattr(p, "partition_index", getattr(p, "partition", getattr(p, "index", 0)))
    if index != 0:
        raise WireError(ErrorCode.unknown_topic_or_partition, f"partition {index}")
    return p


# ------------------------------------------------------------------ outbound


def encode_fetch_request(msg: FetchRequest, cluster_id: str | None,
                         topic_id: uuid.UUID) -> bytes:
    """The body of the Fetch v17 request `encode_request` describes."""
    return encode_fetch_request_body(
        FETCH_REQUEST_VERSION, replica_id=msg.replica_id, replica_epoch=-1,
        max_wait_ms=msg.max_wait_ms, min_bytes=1, max_bytes=msg.max_bytes,
        cluster_id=cluster_id, topics=(TopicFetch("", topic_id, (PartitionFetch(
            0, msg.epoch, msg.fetch_offset, msg.last_fetched_epoch, -1, msg.max_bytes,
            msg.replica_directory_id),)),))


def encode_fetch_response(version: int, msg: FetchResponse, records: bytes,
                          topic_id: uuid.UUID) -> bytes:
    """The body of the Fetch response (v13-v17) `encode_response` describes, with
    `records` as the partition's record bytes."""
    sid = msg.snapshot_id
    return encode_fetch_response_body(
        version, topic_id=topic_id, error_code=int(msg.error),
        high_watermark=msg.high_watermark, log_start_offset=msg.log_start_offset,
        records=records, diverging=(msg.diverging_epoch, msg.diverging_end_offset),
        current_leader=(msg.leader_id, msg.epoch),
        snapshot_id=(sid.end_offset, sid.epoch) if sid is not None else (-1, -1))


def encode_request(msg: Request, cluster_id: str | None) -> tuple[int, int, Any]:
    api_key, version = OUTBOUND_VERSION[type(msg)]
    m = schema_module(api_key, version, EntityType.request)
    if isinstance(msg, VoteRequest):
        p = build(m, "PartitionData", partition_index=0, replica_epoch=msg.epoch,
                  replica_id=msg.candidate_id, replica_directory_id=None,
                  voter_directory_id=None, last_offset_epoch=msg.last_offset_epoch,
                  last_offset=msg.last_offset, pre_vote=msg.pre_vote)
        t = build(m, "TopicData", topic_name=METADATA_TOPIC, partitions=(p,))
        return api_key, version, build(m, "VoteRequest", cluster_id=cluster_id, voter_id=-1,
                                       topics=(t,))
    if isinstance(msg, BeginQuorumEpochRequest):
        p = build(m, "PartitionData", partition_index=0, voter_directory_id=None,
                  leader_id=msg.leader_id, leader_epoch=msg.epoch)
        t = build(m, "TopicData", topic_name=METADATA_TOPIC, partitions=(p,))
        return api_key, version, build(m, "BeginQuorumEpochRequest", cluster_id=cluster_id,
                                       voter_id=-1, topics=(t,), leader_endpoints=())
    if isinstance(msg, EndQuorumEpochRequest):
        cands = tuple(build(m, "ReplicaInfo", candidate_id=c, candidate_directory_id=None)
                      for c in msg.preferred_successors)
        p = build(m, "PartitionData", partition_index=0, leader_id=msg.leader_id,
                  leader_epoch=msg.epoch, preferred_candidates=cands)
        t = build(m, "TopicData", topic_name=METADATA_TOPIC, partitions=(p,))
        return api_key, version, build(m, "EndQuorumEpochRequest", cluster_id=cluster_id,
                                       topics=(t,), leader_endpoints=())
    if isinstance(msg, FetchRequest):
        p = build(m, "FetchPartition", partition=0, current_leader_epoch=msg.epoch,
                  fetch_offset=msg.fetch_offset, last_fetched_epoch=msg.last_fetched_epoch,
                  log_start_offset=-1, partition_max_bytes=msg.max_bytes,
                  replica_directory_id=msg.replica_directory_id)
        t = build(m, "FetchTopic", topic_id=METADATA_TOPIC_ID, partitions=(p,))
        rs = build(m, "ReplicaState", replica_id=msg.replica_id, replica_epoch=-1)
        return api_key, version, build(
            m, "FetchRequest", cluster_id=cluster_id, replica_state=rs,
            max_wait=datetime.timedelta(milliseconds=msg.max_wait_ms), min_bytes=1,
            max_bytes=msg.max_bytes, isolation_level=0, session_id=0, session_epoch=-1,
            topics=(t,), forgotten_topics_data=(), rack_id="",
        )
    sid = build(m, "SnapshotId", end_offset=msg.snapshot_id.end_offset,
                epoch=msg.snapshot_id.epoch)
    p = build(m, "PartitionSnapshot", partition=0, current_leader_epoch=msg.epoch,
              snapshot_id=sid, position=msg.position, replica_directory_id=None)
    t = build(m, "TopicSnapshot", name=METADATA_TOPIC, partitions=(p,))
    return api_key, version, build(m, "FetchSnapshotRequest", cluster_id=cluster_id,
                                   replica_id=msg.replica_id, max_bytes=msg.max_bytes,
                                   topics=(t,))


def outbound(msg: Request, cluster_id: str | None) -> tuple[int, int, Any]:
    """(api key, version, body) to send: Fetch, the per-record RPC, as bytes from the
    narrow encoder (broker/protocol/fetch_codec.py); the rest as kio entities."""
    if isinstance(msg, FetchRequest):
        return FETCH, FETCH_REQUEST_VERSION, encode_fetch_request(msg, cluster_id,
                                                                  METADATA_TOPIC_ID)
    return encode_request(msg, cluster_id)


def decode_response(request: Request, response: Any) -> Response:
    """The core's view of the kio response to `request`."""
    err = getattr(response, "error_code", ErrorCode.none)
    if isinstance(request, FetchRequest):
        if err != ErrorCode.none:
            return FetchResponse(err, -1, -1)
        p = _the_partition(response, "responses")
        lead = p.current_leader
        snap = None
        if p.snapshot_id.end_offset >= 0 and p.snapshot_id.epoch >= 0:
            snap = SnapshotId(int(p.snapshot_id.end_offset), int(p.snapshot_id.epoch))
        return FetchResponse(
            p.error_code, int(lead.leader_epoch), int(lead.leader_id), int(p.high_watermark),
            int(p.log_start_offset), tuple(decode_batches(p.records or b"")),
            int(p.diverging_epoch.epoch), int(p.diverging_epoch.end_offset), snap,
        )
    if isinstance(request, FetchSnapshotRequest):
        if err != ErrorCode.none:
            return FetchSnapshotResponse(err, -1, -1)
        p = _the_partition(response)
        lead = p.current_leader
        return FetchSnapshotResponse(
            p.error_code, int(lead.leader_epoch), int(lead.leader_id),
            SnapshotId(int(p.snapshot_id.end_offset), int(p.snapshot_id.epoch)),
            int(p.size), int(p.position), bytes(p.unaligned_records),
        )
    if err != ErrorCode.none:
        epoch, leader = -1, -1
        p = None
    else:
        p = _the_partition(response)
        err = p.error_code
        epoch, leader = int(p.leader_epoch), int(p.leader_id)
    if isinstance(request, VoteRequest):
        granted = bool(p.vote_granted) if p is not None else False
        return VoteResponse(err, epoch, leader, granted, request.pre_vote)
    if isinstance(request, BeginQuorumEpochRequest):
        return BeginQuorumEpochResponse(err, epoch, leader)
    return EndQuorumEpochResponse(err, epoch, leader)


# ------------------------------------------------------------------- inbound


def decode_request(api_key: int, request: Any) -> tuple[int, Request]:
    """(sender id, the core's request) from a kio request of any version."""
    if api_key == VOTE:
        p = _the_partition(request)
        return int(p.replica_id), VoteRequest(
            int(p.replica_epoch), int(p.replica_id), int(p.last_offset_epoch),
            int(p.last_offset), bool(getattr(p, "pre_vote", False)))
    if api_key == BEGIN_QUORUM_EPOCH:
        p = _the_partition(request)
        return int(p.leader_id), BeginQuorumEpochRequest(int(p.leader_epoch), int(p.leader_id))
    if api_key == END_QUORUM_EPOCH:
        p = _the_partition(request)
        if hasattr(p, "preferred_candidates"):
            succ = tuple(int(c.candidate_id) for c in p.preferred_candidates)
        else:
            succ = tuple(int(c) for c in getattr(p, "preferred_successors", ()))
        return int(p.leader_id), EndQuorumEpochRequest(int(p.leader_epoch), int(p.leader_id),
                                                       succ)
    if api_key == FETCH:
        p = _the_partition(request)
        rs = getattr(request, "replica_state", None)
        replica = int(rs.replica_id) if rs is not None else int(request.replica_id)
        if replica < 0:
            raise WireError(ErrorCode.invalid_request, "a metadata fetch needs a replica id")
        wait = request.max_wait
        wait_ms = int(wait.total_seconds() * 1000) if hasattr(wait, "total_seconds") else int(wait)
        directory = getattr(p, "replica_directory_id", None)
        return replica, FetchRequest(
            int(p.current_leader_epoch), replica, int(p.fetch_offset), int(p.last_fetched_epoch),
            int(min(p.partition_max_bytes, request.max_bytes)), max(0, wait_ms),
            None if directory in (None, uuid.UUID(int=0)) else directory)
    if api_key == FETCH_SNAPSHOT:
        p = _the_partition(request)
        return int(request.replica_id), FetchSnapshotRequest(
            int(p.current_leader_epoch), int(request.replica_id),
            SnapshotId(int(p.snapshot_id.end_offset), int(p.snapshot_id.epoch)),
            int(p.position), int(request.max_bytes))
    raise WireError(ErrorCode.unsupported_version, f"api {api_key} is not a quorum RPC")


def encode_response(api_key: int, version: int, msg: Response) -> Any:
    m = schema_module(api_key, version, EntityType.response)
    if isinstance(msg, FetchResponse):
        div = build(m, "EpochEndOffset", epoch=msg.diverging_epoch,
                    end_offset=msg.diverging_end_offset)
        lead = build(m, "LeaderIdAndEpoch", leader_id=msg.leader_id, leader_epoch=msg.epoch)
        sid = msg.snapshot_id
        snap = build(m, "SnapshotId", end_offset=sid.end_offset if sid else -1,
                     epoch=sid.epoch if sid else -1)
        p = build(m, "PartitionData", partition_index=0, error_code=msg.error,
                  high_watermark=msg.high_watermark, last_stable_offset=msg.high_watermark,
                  log_start_offset=msg.log_start_offset, diverging_epoch=div,
                  current_leader=lead, snapshot_id=snap, aborted_transactions=None,
                  preferred_read_replica=-1, records=encode_batches(msg.batches))
        t = build(m, "FetchableTopicResponse", topic_id=METADATA_TOPIC_ID, partitions=(p,))
        return build(m, "FetchResponse", throttle_time=_ZERO, error_code=ErrorCode.none,
                     session_id=0, responses=(t,), node_endpoints=())
    if isinstance(msg, FetchSnapshotResponse):
        sid = msg.snapshot_id or SnapshotId(-1, -1)
        s = build(m, "SnapshotId", end_offset=sid.end_offset, epoch=sid.epoch)
        lead = build(m, "LeaderIdAndEpoch", leader_id=msg.leader_id, leader_epoch=msg.epoch)
        p = build(m, "PartitionSnapshot", index=0, error_code=msg.error, snapshot_id=s,
                  current_leader=lead, size=msg.size, position=msg.position,
                  unaligned_records=msg.data)
        t = build(m, "TopicSnapshot", name=METADATA_TOPIC, partitions=(p,))
        return build(m, "FetchSnapshotResponse", throttle_time=_ZERO,
                     error_code=ErrorCode.none, topics=(t,), node_endpoints=())
    name = {VoteResponse: "VoteResponse", BeginQuorumEpochResponse: "BeginQuorumEpochResponse",
            EndQuorumEpochResponse: "EndQuorumEpochResponse"}[type(msg)]
    granted = msg.vote_granted if isinstance(msg, VoteResponse) else False
    p = build(m, "PartitionData", partition_index=0, error_code=msg.error,
              leader_id=msg.leader_id, leader_epoch=msg.epoch, vote_granted=granted)
    t = build(m, "TopicData", topic_name=METADATA_TOPIC, partitions=(p,))
    return build(m, name, error_code=ErrorCode.none, topics=(t,), node_endpoints=())


def response_body(api_key: int, version: int, msg: Response) -> Any:
    """The answer to send: a Fetch answer as bytes from the narrow encoder, the rest as
    kio entities (encode_response)."""
    if isinstance(msg, FetchResponse) and version in FETCH_RESPONSE_VERSIONS:
        return encode_fetch_response(version, msg, encode_batches(msg.batches),
                                     METADATA_TOPIC_ID)
    return encode_response(api_key, version, msg)


def error_response(api_key: int, version: int, error: ErrorCode) -> Any:
    """A top-level error answer for a request that could not be read."""
    m = schema_module(api_key, version, EntityType.response)
    name = {VOTE: "VoteResponse", BEGIN_QUORUM_EPOCH: "BeginQuorumEpochResponse",
            END_QUORUM_EPOCH: "EndQuorumEpochResponse", FETCH: "FetchResponse",
            FETCH_SNAPSHOT: "FetchSnapshotResponse",
            DESCRIBE_QUORUM: "DescribeQuorumResponse", ADD_RAFT_VOTER: "AddRaftVoterResponse",
            REMOVE_RAFT_VOTER: "RemoveRaftVoterResponse",
            UPDATE_RAFT_VOTER: "UpdateRaftVoterResponse"}[api_key]
    current = (build(m, "CurrentLeader", leader_id=-1, leader_epoch=-1, host="", port=-1)
               if hasattr(m, "CurrentLeader") else None)
    return build(m, name, throttle_time=_ZERO, error_code=error, error_message=str(error.name),
                 session_id=0, responses=(), topics=(), nodes=(), node_endpoints=(),
                 current_leader=current)
