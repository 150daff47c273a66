"""Consumer groups with kafkajs 2.2.4 (Node), classic protocol, eager: a group of 3 on a
6-partition topic, members in their own `node` processes (tests/compat/js/group_member.js),
ownership checked from kafkajs's GROUP_JOIN and REBALANCING events (groupsupport.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.compat import groupsupport as gs
from tests.support.node import SkiffNode
from tests.support.requires import tool_mark

JS_DIR = Path(__file__).parent / "js"
pytestmark = [
    pytest.mark.timeout(150),
    tool_mark("node", "Node.js runs kafkajs (tests/run.sh installs it)"),
    tool_mark("kafkajs", "run `npm install` in tests/compat/js (tests/run.sh does)",
              available=(JS_DIR / "node_modules" / "kafkajs").is_dir()),
]
CLIENT = gs.Client(gs.js_member, {"client": "kafkajs"}, eager=True)


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SkiffNode]:
    yield from gs.node_fixture(tmp_path_factory)


def test_join_leave_kill(node: SkiffNode) -> None:
    topic = gs.unique("members")
    gs.create_topic(node.bootstrap, topic)
    took = gs.run_membership(CLIENT, node.bootstrap, topic, gs.unique("members"))
    print(took)


def test_resume_at_committed_after_restart(node: SkiffNode) -> None:
    topic = gs.unique("restart")
    gs.create_topic(node.bootstrap, topic)
    gs.run_restart(CLIENT, node, topic, gs.unique("restart"))


# kafkajs 2.2.4 has no static membership: its consumer has no group.instance.id setting and
# always joins with a null GroupInstanceId, so there is no static-member scenario to drive.


def test_membership_survives_node_restart(node: SkiffNode) -> None:
    # the classic group (generation, members, assignments) is in its GroupMetadataValue and
    # is loaded Stable: members heartbeat on with their generation, nobody rejoins
    topic = gs.unique("survive")
    gs.create_topic(node.bootstrap, topic)
    gs.run_membership_survives_restart(CLIENT, node, topic, gs.unique("survive"), kill=True)
