"""Fetch (API 1), versions 0-16: long-polled reads up to the high watermark, and the
leader's side of replication for fetches from follower replicas (replica_id >= 0).

v0-v3 (Kafka 3.9 served them, 4.0 dropped them: KIP-896) are for consumers that read only the
legacy message formats: their records are down-converted, as Kafka 3.9 does, to magic 0 (v0-v1)
or magic 1 (v2-v3) message sets (broker/protocol/legacy.py `down_convert`), so they are read
into memory rather than sent with os.sendfile. v0-v2 have no response-wide max_bytes (Kafka
takes it as unlimited, so fetch.max.bytes bounds it); v0 no throttle time.

Records go out as file slices spliced into the socket with os.sendfile: the response is
encoded by the narrow fast encoder (broker/protocol/fetch_encoder.py), which is tested
byte for byte against kio.

v11+ consumers may read from a follower up to its high watermark, and the leader names
an in-sync replica in the consumer's rack as preferred_read_replica when this broker has
a broker.rack (KIP-392).
v4+ consumers at isolation_level READ_COMMITTED read up to the last stable offset and get
the aborted transactions (producer id, first offset) of the range, from the segments'
.txnindex; the records still go out as file slices.
v12+ answers a follower whose last fetched epoch diverged with DivergingEpoch; v13+
names topics by id (an unknown id gets UNKNOWN_TOPIC_ID); v15+ carries the replica id
and broker epoch in ReplicaState; v16+ names the new leader's endpoint (KIP-951); v17 adds
a follower's directory id (a tag, unused: one log directory per partition here); v18 a
follower's high watermark per partition (KIP-1166): one behind the leader's is answered at
once rather than after the long poll, so the follower learns the new high watermark.

Fetch sessions (KIP-227, v7+): the ReplicaManager's FetchSessionCache
(broker/replication/fetch_session.py) decides what a request is (sessionless, full, an
incremental fetch of a session, or a session error answered with its error code and no
topics) and, after the read, which partitions an incremental answer carries (only those that
changed). v0-v6 requests are sessionless full fetches.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.config import effective_topic_configs
from broker.errors import KafkaError
from broker.handlers._authz import Op, Res, allowed
from broker.handlers._leader_hints import (
    LEADER_HINT_ERRORS,
    current_leader,
    leader_endpoints,
    not_hosted_error,
)
from broker.handlers._quotas import now_ms, who
from broker.protocol.fetch_encoder import (
    FetchPartition,
    FetchResponseData,
    FetchTopic,
    NodeEndpoint,
    encode_fetch_response,
)
from broker.protocol.frames import ResponseChunks, chunk_length
from broker.protocol.legacy import down_convert
from broker.replication.fetch_session import (
    FINAL_EPOCH,
    INVALID_SESSION_ID,
    Answer,
    ContextKind,
    FetchContext,
    Key,
    PartitionData,
    SessionPartition,
    SessionRequest,
    would_respond,
)
from broker.replication.replica_manager import FetchPartitionRequest, FetchPartitionResult

if TYPE_CHECKING:
    from broker.handlers.services import BrokerServices
    from broker.metadata.image import MetadataImage
    from broker.server import RequestContext

API_KEY = 1
TOPIC_IDS_VERSION = 13
# Below this version consumers read legacy message sets only.
DOWN_CONVERSION_BELOW_VERSION = 4
_NO_MAX_BYTES = 2**31 - 1
_NULL_ID = uuid.UUID(int=0)
_FOLLOWER_HW_VERSION = 18


def _down_conversion_enabled(node: BrokerServices, topic: str) -> bool:
    """The topic's message.downconversion.enable (Kafka 3.9's; default true)."""
    overrides = dict(node.metadata.topic_config(topic))
    image = node.metadata
    return bool(effective_topic_configs(node.config, overrides, image.broker_config(),
                                        image.broker_config(node.config.node_id))
                ["message.downconversion.enable"])


def _down_converted(res: FetchPartitionResult, version: int, fetch_offset: int) -> Any:
    """The records of `res` as a legacy message set for a Fetch v0-v3 consumer."""
    if res.records is None or not res.records.length:
        return b""
    data = res.records.read_bytes()
    try:
        return down_convert(data, magic=0 if version <= 1 else 1, fetch_offset=fetch_offset)
    except KafkaError as e:
        res.error_code = e.error_code
        return b""


def _partition(res: FetchPartitionResult, image: MetadataImage,
               records: Any = None) -> FetchPartition:
    if res.error_code is ErrorCode.unknown_topic_or_partition:
        res.error_code = not_hosted_error(image, res.topic, res.partition)
    current = (-1, -1)
    if res.error_code in LEADER_HINT_ERRORS:
        # KIP-951: name the new leader so the client can switch without a metadata call.
        current = current_leader(image, res.topic, res.partition)
        if current == (-1, -1):
            current = (res.leader_id, res.leader_epoch)
    if records is None:
        records = res.records if res.records is not None and res.records.length else b""
    return FetchPartition(
        partition_index=res.partition, error_code=int(res.error_code),
        high_watermark=res.high_watermark, last_stable_offset=res.last_stable_offset,
        log_start_offset=res.log_start_offset, records=records,
        diverging_epoch=res.diverging_epoch or (-1, -1), current_leader=current,
        preferred_read_replica=res.preferred_read_replica,
        aborted_transactions=res.aborted_transactions,
    )


def replica_of(request: Any) -> tuple[int, int]:
    """(replica id, broker epoch) of the sender: -1 for consumers."""
    state = getattr(request, "replica_state", None)
    if state is not None:
        return int(state.replica_id), int(state.replica_epoch)
    return int(getattr(request, "replica_id", -1)), -1


def _session_request(request: Any, version: int, replica_id: int) -> SessionRequest:
    by_ids = version >= TOPIC_IDS_VERSION
    parts: list[tuple[Key, PartitionData]] = []
    for topic in request.topics:
        name: str | uuid.UUID = (topic.topic_id or _NULL_ID) if by_ids else topic.topic
        parts.extend(
            ((name, p.partition), PartitionData(
                fetch_offset=p.fetch_offset, max_bytes=p.partition_max_bytes,
                current_leader_epoch=getattr(p, "current_leader_epoch", -1),
                last_fetched_epoch=getattr(p, "last_fetched_epoch", -1),
                log_start_offset=getattr(p, "log_start_offset", -1)))
            for p in topic.partitions)
    forgotten: list[Key] = []
    for topic in getattr(request, "forgotten_topics_data", ()) or ():
        name = (topic.topic_id or _NULL_ID) if by_ids else topic.topic
        forgotten.extend((name, i) for i in topic.partitions)
    return SessionRequest(
        session_id=getattr(request, "session_id", INVALID_SESSION_ID),
        epoch=getattr(request, "session_epoch", FINAL_EPOCH),
        partitions=parts, forgotten=forgotten, privileged=replica_id >= 0,
        uses_topic_ids=by_ids)


async def handle(node: BrokerServices, ctx: RequestContext, request: Any) -> ResponseChunks:
    version = ctx.api_version
    replica_id, replica_epoch = replica_of(request)
    fetch_ctx = node.replicas.fetch_sessions.new_context(
        _session_request(request, version, replica_id), node.replicas.clock())
    if fetch_ctx.kind is ContextKind.ERROR:
        return encode_fetch_response(version, FetchResponseData(
            topics=(), error_code=int(fetch_ctx.error), session_id=INVALID_SESSION_ID))
    read = _Read(node, ctx, request, fetch_ctx, replica_id, replica_epoch)
    # A follower without CLUSTER_ACTION takes the plain path, where every partition is
    # refused without a read (the idle check would record its fetch state).
    if fetch_ctx.kind is ContextKind.INCREMENTAL and not read.client_rack_matters \
            and not read.follower_refused:
        return await read.incremental()
    parts, answers = await read.partitions(range(len(fetch_ctx.partitions)), read.max_wait_ms)
    session_id, include = fetch_ctx.finish(answers, node.replicas.clock())
    return read.response(parts, include, session_id)


_Part = tuple[str, "uuid.UUID | None", FetchPartition]


class _Read:
    """One Fetch's reads over the partitions of its context (broker/replication/
    fetch_session.py), and its answer."""

    def __init__(self, node: BrokerServices, ctx: RequestContext, request: Any,
                 fetch_ctx: FetchContext, replica_id: int, replica_epoch: int) -> None:
        self.node, self.ctx, self.request, self.fetch_ctx = node, ctx, request, fetch_ctx
        self.version = ctx.api_version
        self.replica_id, self.replica_epoch = replica_id, replica_epoch
        self.image = node.metadata
        # KIP-392: consumers of v11+ may read from a follower, and the leader may send them
        # to one in their rack.
        self.client_rack = (request.rack_id if self.version >= 11 and replica_id < 0
                            else None)
        own_rack = node.replicas.settings.rack
        self.client_rack_matters = bool(self.client_rack) and own_rack is not None
        self._names: dict[str | uuid.UUID, str | None] = {}
        self.max_wait_ms = int(request.max_wait.total_seconds() * 1000)
        if self.version >= _FOLLOWER_HW_VERSION and replica_id >= 0 and self._follower_behind():
            self.max_wait_ms = 0
        self.isolation_level = int(getattr(request, "isolation_level", 0))
        # fetch.max.bytes caps what any Fetch asks for, a consumer's or a follower's, and
        # min_bytes is held under it so a long poll can end (Kafka's KafkaApis.
        # handleFetchRequest; v0-v2 ask for no limit and get this one)
        self.max_bytes = min(int(getattr(request, "max_bytes", _NO_MAX_BYTES)),
                             int(node.config["fetch.max.bytes"]))
        self.min_bytes = min(int(request.min_bytes), self.max_bytes)
        # A follower needs CLUSTER_ACTION on the cluster, a consumer READ on each topic; what
        # is refused is answered TOPIC_AUTHORIZATION_FAILED per partition, as Kafka does.
        self.follower_refused = replica_id >= 0 and not allowed(
            node, ctx, Op.CLUSTER_ACTION, Res.CLUSTER)
        self._readable: dict[str, bool] = {}
        self.user, self.client_id = who(ctx)

    def refused(self, name: str) -> bool:
        if self.replica_id >= 0:
            return self.follower_refused
        ok = self._readable.get(name)
        if ok is None:
            ok = self._readable[name] = allowed(self.node, self.ctx, Op.READ, Res.TOPIC, name)
        return not ok

    def _follower_behind(self) -> bool:
        """KIP-1166: does the follower report a high watermark below this leader's?"""
        replicas = self.node.replicas
        for topic in self.request.topics:
            name = self.name_of(topic.topic_id or _NULL_ID) if self.version >= TOPIC_IDS_VERSION \
                else topic.topic
            for p in topic.partitions:
                part = replicas.get(name, p.partition) if name is not None else None
                if part is not None and p.high_watermark < part.high_watermark:
                    return True
        return False

    def name_of(self, topic_key: str | uuid.UUID) -> str | None:
        """The topic's name; None for an unknown topic id (v13+)."""
        if isinstance(topic_key, str):
            return topic_key
        name = self._names.get(topic_key, "")
        if name == "":
            t = self.image.topic_by_id(topic_key) if topic_key != _NULL_ID else None
            name = self._names[topic_key] = None if t is None else t.name
        return name

    async def incremental(self) -> ResponseChunks:
        """An incremental fetch: partitions with nothing new are found without reading
        (ReplicaManager.session_loud); the others are read at once; with nothing to
        answer yet, the long poll waits on one future for every partition of the session,
        then looks again."""
        fetch_ctx, replicas = self.fetch_ctx, self.node.replicas
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.max_wait_ms / 1000
        cached = fetch_ctx.cached
        known: list[tuple[int, str, int, SessionPartition]] = []
        unknown: list[int] = []  # unknown topic ids: answered every time
        for i, (((topic_key, index), _), c) in enumerate(
                zip(fetch_ctx.partitions, cached, strict=True)):
            name = self.name_of(topic_key)
            if name is None:
                unknown.append(i)
            else:
                known.append((i, name, index, c))
        wait_keys = [(name, index) for _, name, index, _ in known]
        replica_id, replica_epoch = self.replica_id, self.replica_epoch
        while True:
            loud = replicas.session_loud(known, replica_id=replica_id,
                                         replica_epoch=replica_epoch)
            if unknown:
                loud = sorted(unknown + loud)
            remaining = deadline - loop.time()
            if loud:
                parts, answers = await self.partitions(loud, 0)
                size = sum(_records_size(p.records) for _, _, p in parts)
                urgent = any(a.error or a.must_respond for a in answers)
                if (size >= self.min_bytes or urgent or remaining <= 0) and any(
                        would_respond(cached[i], a) for i, a in zip(loud, answers, strict=True)):
                    session_id, include = fetch_ctx.finish(answers, replicas.clock(), loud)
                    return self.response(parts, include, session_id)
            if remaining <= 0 or self.min_bytes <= 0:
                # Out of time, or a client that wants no data to wait for (Kafka answers
                # min_bytes 0 at once, as ReplicaManager.fetch does).
                return self.response([], [], fetch_ctx.session_id)
            moved = await replicas.wait_any(wait_keys, for_log_end=replica_id >= 0,
                                            timeout_s=remaining)
            if not moved and not loud:
                # Nothing moved since a look that found nothing: nothing to answer.
                return self.response([], [], fetch_ctx.session_id)

    async def partitions(self, indexes: Sequence[int],
                         max_wait_ms: int) -> tuple[list[_Part], list[Answer]]:
        """Reads the context's partitions at `indexes` (a long poll of `max_wait_ms` when
        none is an unknown topic id): per partition its answer and what a session compares."""
        node, version, image = self.node, self.version, self.image
        entries = self.fetch_ctx.partitions
        wanted: list[FetchPartitionRequest] = []
        # per index: its position in `wanted`, -1 (unknown id) or -2 (not authorized)
        slots: list[int] = []
        any_unknown = False
        for i in indexes:
            (topic_key, index), data = entries[i]
            name = self.name_of(topic_key)
            if name is None:
                slots.append(-1)
                any_unknown = True
                continue
            if self.refused(name):
                slots.append(-2)
                any_unknown = True  # answered at once, as Kafka does
                continue
            slots.append(len(wanted))
            wanted.append(FetchPartitionRequest(
                topic=name, partition=index, fetch_offset=data.fetch_offset,
                partition_max_bytes=data.max_bytes,
                current_leader_epoch=data.current_leader_epoch,
                last_fetched_epoch=data.last_fetched_epoch,
            ))
        max_bytes = self.max_bytes
        if self.replica_id < 0:
            # consumer_byte_rate: one answer holds at most what the quota still allows now
            # (Kafka caps it at getMaxValueInQuotaWindow; Skiff also takes off what the
            # window already holds, so answers are sized to the rate); followers are not
            # held to client quotas. One batch always goes out, as max_bytes says.
            headroom = node.quotas.fetch.headroom(image.client_quotas, self.user,
                                                  self.client_id, now_ms())
            max_bytes = min(max_bytes, max(1, int(min(headroom, _NO_MAX_BYTES))))
        results = await node.replicas.fetch(
            wanted, replica_id=self.replica_id, replica_epoch=self.replica_epoch,
            client_rack=self.client_rack, max_wait_ms=0 if any_unknown else max_wait_ms,
            min_bytes=self.min_bytes, max_bytes=max_bytes,
            isolation_level=self.isolation_level,
        )
        down_convert_to = version if version < DOWN_CONVERSION_BELOW_VERSION else None
        parts: list[_Part] = []
        answers: list[Answer] = []
        for i, slot in zip(indexes, slots, strict=True):
            (topic_key, index), _ = entries[i]
            # Refused before any read (unknown topic id, not authorized): Kafka answers
            # these with FetchResponse.partitionResponse, whose aborted transactions are an
            # empty array, not the null of a read_uncommitted read
            if slot == -1:
                part = FetchPartition(partition_index=index, aborted_transactions=(),
                                      error_code=int(ErrorCode.unknown_topic_id), records=b"")
                tid = None if topic_key == _NULL_ID else topic_key
                parts.append(("", tid if isinstance(tid, uuid.UUID) else None, part))
                answers.append(Answer(False, True, -1, -1, -1))
                continue
            if slot == -2:
                part = FetchPartition(partition_index=index, records=b"",
                                      aborted_transactions=(),
                                      error_code=int(ErrorCode.topic_authorization_failed))
                parts.append((self.name_of(topic_key) or "",
                              topic_key if isinstance(topic_key, uuid.UUID) else None, part))
                answers.append(Answer(False, True, -1, -1, -1))
                continue
            res = results[slot]
            records = None
            if down_convert_to is not None:
                if (res.error_code is ErrorCode.none
                        and not _down_conversion_enabled(node, res.topic)):
                    # Kafka: an old consumer of a topic with down-conversion disabled
                    res.error_code = ErrorCode.unsupported_version
                    records = b""
                else:
                    records = _down_converted(res, down_convert_to, wanted[slot].fetch_offset)
            part = _partition(res, image, records)
            parts.append((res.topic, topic_key if isinstance(topic_key, uuid.UUID) else None,
                          part))
            answers.append(Answer(
                has_records=_records_size(part.records) > 0, error=part.error_code != 0,
                high_watermark=part.high_watermark, last_stable_offset=part.last_stable_offset,
                log_start_offset=part.log_start_offset,
                must_respond=(part.diverging_epoch != (-1, -1)
                              or part.preferred_read_replica >= 0)))
        return parts, answers

    def response(self, parts: list[_Part], include: list[bool],
                 session_id: int) -> ResponseChunks:
        by_topic: dict[tuple[str, uuid.UUID | None], list[FetchPartition]] = {}
        leaders: list[int] = []
        for (name, tid, part), keep in zip(parts, include, strict=True):
            if not keep:
                continue
            if part.current_leader != (-1, -1):
                leaders.append(part.current_leader[0])
            by_topic.setdefault((name, tid), []).append(part)
        topics = [FetchTopic(partitions=ps, topic=name, topic_id=tid)
                  for (name, tid), ps in by_topic.items()]
        endpoints: list[NodeEndpoint] = []
        if self.version >= 16 and leaders:
            endpoints = [NodeEndpoint(b, host, port, rack) for b, host, port, rack
                         in leader_endpoints(self.image, self.ctx.listener_name, leaders)]
        response = encode_fetch_response(self.version, FetchResponseData(
            topics=topics, node_endpoints=endpoints, session_id=session_id))
        if self.replica_id < 0:
            node = self.node
            quotas = node.metadata.client_quotas
            throttle_ms = node.quotas.fetch.record(quotas, self.user, self.client_id,
                                                   response.size, now_ms())
            if throttle_ms > 0:
                # Over consumer_byte_rate: as Kafka does, take the bytes back and answer an
                # empty response carrying the throttle time; the server mutes the
                # connection that long after sending it (KIP-219) and the consumer fetches
                # the same offsets again afterwards.
                node.quotas.fetch.unrecord(quotas, self.user, self.client_id, response.size,
                                           now_ms())
                response = encode_fetch_response(self.version, FetchResponseData(
                    topics=(), throttle_time_ms=throttle_ms, session_id=session_id))
                response.throttle_ms = throttle_ms
        return response


def _records_size(records: Any) -> int:
    if records is None:
        return 0
    if isinstance(records, list | tuple):
        return sum(chunk_length(c) for c in records)
    return chunk_length(records)
