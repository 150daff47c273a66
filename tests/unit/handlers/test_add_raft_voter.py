"""AddRaftVoter (API 80) on the broker listener: the node's ControllerChannel sends it on to
the quorum leader and the leader's answer comes back as it is; when no controller answers as
the leader, the answer carries the error. The real forwarding across processes, with Kafka's
own kafka-metadata-quorum add-controller, is in tests/compat/kafka/test_tools_quorum.py."""

from __future__ import annotations

import asyncio
import datetime
import uuid
from types import SimpleNamespace
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32, i32Timedelta, u16

from broker.errors import KafkaError
from broker.handlers import add_raft_voter
from broker.handlers._authz import CLUSTER_CHECKS
from broker.protocol.api import BROKER_APIS, request_schema
from tests.unit.handlers.conftest import make_ctx, roundtrip


def request(v: int, timeout_ms: int = 3000) -> Any:
    m: Any = __import__(f"kio.schema.add_raft_voter.v{v}.request", fromlist=["x"])
    fields: dict[str, Any] = dict(
        cluster_id="c", timeout=i32Timedelta.parse(datetime.timedelta(milliseconds=timeout_ms)),
        voter_id=i32(2), voter_directory_id=uuid.uuid4(),
        listeners=(m.Listener(name="CONTROLLER", host="127.0.0.1", port=u16(9093)),))
    if v >= 1:
        fields["ack_when_committed"] = True
    return m.AddRaftVoterRequest(**fields)


def test_advertised_and_needs_alter_on_the_cluster() -> None:
    r = BROKER_APIS.get(80)
    assert r is not None and (r.min_version, r.max_version) == (0, 1)
    assert CLUSTER_CHECKS[80].name == "ALTER"


@pytest.mark.parametrize("v", [0, 1])
def test_the_leaders_answer_comes_back_as_it_is(v: int) -> None:
    assert request_schema(80, v) is type(request(v))
    answer = object()
    sent: list[tuple[int, int, Any, float]] = []

    async def forward(api_key: int, version: int, req: Any, timeout_s: float) -> Any:
        sent.append((api_key, version, req, timeout_s))
        return answer

    node: Any = SimpleNamespace(controller=SimpleNamespace(voter_change=forward))
    req = request(v, timeout_ms=3000)
    assert asyncio.run(add_raft_voter.handle(node, make_ctx(80, v), req)) is answer
    # the request's own timeout, and a little longer for the leader's answer to come back
    assert sent == [(80, v, req, 3.0 + add_raft_voter.FORWARD_GRACE_S)]


@pytest.mark.parametrize("v", [0, 1])
def test_no_leader_answers_with_the_error(v: int) -> None:
    async def forward(api_key: int, version: int, req: Any, timeout_s: float) -> Any:
        raise KafkaError(ErrorCode.not_leader_or_follower, "no controller answered as leader")

    node: Any = SimpleNamespace(controller=SimpleNamespace(voter_change=forward))
    resp = asyncio.run(add_raft_voter.handle(node, make_ctx(80, v), request(v)))
    assert int(resp.__version__) == v and roundtrip(resp) == resp
    assert resp.error_code is ErrorCode.not_leader_or_follower
    assert resp.error_message == "no controller answered as leader"
