"""kafkajs 2.2.4 (Node), driven through tests/compat/js/compat.js.

kafkajs only sends non-flexible versions and ignores the broker's minimum versions. It has
only gzip built in (snappy, lz4 and zstd need extra codec packages, which a plain kafkajs
user does not have), so it produces with none and gzip. Its consumer always joins a group
and has no assign(); the script fetches group-less through kafkajs's own cluster/broker
objects (see compat.js).
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.testing import admin as adm
from tests.support.records import (
    Rec,
    assert_same_records,
    assign_expected_offsets,
    make_records,
    now_ms,
)
from tests.support.requires import tool_mark

JS_DIR = Path(__file__).parent / "js"
NODE = shutil.which("node")
pytestmark = [
    pytest.mark.timeout(120),
    tool_mark("node", "Node.js runs kafkajs (tests/run.sh installs it)"),
    tool_mark("kafkajs", "run `npm install` in tests/compat/js (tests/run.sh does)",
              available=(JS_DIR / "node_modules" / "kafkajs").is_dir()),
]
KAFKAJS_CODECS = ("none", "gzip")
TOPIC_OVERRIDES = {"retention.ms": "3600000", "max.message.bytes": "2000000"}
DYNAMIC_TOPIC_CONFIG = 1


def js(tmp_path: Path, op: str, bootstrap: str, **req: Any) -> Any:
    req_file = tmp_path / f"req-{op}-{now_ms()}.json"
    req_file.write_text(json.dumps({"op": op, "bootstrap": bootstrap, **req}))
    out = subprocess.run([NODE or "node", str(JS_DIR / "compat.js"), str(req_file)],
                         capture_output=True, timeout=90, cwd=JS_DIR, check=False)
    assert out.returncode == 0, f"kafkajs {op} failed:\n{out.stderr.decode(errors='replace')}"
    return json.loads(out.stdout)


def b64(x: bytes | None) -> str | None:
    return None if x is None else base64.b64encode(x).decode()


def unb64(x: str | None) -> bytes | None:
    return None if x is None else base64.b64decode(x)


def to_wire(r: Rec) -> dict[str, Any]:
    return {"partition": r.partition, "key": b64(r.key), "value": b64(r.value),
            "headers": [[k, b64(v)] for k, v in r.headers], "timestamp_ms": r.timestamp_ms}


def from_wire(d: dict[str, Any]) -> Rec:
    return Rec(key=unb64(d["key"]), value=unb64(d["value"]),
               headers=[(k, unb64(v)) for k, v in d["headers"]],
               timestamp_ms=d["timestamp_ms"], partition=d["partition"], offset=d["offset"])


def produce_request(topic: str, recs: list[Rec], codec: str) -> dict[str, Any]:
    """One send per run of records to the same partition, in order."""
    batches: list[list[dict[str, Any]]] = []
    for r in recs:
        if batches and batches[-1][-1]["partition"] == r.partition:
            batches[-1].append(to_wire(r))
        else:
            batches.append([to_wire(r)])
    return {"topic": topic, "codec": codec, "batches": batches}


def js_records(tag: str, n: int, base_ts: int, partitions: tuple[int, ...] = (0,)) -> list[Rec]:
    # kafkajs cannot send a null header value (it crashes sizing it)
    return make_records(tag, n, base_ts=base_ts, partitions=partitions, null_header_values=False)


def check_acks(result: dict[str, Any], recs: list[Rec]) -> None:
    """kafkajs reports a base offset per partition and send: it must match what we expect."""
    firsts: list[tuple[int, int]] = []
    prev: int | None = None
    for r in recs:
        if r.partition != prev:
            assert r.offset is not None
            firsts.append((r.partition, r.offset))
            prev = r.partition
    got = [(m["partition"], int(m["baseOffset"])) for send in result["results"] for m in send]
    assert got == firsts, f"acknowledged base offsets {got}, expected {firsts}"


@pytest.fixture
def topic(bootstrap: str, topic_name: str) -> Iterator[str]:
    yield topic_name
    adm.try_delete_topic(bootstrap, topic_name)


def test_cluster_metadata(bootstrap: str, tmp_path: Path) -> None:
    md = js(tmp_path, "metadata", bootstrap)
    host, port = bootstrap.rsplit(":", 1)
    cluster = md["cluster"]
    assert isinstance(cluster["clusterId"], str) and cluster["clusterId"]
    assert [(b["host"], b["port"]) for b in cluster["brokers"]] == [(host, int(port))]
    assert cluster["controller"] == cluster["brokers"][0]["nodeId"]


def test_create_topic_validate_only_creates_nothing(bootstrap: str, topic: str,
                                                   tmp_path: Path) -> None:
    js(tmp_path, "create", bootstrap, topic=topic, partitions=2, config=TOPIC_OVERRIDES,
       validateOnly=True)
    assert topic not in js(tmp_path, "metadata", bootstrap)["topics"], "validateOnly created it"


def test_create_describe_delete_topic(bootstrap: str, topic: str, tmp_path: Path) -> None:
    r = js(tmp_path, "create", bootstrap, topic=topic, partitions=2, config=TOPIC_OVERRIDES)
    assert r["created"] is True
    adm.wait_topic_ready(bootstrap, topic, 2)
    r = js(tmp_path, "create", bootstrap, topic=topic, partitions=2)
    assert r["created"] is False, "kafkajs reports an existing topic as not created"

    md = js(tmp_path, "metadata", bootstrap, topic=topic)
    assert topic in md["topics"]
    (t,) = md["topicMetadata"]["topics"]
    assert sorted(p["partitionId"] for p in t["partitions"]) == [0, 1]

    desc = js(tmp_path, "describeConfigs", bootstrap, topic=topic)
    (res,) = desc["resources"]
    assert res["errorCode"] == 0, res
    entries = {e["configName"]: e for e in res["configEntries"]}
    for name, value in TOPIC_OVERRIDES.items():
        assert entries[name]["configValue"] == value, entries.get(name)
        assert entries[name]["configSource"] == DYNAMIC_TOPIC_CONFIG, entries[name]
        assert entries[name]["isDefault"] is False, entries[name]
    assert entries["cleanup.policy"]["configValue"] == "delete"
    assert entries["cleanup.policy"]["configSource"] != DYNAMIC_TOPIC_CONFIG

    js(tmp_path, "delete", bootstrap, topic=topic)
    adm.wait_topic_absent(bootstrap, topic)
    assert topic not in js(tmp_path, "metadata", bootstrap)["topics"]


def test_gzip_and_none_then_consume_from_earliest(bootstrap: str, topic: str,
                                                  tmp_path: Path) -> None:
    adm.create_topic(bootstrap, topic, 2)
    base = now_ms() - 60_000
    expected: list[Rec] = []
    results = []
    for n, codec in enumerate(KAFKAJS_CODECS):
        recs = js_records(codec, 24, base + n * 1000, (0, 1))
        # group by partition inside each codec so each send carries several records
        recs.sort(key=lambda r: r.partition)
        expected += recs
        results.append((js(tmp_path, "produce", bootstrap, **produce_request(topic, recs, codec)),
                        recs))
    assign_expected_offsets(expected)
    for result, recs in results:
        check_acks(result, recs)

    got: list[Rec] = []
    for p in (0, 1):
        n = sum(1 for r in expected if r.partition == p)
        out = js(tmp_path, "fetch", bootstrap, topic=topic, partition=p, offset="earliest",
                 count=n + 1, timeoutMs=1500)  # one more than exists: proves there is no more
        assert out["resolved"] == 0
        assert int(out["highWatermark"]) == n
        got += [from_wire(d) for d in out["records"]]
    assert_same_records(expected, got)


def test_consume_from_latest(bootstrap: str, topic: str, tmp_path: Path) -> None:
    adm.create_topic(bootstrap, topic, 1)
    old = js_records("old", 10, now_ms() - 9000)
    js(tmp_path, "produce", bootstrap, **produce_request(topic, old, "gzip"))
    new = js_records("new", 12, now_ms())
    out = js(tmp_path, "fetch", bootstrap, topic=topic, partition=0, offset="latest",
             count=len(new) + 1, timeoutMs=1500,
             produceAfterPositioning=produce_request(topic, new, "none"))
    assert out["resolved"] == 10
    assign_expected_offsets(new, {0: 10})
    check_acks(out["produced"], new)
    assert_same_records(new, [from_wire(d) for d in out["records"]])


def test_consume_from_timestamp(bootstrap: str, topic: str, tmp_path: Path) -> None:
    adm.create_topic(bootstrap, topic, 1)
    base = now_ms() - 100_000
    first = js_records("a", 10, base)
    second = js_records("b", 10, base + 50_000)
    js(tmp_path, "produce", bootstrap, **produce_request(topic, first, "gzip"))
    js(tmp_path, "produce", bootstrap, **produce_request(topic, second, "gzip"))
    assign_expected_offsets(first + second)

    probes = [base, base + 5, base + 7, base + 10, base + 50_003, base + 99_000]
    out = js(tmp_path, "offsets", bootstrap, topic=topic, timestamps=probes)
    assert [(int(p["partition"]), int(p["offset"]), int(p["high"]), int(p["low"]))
            for p in out["latest"]] == [(0, 20, 20, 0)]
    found = {int(ts): int(v[0]["offset"]) for ts, v in out["byTimestamp"].items()}
    assert found[base] == 0
    assert found[base + 5] == 5, "first offset with timestamp >= target, inside a batch"
    assert found[base + 10] == 10
    assert found[base + 50_003] == 13
    assert found[base + 99_000] == 20, "none that late: kafkajs falls back to the high watermark"

    out = js(tmp_path, "fetch", bootstrap, topic=topic, partition=0, offset=found[base + 7],
             count=14, timeoutMs=1500)
    assert_same_records((first + second)[7:], [from_wire(d) for d in out["records"]])
