"""The share-group handlers (KIP-932) in process over real logs: ShareGroupHeartbeat,
ShareFetch, ShareAcknowledge, ShareGroupDescribe, ListGroups and FindCoordinator's share key
type, with kio requests at Kafka 4.4's versions and every answer encoded at its version."""

from __future__ import annotations

import asyncio
import datetime
import uuid
from dataclasses import replace
from typing import Any

import pytest
from group_node import (  # noqa: F401
    GroupNode,
    anyio_backend_fixture,
    ctx,
    encodes,
    node_fixture,
    ready,
    request,
    request_class,
)
from kio.schema.errors import ErrorCode

from broker.handlers import (
    find_coordinator,
    list_groups,
    share_acknowledge,
    share_fetch,
    share_group_describe,
    share_group_heartbeat,
)
from broker.protocol.kafka_uuid import uuid_to_kafka
from broker.protocol.records import Record, build_batch, decode_records, iter_batches

pytestmark = pytest.mark.anyio
ACCEPT, RELEASE, REJECT = 1, 2, 3


def enable_share_groups(node: GroupNode, level: int = 1) -> None:
    image = node.publisher.image
    node.publisher.load_snapshot(replace(image, offset=image.offset + 1, features={
        **image.features, "share.version": level}))


async def heartbeat(node: GroupNode, member: str, epoch: int,
                    names: tuple[str, ...] | None = ("t",)) -> Any:
    req = request("share_group_heartbeat", 1, "ShareGroupHeartbeatRequest", group_id="g",
                  member_id=member, member_epoch=epoch, rack_id=None,
                  subscribed_topic_names=names)
    return encodes(await share_group_heartbeat.handle(node, ctx(76, 1, client_id="app"), req))


def _acks(version: int, api: str, tid: uuid.UUID,
          acks: tuple[tuple[int, int, tuple[int, ...]], ...]) -> Any:
    batch = request_class(api, version, "AcknowledgementBatch")
    return tuple(batch(first_offset=f, last_offset=last, acknowledge_types=types)
                 for f, last, types in acks)


async def fetch(node: GroupNode, tid: uuid.UUID, epoch: int, *, version: int = 2,
                acks: tuple[tuple[int, int, tuple[int, ...]], ...] = (), wait_ms: int = 0,
                renew: bool = False, member: str = "m1") -> Any:
    part = request_class("share_fetch", version, "FetchPartition")
    topic = request_class("share_fetch", version, "FetchTopic")
    req = request(
        "share_fetch", version, "ShareFetchRequest", group_id="g", member_id=member,
        share_session_epoch=epoch, max_wait=datetime.timedelta(milliseconds=wait_ms),
        min_bytes=1, max_bytes=1 << 20, max_records=500, batch_size=500,
        share_acquire_mode=0, is_renew_ack=renew,
        topics=(topic(topic_id=tid, partitions=(part(
            partition_index=0,
            acknowledgement_batches=_acks(version, "share_fetch", tid, acks)),)),),
        forgotten_topics_data=())
    return encodes(await share_fetch.handle(node, ctx(78, version), req))


async def acknowledge(node: GroupNode, tid: uuid.UUID, epoch: int,
                      acks: tuple[tuple[int, int, tuple[int, ...]], ...], *,
                      version: int = 2, renew: bool = False) -> Any:
    part = request_class("share_acknowledge", version, "AcknowledgePartition")
    topic = request_class("share_acknowledge", version, "AcknowledgeTopic")
    req = request(
        "share_acknowledge", version, "ShareAcknowledgeRequest", group_id="g", member_id="m1",
        share_session_epoch=epoch, is_renew_ack=renew,
        topics=(topic(topic_id=tid, partitions=(part(
            partition_index=0,
            acknowledgement_batches=_acks(version, "share_acknowledge", tid, acks)),)),))
    return encodes(await share_acknowledge.handle(node, ctx(79, version), req))


