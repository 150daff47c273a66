"""Share groups (KIP-932) with Apache Kafka 4.4's Java KafkaShareConsumer against one Skiff
node (tests/java/src/skiff/compat/share/ShareCases.java).

The module's node runs with 2 s record locks (group.share.record.lock.duration.ms, within a
lowered group.share.min.record.lock.duration.ms) and a delivery count limit of 3, so lock
expiry and archiving are seen in seconds. share.version is upgraded to 1 through the Java
Admin client first (a dev node is formatted at 4.1, where share groups are off).

- four consumers on one partition, every record ACCEPTed (implicit acknowledgement): the
  records each gets are disjoint, and together they are every record, once;
- explicit acknowledgement: RELEASE redelivers (delivery count 2, then 3, then the record is
  archived at the limit), REJECT archives, ACCEPT is never redelivered, and a record left
  unacknowledged is redelivered with delivery count 2 once its lock expires.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.kafka_ref import run_program
from tests.support.node import SkiffNode, started_node
from tests.support.records import unique_topic

pytestmark = [pytest.mark.timeout(300)]

PROGRAM = "skiff.compat.share.ShareCases"
LOCK_MS = 2000
DELIVERY_LIMIT = 3
CONFIG = {
    "SKIFF_GROUP_SHARE_RECORD_LOCK_DURATION_MS": str(LOCK_MS),
    "SKIFF_GROUP_SHARE_MIN_RECORD_LOCK_DURATION_MS": "1000",
    "SKIFF_GROUP_SHARE_DELIVERY_COUNT_LIMIT": str(DELIVERY_LIMIT),
}


def _run(node: SkiffNode, *args: str) -> dict[str, Any]:
    proc = run_program(PROGRAM, node.bootstrap, *args, timeout=200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert lines, proc.stdout[-3000:] + proc.stderr[-3000:]
    result: dict[str, Any] = json.loads(lines[-1])
    return result


@pytest.fixture(scope="module")
def share_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SkiffNode]:
    node = started_node(Path(tmp_path_factory.mktemp("share-node")), config_env=CONFIG)
    try:
        assert _run(node, "enable") == {"share.version": 1}
        yield node
    finally:
        node.close()


def test_four_consumers_get_disjoint_records_each_once(share_node: SkiffNode) -> None:
    count = 200
    result = _run(share_node, "disjoint", unique_topic("share-disjoint"), "share-disjoint-g",
                  str(count))
    per_consumer = [list(c) for c in result["consumers"]]
    everything = [o for c in per_consumer for o in c]
    assert sorted(everything) == list(range(count)), "every record exactly once"
    for i, a in enumerate(per_consumer):
        for b in per_consumer[i + 1:]:
            assert not set(a) & set(b)
    # the records were shared: more than one consumer got some
    assert sum(1 for c in per_consumer if c) >= 2, [len(c) for c in per_consumer]


def test_explicit_acknowledgements(share_node: SkiffNode) -> None:
    watch_ms = 3 * LOCK_MS
    result = _run(share_node, "explicit", unique_topic("share-explicit"), "share-explicit-g",
                  str(watch_ms))
    assert result["c1_commit_errors"] == 0
    deliveries = [(d["consumer"], d["offset"], d["count"]) for d in result["deliveries"]]
    first = [d for d in deliveries if d[0] == "c1"]
    assert first == [("c1", o, 1) for o in range(4)]
    later = [(o, n) for c, o, n in deliveries if c == "c2"]
    # ACCEPTed (0) and REJECTed (2) records are never delivered again
    assert all(o not in (0, 2) for o, _ in later), later
    # RELEASE redelivers with a rising count; at the limit the record is archived
    assert [n for o, n in later if o == 1] == list(range(2, DELIVERY_LIMIT + 1)), later
    # the record c1 held without acknowledging comes back once its lock expired
    assert [n for o, n in later if o == 3] == [2], later
