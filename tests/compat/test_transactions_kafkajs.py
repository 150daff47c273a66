"""kafkajs 2.2.4 transactional producers (driven through tests/compat/js/compat.js): commit
and abort as read_committed and read_uncommitted consumers (librdkafka) see them, and a
second producer with the same transactionalId fencing the first."""

from __future__ import annotations

import base64
import uuid
from pathlib import Path

import pytest

from broker.testing import admin as adm
from tests.compat.test_kafkajs import JS_DIR, js
from tests.compat.test_transactions_confluent import read
from tests.support.requires import tool_mark

pytestmark = [
    pytest.mark.timeout(180),
    tool_mark("node", "Node.js runs kafkajs (tests/run.sh installs it)"),
    tool_mark("kafkajs", "run `npm install` in tests/compat/js (tests/run.sh does)",
              available=(JS_DIR / "node_modules" / "kafkajs").is_dir()),
]


def b64(values: list[bytes]) -> list[str]:
    return [base64.b64encode(v).decode() for v in values]


def test_commit_and_abort(tmp_path: Path, bootstrap: str, topic_name: str) -> None:
    adm.create_topic(bootstrap, topic_name, partitions=1)
    ok = [b"ok-%d" % i for i in range(5)]
    bad = [b"bad-%d" % i for i in range(5)]
    js(tmp_path, "txn", bootstrap, transactionalId=f"js-{uuid.uuid4()}", transactions=[
        {"topic": topic_name, "values": b64(ok), "commit": True},
        {"topic": topic_name, "values": b64(bad), "commit": False},
        {"topic": topic_name, "values": b64([b"last"]), "commit": True},
    ])
    assert read(bootstrap, topic_name, 1, "read_committed") == [*ok, b"last"]
    assert read(bootstrap, topic_name, 1, "read_uncommitted") == [*ok, *bad, b"last"]


def test_zombie_is_fenced(tmp_path: Path, bootstrap: str, topic_name: str) -> None:
    adm.create_topic(bootstrap, topic_name, partitions=1)
    out = js(tmp_path, "txnFence", bootstrap, transactionalId=f"js-{uuid.uuid4()}",
             topic=topic_name)
    assert out["error"] is not None, out
    assert read(bootstrap, topic_name, 1, "read_committed") == [b"from-the-new-one"]