async def produce(node: GroupNode, values: list[bytes]) -> None:
    batch = build_batch([Record(offset=i, timestamp=0, key=None, value=v, headers=())
                         for i, v in enumerate(values)])
    out = await node.replicas.append({("t", 0): batch}, required_acks=-1, timeout_ms=2000)
    assert not isinstance(out[("t", 0)], Exception), out


def acquired(resp: Any) -> list[tuple[int, int, int]]:
    return [(r.first_offset, r.last_offset, r.delivery_count)
            for t in resp.responses for p in t.partitions for r in p.acquired_records]


async def test_disabled_without_share_version(node: GroupNode) -> None:
    enable_share_groups(node, 0)
    node.add_topic("t", 1)
    resp = await heartbeat(node, "m1", 0)
    assert resp.error_code is ErrorCode.unsupported_version
    assert "share.version" in (resp.error_message or "")
    tid = node.metadata.topic("t").topic_id
    assert (await fetch(node, tid, 0)).error_code is ErrorCode.unsupported_version


@pytest.mark.parametrize("version", [1, 2])
async def test_fetch_acknowledge_and_sessions(node: GroupNode, version: int) -> None:
    enable_share_groups(node)
    node.add_topic("t", 1)
    tid = node.metadata.topic("t").topic_id
    await ready(node)
    hb = await heartbeat(node, "m1", 0)
    assert hb.error_code is ErrorCode.none and hb.member_epoch == 1
    assert [(tp.topic_id, tp.partitions) for tp in hb.assignment.topic_partitions] == [
        (tid, (0,))]
    # the session opens; share.auto.offset.reset latest: the share-partition starts at 0,
    # the log end, so the records produced next are delivered
    first = await fetch(node, tid, 0, version=version)
    assert first.error_code is ErrorCode.none and acquired(first) == []
    assert first.acquisition_lock_timeout == datetime.timedelta(seconds=30)
    await produce(node, [b"a", b"b", b"c"])
    got = await fetch(node, tid, 1, version=version, wait_ms=2000)
    assert acquired(got) == [(0, 2, 1)]
    [part] = got.responses[0].partitions
    assert len(part.records) > 0 and part.current_leader.leader_id == 1
    # ACCEPT 0, RELEASE 1 piggybacked: 1 comes back at once with delivery count 2
    got = await fetch(node, tid, 2, version=version, acks=((0, 0, (ACCEPT,)), (1, 1, (RELEASE,))))
    [part] = got.responses[0].partitions
    assert part.acknowledge_error_code == 0
    assert acquired(got) == [(1, 1, 2)]
    # REJECT 1 and 2 through ShareAcknowledge
    ack = await acknowledge(node, tid, 3, ((1, 2, (REJECT,)),), version=version)
    assert ack.error_code is ErrorCode.none
    assert ack.responses[0].partitions[0].error_code is ErrorCode.none
    # the same epoch again: refused; an ACCEPTed record cannot be acknowledged again
    again = await acknowledge(node, tid, 3, ((0, 0, (ACCEPT,)),), version=version)
    assert again.error_code is ErrorCode.invalid_share_session_epoch
    stale = await acknowledge(node, tid, 4, ((0, 0, (ACCEPT,)),), version=version)
    assert stale.responses[0].partitions[0].error_code is ErrorCode.invalid_record_state
    # nothing is left to deliver
    assert acquired(await fetch(node, tid, 5, version=version)) == []
    # opening a session with acknowledgements is refused; an unknown member has none
    assert (await fetch(node, tid, 0, version=version, acks=((0, 0, (ACCEPT,)),))
            ).error_code is ErrorCode.invalid_request
    assert (await fetch(node, tid, 3, version=version, member="m2")
            ).error_code is ErrorCode.share_session_not_found
    # the final epoch closes the session
    assert (await fetch(node, tid, -1, version=version)).error_code is ErrorCode.none
    assert (await fetch(node, tid, 7, version=version)
            ).error_code is ErrorCode.share_session_not_found


