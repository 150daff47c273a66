"""TopicService: create, delete, list, describe, add partitions."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import grpc
import structlog
from kio.schema.errors import ErrorCode

from broker.admin.auth import MECHANISM_KEY, PASSWORD_KEY, USER_KEY
from broker.admin.convert import topic_description, topic_record, topic_summary
from broker.admin.errors import AdminError, S, rpc_errors
from broker.admin.forward import Forwarder, admin_endpoint_of, forwards_writes
from broker.admin.pb import meta, topics, topics_grpc
from broker.admin.services import AdminServices
from broker.controller.requests import CreatableTopic, CreatePartitionsTopic
from broker.controller.validation import INTERNAL_TOPICS
from broker.errors import KafkaError
from broker.metadata.image import TopicImage

log = structlog.get_logger(__name__)
_SERVICE = topics.DESCRIPTOR.services_by_name["TopicService"]
_DESCRIBE_TOPICS = _SERVICE.methods_by_name["DescribeTopics"]
_AUTH_KEYS = (USER_KEY, PASSWORD_KEY, MECHANISM_KEY)
PEER_TIMEOUT_S = 5.0


def require_topic(node: AdminServices, name: str) -> TopicImage:
    if not name:
        raise AdminError(S.INVALID_ARGUMENT, "a topic name is required")
    t = node.metadata.topic(name)
    if t is None:
        raise AdminError(S.NOT_FOUND, no_topic(name))
    return t


def no_topic(name: str) -> str:
    return f"topic '{name}' does not exist (`skiff topics list` shows the topics)"


def _assignments(items: Any) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for a in items:
        if a.partition in out:
            raise AdminError(S.INVALID_ARGUMENT,
                             f"partition {a.partition} is assigned twice")
        if not a.replicas:
            raise AdminError(S.INVALID_ARGUMENT,
                             f"partition {a.partition} has an empty replica list")
        out[a.partition] = list(a.replicas)
    return out


class TopicService(topics_grpc.TopicServiceServicer):  # type: ignore[misc]
    def __init__(self, node: AdminServices, forwarder: Forwarder | None = None) -> None:
        self.node = node
        self.forwarder = forwarder

    @rpc_errors
    @forwards_writes(_SERVICE)
    async def CreateTopic(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        if not request.name:
            raise AdminError(S.INVALID_ARGUMENT, "a topic name is required")
        if request.num_partitions < 0 or request.replication_factor < 0:
            raise AdminError(S.INVALID_ARGUMENT,
                             "partitions and replication factor must be positive "
                             "(0: the broker default)")
        manual = _assignments(request.assignments) or None
        [res] = await self.node.controller.create_topics([CreatableTopic(
            name=request.name, num_partitions=request.num_partitions or -1,
            replication_factor=request.replication_factor or -1, assignments=manual,
            configs=dict(request.configs),
        )], validate_only=request.validate_only)
        if res.error is not ErrorCode.none:
            raise KafkaError(res.error, res.message or "")
        return topics.CreateTopicResponse(
            topic=meta.Topic(name=res.name,
                             topic_id=res.topic_id.bytes if res.topic_id else b""),
            num_partitions=res.num_partitions, replication_factor=res.replication_factor,
            configs=dict(res.configs), validate_only=request.validate_only,
        )

    @rpc_errors
    @forwards_writes(_SERVICE)
    async def DeleteTopic(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        if bool(request.name) == bool(request.topic_id):
            raise AdminError(S.INVALID_ARGUMENT, "give exactly one of a topic name or a topic id")
        if request.topic_id:
            if len(request.topic_id) != 16:
                raise AdminError(S.INVALID_ARGUMENT, "a topic id is 16 bytes")
            [res] = await self.node.controller.delete_topics(
                topic_ids=[uuid.UUID(bytes=request.topic_id)])
        else:
            [res] = await self.node.controller.delete_topics(names=[request.name])
        if res.error in (ErrorCode.unknown_topic_or_partition, ErrorCode.unknown_topic_id):
            # as DescribeTopics says it (the controller's message is Kafka's generic one)
            raise AdminError(S.NOT_FOUND, no_topic(request.name) if request.name else
                             f"topic id {uuid.UUID(bytes=request.topic_id)} does not exist")
        if res.error is not ErrorCode.none:
            raise KafkaError(res.error, res.message or "")
        return topics.DeleteTopicResponse(topic=meta.Topic(
            name=res.name or "", topic_id=res.topic_id.bytes if res.topic_id else b""))

    @rpc_errors
    async def ListTopics(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        image = self.node.metadata
        return topics.ListTopicsResponse(topics=[
            topic_summary(image, image.topics_by_name[name])
            for name in sorted(image.topics_by_name)
            if request.include_internal or name not in INTERNAL_TOPICS
        ])

    @rpc_errors
    async def DescribeTopics(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        image = self.node.metadata
        if request.names:
            chosen = [require_topic(self.node, n) for n in dict.fromkeys(request.names)]
        else:
            chosen = [image.topics_by_name[n] for n in sorted(image.topics_by_name)
                      if request.include_internal or n not in INTERNAL_TOPICS]
        described = [topic_description(self.node, t) for t in chosen]
        await self._other_workers_offsets(described)
        if self.forwarder is not None and not self.forwarder.is_forwarded(context):
            await self._leaders_offsets(described, context)
        return topics.DescribeTopicsResponse(topics=described)

    async def _other_workers_offsets(self, described: list[Any]) -> None:
        """A broker of several workers (skiff.broker.workers): the offsets of the partitions
        this broker leads in its other processes, asked of their owners."""
        router = self.node.replicas.shard_router
        if router is None:
            return
        wanted = {(td.topic.name, pd.partition.partition_id): pd
                  for td in described for pd in td.partitions
                  if not pd.HasField("high_watermark")
                  and pd.partition.leader == self.node.node_id}
        if not wanted:
            return
        for key, (start, hw, end) in (await router.partition_offsets(list(wanted))).items():
            pd = wanted[key]
            pd.log_start_offset, pd.high_watermark, pd.log_end_offset = start, hw, end

    async def _leaders_offsets(self, described: list[Any],
                               context: grpc.aio.ServicerContext) -> None:
        """Fill in the log start, high watermark and log end of partitions this node does
        not lead by asking each leader's admin listener (its DescribeTopics, marked as
        forwarded so that it answers for itself only); a leader that does not answer within
        PEER_TIMEOUT_S leaves its partitions' offsets unset ("-")."""
        assert self.forwarder is not None
        missing: dict[int, dict[tuple[str, int], Any]] = {}
        for td in described:
            for pd in td.partitions:
                leader = pd.partition.leader
                if not pd.HasField("high_watermark") and leader >= 0 \
                        and leader != self.node.node_id:
                    missing.setdefault(leader, {})[
                        (td.topic.name, pd.partition.partition_id)] = pd
        if not missing:
            return
        address_of = admin_endpoint_of(self.node)
        passed = tuple((k, v) for k, v in (context.invocation_metadata() or ())
                       if k in _AUTH_KEYS)
        forwarder = self.forwarder

        async def ask(leader: int, wanted: dict[tuple[str, int], Any]) -> None:
            address = address_of(leader)
            if address is None:
                return
            names = sorted({t for t, _ in wanted})
            try:
                resp = await forwarder.call(address, _DESCRIBE_TOPICS,
                                            topics.DescribeTopicsRequest(names=names),
                                            PEER_TIMEOUT_S, passed)
            except AdminError as exc:
                log.info("describe_topics_leader_unreachable", leader=leader,
                         reason=exc.message)
                return
            for t in resp.topics:
                for theirs in t.partitions:
                    ours = wanted.get((t.topic.name, theirs.partition.partition_id))
                    if ours is not None and theirs.HasField("high_watermark") \
                            and theirs.partition.leader == leader:
                        ours.high_watermark = theirs.high_watermark
                        ours.log_start_offset = theirs.log_start_offset
                        ours.log_end_offset = theirs.log_end_offset

        await asyncio.gather(*(ask(b, w) for b, w in missing.items()))

    @rpc_errors
    @forwards_writes(_SERVICE)
    async def CreatePartitions(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        t = require_topic(self.node, request.topic)
        current = t.num_partitions
        if request.total_count <= current:
            raise AdminError(S.INVALID_ARGUMENT,
                             f"topic '{t.name}' has {current} partitions; the new count "
                             f"{request.total_count} must be larger (partitions cannot be "
                             "removed)")
        manual = _assignments(request.assignments)
        assignments = None
        if manual:
            wanted = list(range(current, request.total_count))
            if sorted(manual) != wanted:
                raise AdminError(S.INVALID_ARGUMENT,
                                 f"assignments must cover exactly the new partitions {wanted}")
            assignments = [manual[i] for i in wanted]
        [res] = await self.node.controller.create_partitions(
            [CreatePartitionsTopic(t.name, request.total_count, assignments)],
            validate_only=request.validate_only)
        if res.error is not ErrorCode.none:
            raise KafkaError(res.error, res.message or "")
        after = self.node.metadata.topic(t.name) or t
        return topics.CreatePartitionsResponse(topic=topic_description(self.node, after))


__all__ = ["TopicService", "require_topic", "topic_record"]
