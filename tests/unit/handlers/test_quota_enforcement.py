"""Client quotas enforced by the handlers: Produce and Fetch answer throttle_time_ms over
their byte rates (a throttled Fetch is empty, as Kafka's), a Fetch is sized to the consumer's
quota window, and CreateTopics/CreatePartitions/DeleteTopics count partitions against
controller_mutation_rate (KIP-599: THROTTLING_QUOTA_EXCEEDED for strict versions)."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from broker.controller.client_quota_control import QuotaAlteration, QuotaOp
from broker.handlers import create_partitions, create_topics, delete_topics
from broker.protocol.durations import to_ms
from broker.protocol.kio_build import build
from broker.quotas.core import entity
from broker.server.dispatch import NoResponse
from tests.unit.handlers.conftest import TestNode, make_ctx, run
from tests.unit.handlers.datapath import (
    BASE_TS,
    create,
    produce_answer,
    produce_ok,
    produce_request,
    records,
    schema_module,
)
from tests.unit.handlers.test_fetch import fetch_decoded, fetch_request

_EIGHT_DAYS_MS = 8 * 24 * 3600 * 1000  # past segment.ms's default (7 days)


async def _quota(node: TestNode, key: str, value: float, **who: str | None) -> None:
    [r] = await node.controller.alter_client_quotas(
        [QuotaAlteration(entity(**who), (QuotaOp(key, value),))])
    assert r.error is ErrorCode.none, r


def test_produce_over_its_byte_rate_is_throttled_but_appended(node: TestNode) -> None:
    async def go() -> None:
        await create(node, "t")
        # make_ctx's client id is "test-client"; no authentication: user ANONYMOUS
        await _quota(node, "producer_byte_rate", 100.0, user="ANONYMOUS")
        data = records(b"x" * 300)
        first = await produce_answer(node, 9, produce_request(9, "t", 0, data))
        assert first.responses[0].partition_responses[0].error_code is ErrorCode.none
        # 300 bytes over a 10 s minimum window: 30 B/s, within 100 B/s
        assert to_ms(first.throttle_time) == 0
        second = await produce_answer(node, 9, produce_request(9, "t", 0, records(
            b"y" * 2000)))
        assert second.responses[0].partition_responses[0].error_code is ErrorCode.none
        assert to_ms(second.throttle_time) > 0
        assert second.responses[0].partition_responses[0].base_offset == 1
        # acks=0: no answer, but the connection is still muted
        from broker.handlers import produce
        quiet = await produce.handle(node, make_ctx(0, 9),
                                     produce_request(9, "t", 0, records(b"z"), acks=0))
        assert isinstance(quiet, NoResponse) and quiet.throttle_ms > 0
    run(go())


def test_other_clients_are_not_held_by_a_quota_they_do_not_match(node: TestNode) -> None:
    async def go() -> None:
        await create(node, "t")
        await _quota(node, "producer_byte_rate", 10.0, client_id="someone-else")
        resp = await produce_answer(node, 9, produce_request(9, "t", 0, records(b"y" * 5000)))
        assert to_ms(resp.throttle_time) == 0
    run(go())


def test_fetch_is_sized_to_the_quota_window_then_throttled_empty(node: TestNode) -> None:
    async def go() -> None:
        await create(node, "t")
        # each batch in a segment of its own (timestamps more than segment.ms apart: a time
        # roll, as Kafka's), so an answer sized to the quota holds exactly one whole batch
        for i in range(20):
            await produce_ok(node, "t", records(b"v" * 1000, ts=BASE_TS + i * _EIGHT_DAYS_MS))
        # 150 B/s x 10 windows: one answer holds at most 1500 bytes (one batch of ~1.1 kB)
        await _quota(node, "consumer_byte_rate", 150.0, client_id="test-client")
        first = await fetch_decoded(node, 12, fetch_request(12, "t", 0))
        part = first.responses[0].partitions[0]
        assert part.error_code is ErrorCode.none and 0 < len(part.records) <= 1500
        assert to_ms(first.throttle_time) == 0
        second = await fetch_decoded(node, 12, fetch_request(12, "t", 1))
        assert to_ms(second.throttle_time) > 0
        assert second.responses == ()
    run(go())


def _create_partitions_request(version: int, names: list[str], count: int) -> Any:
    m = schema_module("create_partitions", version)
    return build(m.CreatePartitionsRequest, timeout=datetime.timedelta(seconds=5),
                 validate_only=False, topics=tuple(
                     build(m.CreatePartitionsTopic, name=n, count=count, assignments=None)
                     for n in names))


def test_create_partitions_strict_and_permissive(node: TestNode) -> None:
    async def go() -> None:
        for n in ("a", "b", "c", "d"):
            await create(node, n)
        await _quota(node, "controller_mutation_rate", 1.0, user=None)
        strict = await create_partitions.handle(
            node, make_ctx(37, 3), _create_partitions_request(3, ["a", "b"], 30))
        codes = [r.error_code for r in strict.results]
        # a: admitted (29 mutations take the rate over); b: refused
        assert codes == [ErrorCode.none, ErrorCode.throttling_quota_exceeded]
        assert strict.results[1].error_message == "The throttling quota has been exceeded."
        assert to_ms(strict.throttle_time) > 0
        assert node.topic("a").num_partitions == 30 and node.topic("b").num_partitions == 1
        # an older client does not know the error: both are done, the client is throttled
        permissive = await create_partitions.handle(
            node, make_ctx(37, 2), _create_partitions_request(2, ["c", "d"], 3))
        assert [r.error_code for r in permissive.results] == [ErrorCode.none] * 2
        assert to_ms(permissive.throttle_time) > 0
    run(go())


def test_create_and_delete_topics_count_partitions(node: TestNode) -> None:
    async def go() -> None:
        await _quota(node, "controller_mutation_rate", 1.0, client_id="test-client")
        m = schema_module("create_topics", 6)
        req = build(m.CreateTopicsRequest, timeout=datetime.timedelta(seconds=5),
                    validate_only=False, topics=tuple(
                        build(m.CreatableTopic, name=n, num_partitions=20,
                              replication_factor=1, assignments=(), configs=())
                        for n in ("x", "y")))
        resp = await create_topics.handle(node, make_ctx(19, 6), req)
        assert [t.error_code for t in resp.topics] == [
            ErrorCode.none, ErrorCode.throttling_quota_exceeded]
        d = schema_module("delete_topics", 5)
        dreq = build(d.DeleteTopicsRequest, timeout=datetime.timedelta(seconds=5),
                     topic_names=("x",))
        dresp = await delete_topics.handle(node, make_ctx(20, 5), dreq)
        assert dresp.responses[0].error_code is ErrorCode.throttling_quota_exceeded
        assert to_ms(dresp.throttle_time) > 0
        assert node.metadata.topic("x") is not None
        # v6 (Kafka 4.x clients), by name or by id, counts as well
        d6 = schema_module("delete_topics", 6)
        tid = node.metadata.topic("x").topic_id
        for state in (build(d6.DeleteTopicState, name=None, topic_id=tid),
                      build(d6.DeleteTopicState, name="x", topic_id=uuid.UUID(int=0))):
            d6resp = await delete_topics.handle(node, make_ctx(20, 6), build(
                d6.DeleteTopicsRequest, timeout=datetime.timedelta(seconds=5),
                topics=(state,)))
            assert [(r.name, r.error_code) for r in d6resp.responses] == [
                ("x", ErrorCode.throttling_quota_exceeded)]
            assert to_ms(d6resp.throttle_time) > 0
        assert node.metadata.topic("x") is not None
    run(go())


def test_request_time_quota_applies_only_where_a_quota_matches() -> None:
    from broker.handlers._quotas import RequestTimeQuota
    from broker.quotas.core import Quotas

    q = Quotas()
    current: dict[Any, Any] = {}
    rq = RequestTimeQuota(lambda: current, q.request)
    ctx = make_ctx(3, 12)
    assert not rq.applies(ctx)
    current = {entity(client_id="test-client"): {"request_percentage": 1.0}}
    assert rq.applies(ctx)
    assert not rq.applies(make_ctx(18, 3))  # ApiVersions is exempt
    # 50 ms of a 10 s minimum window is 0.5%: within 1%; 300 ms more is not
    assert rq.record(ctx, 0.05) == 0
    assert 0 < rq.record(ctx, 0.3) <= 1000  # capped at one window, as Kafka