async def test_renew_and_close_release(node: GroupNode) -> None:
    enable_share_groups(node)
    node.add_topic("t", 1)
    tid = node.metadata.topic("t").topic_id
    await ready(node)
    await heartbeat(node, "m1", 0)
    await fetch(node, tid, 0)
    await produce(node, [b"a", b"b"])
    assert acquired(await fetch(node, tid, 1, wait_ms=2000)) == [(0, 1, 1)]
    # RENEW needs IsRenewAck (v2), and a renewing fetch acquires nothing
    bad = await fetch(node, tid, 2, acks=((0, 0, (4,)),))
    assert bad.error_code is ErrorCode.invalid_request
    renewed = await fetch(node, tid, 2, acks=((0, 1, (4,)),), renew=True)
    assert renewed.error_code is ErrorCode.none and acquired(renewed) == []
    assert renewed.responses[0].partitions[0].acknowledge_error_code == 0
    # closing the session releases what the member holds: a new member gets them again
    closed = await acknowledge(node, tid, -1, ())
    assert closed.error_code is ErrorCode.none
    await heartbeat(node, "m2", 0)
    assert acquired(await fetch(node, tid, 0, member="m2")) == [(0, 1, 2)]


async def test_renew_refused_when_the_group_disables_it(node: GroupNode) -> None:
    """share.renew.acknowledge.enable=false: a RENEW of held records is INVALID_RECORD_STATE
    with Kafka's message (its SharePartition checks the records' state first, so a RENEW
    of records not held is refused with no such message), and the records stay held."""
    from broker.metadata.records import RESOURCE_GROUP

    enable_share_groups(node)
    image = node.publisher.image
    node.publisher.load_snapshot(replace(image, offset=image.offset + 1, configs={
        **image.configs, (RESOURCE_GROUP, "g"): {"share.renew.acknowledge.enable": "false"}}))
    node.add_topic("t", 1)
    tid = node.metadata.topic("t").topic_id
    await ready(node)
    await heartbeat(node, "m1", 0)
    await fetch(node, tid, 0)
    await produce(node, [b"a", b"b"])
    assert acquired(await fetch(node, tid, 1, wait_ms=2000)) == [(0, 1, 1)]
    refused = await acknowledge(node, tid, 2, ((0, 1, (4,)),), renew=True)
    [part] = refused.responses[0].partitions
    assert part.error_code is ErrorCode.invalid_record_state
    assert part.error_message == "Renewing acquisition locks is not enabled for the group."
    not_held = await acknowledge(node, tid, 3, ((5, 5, (4,)),), renew=True)
    [part] = not_held.responses[0].partitions
    assert part.error_code is ErrorCode.invalid_record_state and part.error_message is None
    accepted = await acknowledge(node, tid, 4, ((0, 1, (ACCEPT,)),))
    assert accepted.responses[0].partitions[0].error_code is ErrorCode.none


