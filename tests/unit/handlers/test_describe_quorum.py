"""DescribeQuorum (API 55) on the broker listener: the node's ControllerChannel sends it to
the quorum leader and the answer comes back as it is; when no controller answers as the
leader, the error is at the top of the answer. The real forwarding across processes is in
tests/integration/test_describe_quorum_broker.py."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.handlers import describe_quorum
from broker.protocol.api import request_schema
from tests.unit.handlers.conftest import make_ctx, roundtrip


def request(v: int) -> Any:
    m: Any = __import__(f"kio.schema.describe_quorum.v{v}.request", fromlist=["x"])
    return m.DescribeQuorumRequest(topics=(m.TopicData(
        topic_name="__cluster_metadata", partitions=(m.PartitionData(partition_index=0),)),))


@pytest.mark.parametrize("v", [0, 1, 2])
def test_the_leaders_answer_comes_back_as_it_is(v: int) -> None:
    assert request_schema(55, v) is type(request(v))
    answer = object()
    sent: list[tuple[Any, int]] = []

    async def forward(req: Any, version: int) -> Any:
        sent.append((req, version))
        return answer

    node: Any = SimpleNamespace(controller=SimpleNamespace(describe_quorum=forward))
    req = request(v)
    assert asyncio.run(describe_quorum.handle(node, make_ctx(55, v), req)) is answer
    assert sent == [(req, v)]


@pytest.mark.parametrize("v", [0, 1, 2])
def test_no_leader_answers_with_the_error_at_the_top(v: int) -> None:
    async def forward(req: Any, version: int) -> Any:
        raise KafkaError(ErrorCode.not_leader_or_follower, "no controller answered as leader")

    node: Any = SimpleNamespace(controller=SimpleNamespace(describe_quorum=forward))
    resp = asyncio.run(describe_quorum.handle(node, make_ctx(55, v), request(v)))
    assert int(resp.__version__) == v and roundtrip(resp) == resp
    assert resp.error_code is ErrorCode.not_leader_or_follower and resp.topics == ()
