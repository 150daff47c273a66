"""Consumer groups with aiokafka 0.14 (eager round-robin assignor, asyncio), classic protocol: a
group of 3 on a 6-partition topic, members
in their own processes (so one can be killed with SIGKILL: no LeaveGroup), ownership checked
from the client's own ConsumerRebalanceListener callbacks (groupsupport.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.compat import groupsupport as gs
from tests.support.node import SkiffNode

pytestmark = pytest.mark.timeout(150)
CLIENT = gs.Client(gs.python_member, {"client": "aiokafka"}, eager=True)


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SkiffNode]:
    yield from gs.node_fixture(tmp_path_factory)


def test_join_leave_kill(node: SkiffNode) -> None:
    topic = gs.unique("members")
    gs.create_topic(node.bootstrap, topic)
    took = gs.run_membership(CLIENT, node.bootstrap, topic, gs.unique("members"))
    print(took)


def test_static_member_returns_without_rebalance(node: SkiffNode) -> None:
    topic = gs.unique("static")
    gs.create_topic(node.bootstrap, topic)
    gs.run_static(CLIENT, node.bootstrap, topic, gs.unique("static"), kill=True)


def test_resume_at_committed_after_restart(node: SkiffNode) -> None:
    topic = gs.unique("restart")
    gs.create_topic(node.bootstrap, topic)
    gs.run_restart(CLIENT, node, topic, gs.unique("restart"))


def test_membership_survives_node_restart(node: SkiffNode) -> None:
    # the classic group (generation, members, assignments) is in its GroupMetadataValue and
    # is loaded Stable: members heartbeat on with their generation, nobody rejoins
    topic = gs.unique("survive")
    gs.create_topic(node.bootstrap, topic)
    gs.run_membership_survives_restart(CLIENT, node, topic, gs.unique("survive"), kill=True)