async def test_describe_list_and_find_coordinator(node: GroupNode) -> None:
    enable_share_groups(node)
    node.add_topic("t", 2)
    await ready(node)
    a = await heartbeat(node, "m1", 0)
    b = await heartbeat(node, "m2", 0)
    assert (a.member_epoch, b.member_epoch) == (1, 2)
    a = await heartbeat(node, "m1", 1, None)
    assert a.member_epoch == 2
    [tp] = a.assignment.topic_partitions
    assert tp.partitions == (0,)
    assert (await heartbeat(node, "m1", 7, None)).error_code is ErrorCode.fenced_member_epoch
    req = request("share_group_describe", 1, "ShareGroupDescribeRequest",
                  group_ids=("g", "none"), include_authorized_operations=False)
    resp = encodes(await share_group_describe.handle(node, ctx(77, 1), req))
    g, none = resp.groups
    assert (g.error_code, g.group_state, g.group_epoch, g.assignor_name) == (
        ErrorCode.none, "Stable", 2, "simple")
    assert [(m.member_id, m.client_id, [(t.topic_name, t.partitions)
                                        for t in m.assignment.topic_partitions])
            for m in g.members] == [("m1", "app", [("t", (0,))]), ("m2", "app", [("t", (1,))])]
    assert none.error_code is ErrorCode.group_id_not_found
    lg = request("list_groups", 5, "ListGroupsRequest", states_filter=(), types_filter=())
    listed = encodes(await list_groups.handle(node, ctx(16, 5), lg))
    assert [(x.group_id, x.group_type, x.group_state) for x in listed.groups
            if x.group_type == "share"] == [("g", "share", "Stable")]
    left = await heartbeat(node, "m2", 2, None)
    assert (left.error_code, left.member_epoch) == (ErrorCode.none, 2)
    left = await heartbeat(node, "m2", -1, None)
    assert (left.error_code, left.member_epoch) == (ErrorCode.none, -1)
    # key type 2: the share coordinator of "groupId:topicId:partition", the leader of its
    # __share_group_state partition (created at the first ask); a malformed key is refused
    fc = request("find_coordinator", 6, "FindCoordinatorRequest", key_type=2,
                 coordinator_keys=(f"g:{uuid_to_kafka(uuid.uuid4())}:0", "no-colons"))
    found = encodes(await find_coordinator.handle(node, ctx(10, 6), fc))
    assert [(c.error_code, c.node_id) for c in found.coordinators] == [
        (ErrorCode.none, 1), (ErrorCode.invalid_request, -1)]
    assert node.metadata.topic("__share_group_state") is not None


async def test_acknowledged_records_outlive_the_share_partitions_in_memory(
        node: GroupNode) -> None:
    """The share-partition's state is in the share coordinator: a broker that forgot every
    share-partition (a restart, a new leader) loads it again; nothing ACCEPTed or REJECTed
    is delivered again, the released and unacknowledged records are, their counts going
    on."""
    enable_share_groups(node)
    node.add_topic("t", 1)
    tid = node.metadata.topic("t").topic_id
    await ready(node)
    await heartbeat(node, "m1", 0)
    await fetch(node, tid, 0)
    await produce(node, [b"a", b"b", b"c", b"d", b"e"])
    assert acquired(await fetch(node, tid, 1, wait_ms=2000)) == [(0, 4, 1)]
    ack = await acknowledge(node, tid, 2, ((0, 2, (ACCEPT, REJECT, ACCEPT)),
                                           (3, 3, (RELEASE,))))
    assert ack.responses[0].partitions[0].error_code is ErrorCode.none
    node.share_groups = None  # the share-partitions and sessions in memory are gone
    await heartbeat(node, "m2", 0)
    assert acquired(await fetch(node, tid, 0, member="m2", wait_ms=2000)) == [
        (3, 4, 2)]


async def test_a_fetch_reads_the_log_a_chunk_at_a_time_up_to_its_records(
        node: GroupNode, monkeypatch: pytest.MonkeyPatch) -> None:
    """ShareFetch asks for MaxBytes (the Java consumer's fetch.max.bytes, 50 MiB) to take
    MaxRecords: the log is read a chunk at a time until the records are taken, and the
    answer holds every batch with an acquired record, across chunks."""
    from broker.share import shell

    monkeypatch.setattr(shell, "SHARE_READ_CHUNK_BYTES", 200)
    enable_share_groups(node)
    node.add_topic("t", 1)
    tid = node.metadata.topic("t").topic_id
    await ready(node)
    await heartbeat(node, "m1", 0)
    await fetch(node, tid, 0)
    reads: list[int] = []  # the size of each chunk read (seen where the shell trims it)
    real_trim = shell.whole_batches_length
    monkeypatch.setattr(shell, "whole_batches_length", lambda data: (
        reads.append(len(data)), real_trim(data))[1])
    for n in range(40):  # 40 batches of 20 records, ~300 B each
        batch = build_batch([Record(offset=i, timestamp=0, key=None, value=b"v%03d" % (n * 20 + i),
                                    headers=()) for i in range(20)], base_offset=0)
        out = await node.replicas.append({("t", 0): batch}, required_acks=-1, timeout_ms=2000)
        assert not isinstance(out[("t", 0)], Exception), out
    got = await fetch(node, tid, 1, wait_ms=2000)
    # 500 records in whole batches: 25 batches, read 200 bytes (one batch) at a time
    assert acquired(got) == [(0, 499, 1)]
    # each chunk asked for 200 bytes and got one whole batch (~300 B: a read always
    # holds its first batch)
    assert reads and {r for r in reads if r} == {len(batch)} and 25 <= len(reads) <= 26
    [part] = got.responses[0].partitions
    values = [r.value for _, b in iter_batches(part.records) for r in decode_records(b)]
    assert values == [b"v%03d" % i for i in range(500)]


