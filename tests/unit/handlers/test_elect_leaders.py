"""ElectLeaders v0-2 through the real controller service."""

from __future__ import annotations

import asyncio
import datetime
import importlib
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.controller.requests import CreatableTopic
from broker.errors import KafkaError
from broker.handlers import elect_leaders
from broker.protocol.kio_build import build
from tests.unit.handlers.conftest import NODE_ID, TestNode, make_ctx, roundtrip

VERSIONS = range(0, 3)


def request(v: int, partitions: dict[str, list[int]] | None, election_type: int = 0) -> Any:
    m = importlib.import_module(f"kio.schema.elect_leaders.v{v}.request")
    return build(m.ElectLeadersRequest, election_type=election_type,
                 topic_partitions=None if partitions is None else tuple(
                     build(m.TopicPartitions, topic=t, partitions=tuple(ps))
                     for t, ps in partitions.items()),
                 timeout=datetime.timedelta(seconds=5))


def call(node: TestNode, v: int, req: Any) -> Any:
    resp = asyncio.run(elect_leaders.handle(node, make_ctx(43, v), req))
    assert int(resp.__version__) == v
    assert roundtrip(resp) == resp
    return resp


def results(resp: Any) -> list[tuple[str, int, ErrorCode]]:
    return [(r.topic, int(p.partition_id), p.error_code)
            for r in resp.replica_election_results for p in r.partition_result]


def create(node: TestNode, name: str, assignment: list[list[int]]) -> None:
    [res] = asyncio.run(node.controller.create_topics([CreatableTopic(
        name, assignments={i: a for i, a in enumerate(assignment)})]))
    assert res.error is ErrorCode.none, res


@pytest.mark.parametrize("v", VERSIONS)
def test_preferred_leader_already_leads(node: TestNode, v: int) -> None:
    asyncio.run(node.register(2))
    create(node, "led", [[2, NODE_ID]])
    resp = call(node, v, request(v, {"led": [0]}))
    assert results(resp) == [("led", 0, ErrorCode.election_not_needed)]
    assert node.topic("led").partitions[0].leader == 2


@pytest.mark.parametrize("v", VERSIONS)
def test_preferred_replica_out_of_the_isr_is_not_available(node: TestNode, v: int) -> None:
    asyncio.run(node.register(2))
    create(node, "moved", [[2, NODE_ID]])
    asyncio.run(node.fence(2))
    assert node.topic("moved").partitions[0].leader == NODE_ID
    resp = call(node, v, request(v, {"moved": [0]}))
    assert results(resp) == [("moved", 0, ErrorCode.preferred_leader_not_available)]


@pytest.mark.parametrize("v", VERSIONS)
def test_unknown_partition(node: TestNode, v: int) -> None:
    resp = call(node, v, request(v, {"nope": [0]}))
    assert results(resp) == [("nope", 0, ErrorCode.unknown_topic_or_partition)]


@pytest.mark.parametrize("v", [1, 2])
def test_unknown_election_type_is_an_invalid_request(node: TestNode, v: int) -> None:
    resp = call(node, v, request(v, {"x": [0]}, election_type=7))
    assert resp.error_code is ErrorCode.invalid_request
    assert results(resp) == []


@pytest.mark.parametrize("v", [1, 2])
def test_null_partitions_elects_everywhere(node: TestNode, v: int) -> None:
    asyncio.run(node.register(2))
    create(node, "a", [[2, NODE_ID], [NODE_ID, 2]])
    resp = call(node, v, request(v, None))
    assert resp.error_code is ErrorCode.none
    assert all(code is ErrorCode.election_not_needed for _, _, code in results(resp))


@pytest.mark.parametrize("v", VERSIONS)
def test_a_controller_out_of_reach_fails_the_request(node: TestNode, v: int) -> None:
    async def refuse(election_type: Any, partitions: Any) -> list[Any]:
        raise KafkaError(ErrorCode.request_timed_out, "controller 3 did not answer in time")

    node.controller.elect_leaders = refuse  # type: ignore[method-assign]
    resp = call(node, v, request(v, {"a": [0, 1], "b": [0]}))
    if v == 0:  # no top-level error in v0: each partition carries it
        assert results(resp) == [("a", 0, ErrorCode.request_timed_out),
                                 ("a", 1, ErrorCode.request_timed_out),
                                 ("b", 0, ErrorCode.request_timed_out)]
    else:
        assert resp.error_code is ErrorCode.request_timed_out
        assert results(resp) == []
