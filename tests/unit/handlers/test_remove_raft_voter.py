"""RemoveRaftVoter (API 81) on the broker listener: sent on to the quorum leader through the
node's ControllerChannel; the real thing, with Kafka's kafka-metadata-quorum
remove-controller, is in tests/compat/kafka/test_tools_quorum.py."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.remove_raft_voter.v0.request import RemoveRaftVoterRequest
from kio.static.primitive import i32

from broker.errors import KafkaError
from broker.handlers import remove_raft_voter
from broker.handlers._authz import CLUSTER_CHECKS
from broker.protocol.api import BROKER_APIS
from tests.unit.handlers.conftest import make_ctx, roundtrip


def request() -> Any:
    return RemoveRaftVoterRequest(cluster_id=None, voter_id=i32(3),
                                  voter_directory_id=uuid.uuid4())


def test_advertised_and_needs_alter_on_the_cluster() -> None:
    r = BROKER_APIS.get(81)
    assert r is not None and (r.min_version, r.max_version) == (0, 0)
    assert CLUSTER_CHECKS[81].name == "ALTER"


def test_the_leaders_answer_comes_back_as_it_is() -> None:
    answer = object()
    sent: list[tuple[int, int, Any, float]] = []

    async def forward(api_key: int, version: int, req: Any, timeout_s: float) -> Any:
        sent.append((api_key, version, req, timeout_s))
        return answer

    node: Any = SimpleNamespace(controller=SimpleNamespace(voter_change=forward))
    req = request()
    assert asyncio.run(remove_raft_voter.handle(node, make_ctx(81, 0), req)) is answer
    assert sent == [(81, 0, req, remove_raft_voter.VOTER_CHANGE_TIMEOUT_S)]


def test_voter_not_found_and_timeouts_come_back_as_errors() -> None:
    async def forward(api_key: int, version: int, req: Any, timeout_s: float) -> Any:
        raise KafkaError(ErrorCode.request_timed_out, "controller 1: TimeoutError()")

    node: Any = SimpleNamespace(controller=SimpleNamespace(voter_change=forward))
    resp = asyncio.run(remove_raft_voter.handle(node, make_ctx(81, 0), request()))
    assert roundtrip(resp) == resp
    assert resp.error_code is ErrorCode.request_timed_out