async def test_acquire_time_and_state_writes_are_measured(node: GroupNode) -> None:
    """ShareGroupMetrics TopicPartitionsAcquireTimeMs: once per share fetch, ~0 while its
    share-partition has room, the whole wait when the in-flight window is full; the
    in-flight batches an acquisition makes; the share coordinator counts and times every
    state write (share-coordinator-metrics)."""
    from broker.metadata.records import RESOURCE_GROUP
    from broker.share.shell import share_service_of

    enable_share_groups(node)
    node.add_topic("t", 1)
    image = node.publisher.image
    node.publisher.load_snapshot(replace(image, offset=image.offset + 1, configs={
        **image.configs, (RESOURCE_GROUP, "g"): {"share.partition.max.record.locks": "2"}}))
    tid = node.metadata.topic("t").topic_id
    await ready(node)
    await heartbeat(node, "m1", 0)
    coordinator = node.share_coordinator.stats
    writes = coordinator.writes
    await fetch(node, tid, 0)
    assert coordinator.writes == writes + 1  # the share-partition's initial state
    assert coordinator.write_latency_count == coordinator.writes
    assert 0 < coordinator.write_latency_max <= coordinator.write_latency_sum
    await produce(node, [b"a", b"b", b"c"])
    assert acquired(await fetch(node, tid, 1, wait_ms=2000)) == [(0, 1, 1)]
    service = share_service_of(node)
    hist = service.stats.acquire_time["g"]
    assert hist.count == 2 and hist.sum < 200
    # the acquisition made one in-flight batch of 2 records (SharePartitionMetrics)
    sizes = service.stats.batch_sizes[("g", "t", 0)]
    assert (sizes.count, sizes.sum) == (1, 2)
    assert service.partitions[("g", "t", 0)].in_flight_batch_count() == 1
    # the window (2 records) is full: the fetch waits its whole max wait for room
    assert acquired(await fetch(node, tid, 2, wait_ms=300)) == []
    assert hist.count == 3 and hist.sum >= 250
    await acknowledge(node, tid, 3, ((0, 1, (ACCEPT,)),))
    assert coordinator.writes == writes + 2


async def test_rejected_and_exhausted_records_reach_the_dead_letter_topic(
        node: GroupNode) -> None:
    """share.version 2 with errors.deadletterqueue.topic.name (KIP-1191): a REJECTed record
    and one RELEASEd up to the delivery count limit are written to the dead-letter topic,
    with Kafka's headers and (copy.record.enable) the record's key and value, on partition
    (partition mod the topic's partition count); an ACCEPTed one is not."""
    from broker.metadata.records import RESOURCE_GROUP, RESOURCE_TOPIC
    from broker.share.shell import share_service_of

    enable_share_groups(node, level=2)
    node.add_topic("t", 1)
    node.add_topic("dlq.t", 2)
    image = node.publisher.image
    node.publisher.load_snapshot(replace(image, offset=image.offset + 1, configs={
        **image.configs,
        (RESOURCE_TOPIC, "dlq.t"): {"errors.deadletterqueue.group.enable": "true"},
        (RESOURCE_GROUP, "g"): {"errors.deadletterqueue.topic.name": "dlq.t",
                                "errors.deadletterqueue.copy.record.enable": "true",
                                "share.delivery.count.limit": "2"}}))
    tid = node.metadata.topic("t").topic_id
    await ready(node)
    await heartbeat(node, "m1", 0)
    await fetch(node, tid, 0)
    await produce(node, [b"a", b"b", b"c"])
    assert acquired(await fetch(node, tid, 1, wait_ms=2000)) == [(0, 2, 1)]
    got = await fetch(node, tid, 2, acks=((0, 0, (ACCEPT,)), (1, 1, (REJECT,)),
                                          (2, 2, (RELEASE,))))
    assert acquired(got) == [(2, 2, 2)]
    await acknowledge(node, tid, 3, ((2, 2, (RELEASE,)),))
    await share_service_of(node).dlq.drain()
    letters = node.replicas.leader_partition("dlq.t", 0).log.read_records(0)
    assert [(r.key, r.value) for r in letters] == [(None, b"b"), (None, b"c")]
    # ShareGroupMetrics' dead-letter meters: one produce request per archiving, none failed
    stats = share_service_of(node).stats
    assert (stats.dlq_records, stats.dlq_produces, stats.dlq_produce_failed) == (
        {"g": 2}, {"g": 2}, {})
    assert [dict((k, v.decode() if v else v) for k, v in r.headers) for r in letters] == [
        {"__dlq.errors.topic": "t", "__dlq.errors.partition": "0",
         "__dlq.errors.offset": str(offset), "__dlq.errors.group": "g",
         "__dlq.errors.delivery.count": str(count), "__dlq.errors.message": message}
        for offset, count, message in ((1, 1, "Offset rejected by client."),
                                       (2, 2, "Offset delivery count exceeded the threshold."))]
    assert node.replicas.leader_partition("dlq.t", 1).log.read_records(0) == []


async def test_no_dead_letters_without_share_version_2_or_an_enabled_topic(
        node: GroupNode) -> None:
    """At share.version 1, or when the topic does not set errors.deadletterqueue.group.enable,
    a REJECT archives the record and writes nothing."""
    from broker.metadata.records import RESOURCE_GROUP
    from broker.share.shell import share_service_of

    enable_share_groups(node, level=1)
    node.add_topic("t", 1)
    node.add_topic("dlq.t", 1)
    image = node.publisher.image
    node.publisher.load_snapshot(replace(image, offset=image.offset + 1, configs={
        **image.configs, (RESOURCE_GROUP, "g"): {"errors.deadletterqueue.topic.name": "dlq.t"}}))
    tid = node.metadata.topic("t").topic_id
    await ready(node)
    await heartbeat(node, "m1", 0)
    await fetch(node, tid, 0)
    await produce(node, [b"a", b"b"])
    assert acquired(await fetch(node, tid, 1, wait_ms=2000)) == [(0, 1, 1)]
    await acknowledge(node, tid, 2, ((0, 0, (REJECT,)),))
    enable_share_groups(node, level=2)  # the topic still does not allow it
    await acknowledge(node, tid, 3, ((1, 1, (REJECT,)),))
    await share_service_of(node).dlq.drain()
    assert node.replicas.leader_partition("dlq.t", 0).log.read_records(0) == []


async def test_a_missing_dead_letter_topic_is_created_only_when_the_cluster_allows_it(
        node: GroupNode) -> None:
    """A dead-letter topic that does not exist gets nothing while
    errors.deadletterqueue.auto.create.topics.enable is false (Kafka's default); once the
    cluster sets it (a dynamic broker config), the topic is created with
    errors.deadletterqueue.group.enable=true and CreateTime, and the next dead letter is
    written there. A name without the dlq. prefix is never used."""
    from broker.metadata.records import RESOURCE_BROKER, RESOURCE_GROUP
    from broker.share.shell import share_service_of

    enable_share_groups(node, level=2)
    node.add_topic("t", 1)
    image = node.publisher.image
    node.publisher.load_snapshot(replace(image, offset=image.offset + 1, configs={
        **image.configs,
        (RESOURCE_GROUP, "g"): {"errors.deadletterqueue.topic.name": "dlq.auto"}}))
    tid = node.metadata.topic("t").topic_id
    await ready(node)
    await heartbeat(node, "m1", 0)
    await fetch(node, tid, 0)
    await produce(node, [b"a", b"b", b"c"])
    assert acquired(await fetch(node, tid, 1, wait_ms=2000)) == [(0, 2, 1)]
    dlq = share_service_of(node).dlq
    await acknowledge(node, tid, 2, ((0, 0, (REJECT,)),))
    await dlq.drain()
    def created() -> list[Any]:
        return [c for c in node.controller.calls if not c.name.startswith("__")]

    assert node.metadata.topic("dlq.auto") is None and created() == []
    image = node.publisher.image
    node.publisher.load_snapshot(replace(image, offset=image.offset + 1, configs={
        **image.configs,
        (RESOURCE_BROKER, ""): {"errors.deadletterqueue.auto.create.topics.enable": "true"}}))
    await acknowledge(node, tid, 3, ((1, 1, (REJECT,)),))
    await dlq.drain()
    [asked] = created()
    assert asked.name == "dlq.auto" and dict(asked.configs) == {
        "errors.deadletterqueue.group.enable": "true", "message.timestamp.type": "CreateTime"}
    letters = node.replicas.leader_partition("dlq.auto", 0).log.read_records(0)
    assert [dict(r.headers)["__dlq.errors.offset"] for r in letters] == [b"1"]
    image = node.publisher.image
    node.publisher.load_snapshot(replace(image, offset=image.offset + 1, configs={
        **image.configs,
        (RESOURCE_GROUP, "g"): {"errors.deadletterqueue.topic.name": "auto"}}))
    await acknowledge(node, tid, 4, ((2, 2, (REJECT,)),))
    await dlq.drain()
    assert len(created()) == 1 and node.metadata.topic("auto") is None
    assert dlq.written == 1


async def test_the_group_moves_with_its_coordinator_partition(node: GroupNode) -> None:
    """Share-group records in __consumer_offsets: the share service forgets the groups of
    a partition the group coordinator no longer has, and takes them back, members, epochs
    and initialized partitions, from the records a new coordinator of it replayed."""
    enable_share_groups(node)
    node.add_topic("t", 2)
    await ready(node)
    assert (await heartbeat(node, "m1", 0)).member_epoch == 1
    svc = node.group_coordinator
    share = node.share_groups
    assert svc is not None and share is not None
    p, _ = svc.coordinator_for("g")
    part = node.replicas.get("__consumer_offsets", p)
    for _ in range(200):  # the records' write is not waited for by the heartbeat
        if part.high_watermark >= 5:
            break
        await asyncio.sleep(0.01)
    before = share.groups.groups["g"]
    svc.coordinators.pop(p)  # moved away
    assert "g" not in share.groups.groups
    fresh = svc.new_coordinator(p, 0, svc.runtime.now())  # and back: loaded again
    svc.replay(p, fresh, part.log, 0, part.high_watermark)
    svc.loaded(p, fresh, svc.runtime.now())
    svc.coordinators[p] = fresh
    after = share.groups.groups["g"]
    assert (after.group_epoch, after.assignment_epoch, after.initialized) == \
        (before.group_epoch, before.assignment_epoch, before.initialized)
    assert {m: (x.member_epoch, x.assignment) for m, x in after.members.items()} == \
        {m: (x.member_epoch, x.assignment) for m, x in before.members.items()}
    again = await heartbeat(node, "m1", 1, None)
    assert (again.error_code, again.member_epoch) == (ErrorCode.none, 1)
