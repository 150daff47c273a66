"""Share groups (KIP-932) with Apache Kafka 4.4's Java KafkaShareConsumer against one Skiff
node (tests/java/src/skiff/compat/share/ShareCases.java).

The module's node runs with 2 s record locks (group.share.record.lock.duration.ms, within a
lowered group.share.min.record.lock.duration.ms) and a delivery count limit of 3, so lock
expiry and archiving are seen in seconds. The module's node is formatted at 4.1,
where share groups are off, and share.version is upgraded to 1 through the Java Admin client
first; the restart cases' nodes are formatted at the default (4.4), where share.version is 2
from the start, as on Kafka 4.4.

- four consumers on one partition, every record ACCEPTed (implicit acknowledgement): the
  records each gets are disjoint, and together they are every record, once; meanwhile
  Admin.describeShareGroups (ShareGroupDescribe) shows the four members with the partition
  and listGroups (ListGroups, type share) lists the group;
- explicit acknowledgement: RELEASE redelivers (delivery count 2, then 3, then the record is
  archived at the limit), REJECT archives, ACCEPT is never redelivered, and a record left
  unacknowledged is redelivered with delivery count 2 once its lock expires;
- RENEW (KIP-1222): a record held past its first lock, renewed in time, is not redelivered;
- with 5 ms of work per record, four consumers share one partition's records, each record
  delivered to exactly one of them (the speed-up over one consumer is measured by hand).

The share-partition state lives in __share_group_state (the share coordinator): a consumer
ACCEPTs some records and leaves the others it got unacknowledged; the node is stopped with
SIGTERM (one test) or killed -9 (another) and started again; a new consumer then gets every
record that was not ACCEPTed, once, and none that was.
"""

from __future__ import annotations

import json
import signal
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.kafka_ref import run_program
from tests.support.node import SkiffNode
from tests.support.records import unique_topic

pytestmark = [pytest.mark.timeout(300)]

PROGRAM = "skiff.compat.share.ShareCases"
LOCK_MS = 2000
DELIVERY_LIMIT = 3
CONFIG = {
    "SKIFF_GROUP_SHARE_RECORD_LOCK_DURATION_MS": str(LOCK_MS),
    "SKIFF_GROUP_SHARE_MIN_RECORD_LOCK_DURATION_MS": "1000",
    "SKIFF_GROUP_SHARE_DELIVERY_COUNT_LIMIT": str(DELIVERY_LIMIT),
    # assignment batching off: with Kafka 4.4's 1000 ms, consumers that join within a second
    # of the first get their partition only at a heartbeat after it (group.share.heartbeat.
    # interval.ms, 5 s), after these cases have consumed everything (the disjoint and speed-up
    # cases failed so); test_tools_resource_configs.py shows the interval itself
    "SKIFF_GROUP_SHARE_ASSIGNMENT_INTERVAL_MS": "0",
}


# a node's start on a loaded CI machine (load averages near 30 on two cores were seen) can
# take longer than the harness's default 30 s
READY_S = 120.0


def _ready(node: SkiffNode) -> SkiffNode:
    node.start()
    try:
        node.wait_ready(READY_S)
    except BaseException:
        node.close()
        raise
    return node


COUNT = 200
WATCH_MS = 3 * LOCK_MS
# 600 records at 5 ms each: about 3 s of work for one consumer, so that one of the four
# starting up to a second after the others still leaves them 3x faster
SPEEDUP_COUNT = 600


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, dict[str, Any]]]:
    """Every case in one JVM (a JVM start costs seconds of CPU), by case name."""
    node = _ready(SkiffNode(Path(tmp_path_factory.mktemp("share-node")), config_env=CONFIG,
                           release_version="4.1"))
    try:
        proc = run_program(
            PROGRAM, node.bootstrap, "enable",
            f"disjoint:{unique_topic('share-disjoint')}:share-disjoint-g:{COUNT}",
            f"explicit:{unique_topic('share-explicit')}:share-explicit-g:{WATCH_MS}",
            f"renew:{unique_topic('share-renew')}:share-renew-g:{LOCK_MS}",
            f"speedup:{unique_topic('share-speedup')}:share-speedup-g:{SPEEDUP_COUNT}",
            timeout=240)
        out = {}
        for line in proc.stdout.splitlines():
            if line.startswith("{"):
                item = json.loads(line)
                out[item["case"]] = item
        assert proc.returncode == 0 and len(out) == 5, proc.stdout[-3000:] + proc.stderr[-3000:]
        out["metrics"] = _scraped(node)
        yield out
    finally:
        node.close()


def _scraped(node: SkiffNode) -> dict[str, Any]:
    """The node's share metrics once the cases ran: {(name, labels): value}."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://127.0.0.1:{node.metrics_port}/metrics",
                                timeout=10) as resp:
        text = resp.read().decode()
    return {"values": {(s.name, tuple(sorted(s.labels.items()))): s.value
                       for fam in text_string_to_metric_families(text) for s in fam.samples
                       if "share" in s.name}}


def test_share_metrics_under_kafkas_names(results: dict[str, dict[str, Any]]) -> None:
    """What the cases did shows in Kafka's share metrics: every acknowledgement type the
    explicit and renew cases sent, the locks the explicit case let expire, the share-partitions
    loaded, the fetches and acknowledgements per topic, the groups by state and their
    rebalances, the share fetches' acquire times per group, the in-flight batches made,
    and the share coordinator's state writes."""
    vals = results["metrics"]["values"]

    def total(name: str, **labels: str) -> float:
        return sum(float(v) for (n, ls), v in vals.items()
                   if n == name and all(dict(ls).get(k) == x for k, x in labels.items()))

    for kind in ("Accept", "Release", "Reject", "Renew"):
        assert total("kafka_server_sharegroupmetrics_recordacknowledgements_total",
                     acktype=kind) > 0, (kind, vals)
    assert total("kafka_server_sharepartitionmetrics_acquisitionlocktimeout_total",
                 group="share-explicit-g") >= 1, vals
    assert total("kafka_server_sharegroupmetrics_partitionloadtimems_count") >= 3, vals
    for name in ("totalsharefetchrequests", "totalshareacknowledgementrequests"):
        assert total(f"kafka_server_brokertopicmetrics_{name}_total") > 0, (name, vals)
    assert total("kafka_server_group_coordinator_metrics_share_groups") >= 3, vals
    assert total("kafka_server_group_coordinator_metrics_share_group_rebalance_total") >= 3, vals
    for group in ("share-disjoint-g", "share-explicit-g", "share-renew-g"):
        assert total("kafka_server_sharegroupmetrics_topicpartitionsacquiretimems_count",
                     group=group) > 0, (group, vals)
        assert total("kafka_server_sharepartitionmetrics_inflightbatchmessagecount_count",
                     group=group) > 0, (group, vals)
    # the share-partitions' initial states and every acknowledgement were written
    writes = total("kafka_server_share_coordinator_metrics_write_total")
    assert writes > total("kafka_server_sharegroupmetrics_partitionloadtimems_count"), vals
    assert 0 < total("kafka_server_share_coordinator_metrics_write_latency_seconds_count") \
        <= writes, vals
    assert total("kafka_server_share_coordinator_metrics_write_latency_max_seconds") > 0, vals


def test_share_version_enabled_through_update_features(
        results: dict[str, dict[str, Any]]) -> None:
    assert results["enable"]["share.version"] == 1


def test_four_consumers_get_disjoint_records_each_once(
        results: dict[str, dict[str, Any]]) -> None:
    count = COUNT
    result = results["disjoint"]
    per_consumer = [list(c) for c in result["consumers"]]
    everything = [o for c in per_consumer for o in c]
    assert sorted(everything) == list(range(count)), "every record exactly once"
    for i, a in enumerate(per_consumer):
        for b in per_consumer[i + 1:]:
            assert not set(a) & set(b)
    # ShareGroupDescribe and ListGroups while the four polled: each was assigned the partition
    assert result["state"] == "Stable" and result["listed"] == ["Share/Stable"], result
    assert sorted(m["client"] for m in result["members"]) == ["c0", "c1", "c2", "c3"]
    # a member learns the group epoch its latest join set at its next heartbeat (5 s apart),
    # so a describe soon after the last join may show earlier members one epoch behind
    assert all(m["partitions"] == 1 and 0 < m["epoch"] <= result["epoch"]
               for m in result["members"]), result
    assert any(m["epoch"] == result["epoch"] for m in result["members"]), result
    # the records were shared: more than one consumer got some
    assert sum(1 for c in per_consumer if c) >= 2, [len(c) for c in per_consumer]


def test_explicit_acknowledgements(results: dict[str, dict[str, Any]]) -> None:
    result = results["explicit"]
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


def test_renew_keeps_the_record(results: dict[str, dict[str, Any]]) -> None:
    """RENEW (KIP-1222) before the lock expires: the record is not delivered to the other
    consumer though it was held longer than one lock; the holder's client hands it back
    (same delivery count) and its ACCEPT succeeds."""
    result = results["renew"]
    deliveries = [(d["consumer"], d["offset"], d["count"]) for d in result["deliveries"]]
    assert deliveries == [("c1", 0, 1), ("c1-again", 0, 1)], deliveries
    assert result["c1_commit_errors"] == 0


def test_four_consumers_share_one_partition(results: dict[str, dict[str, Any]]) -> None:
    """Each ShareFetch acquires at most the consumer's max.poll.records (10), so the four
    share the partition's records as they work (at 500 the first takes all of them, on
    Kafka 4.4 too), each record delivered to exactly one of them. The speed-up itself (at
    least 3x with 5 ms of work per record) is a timing figure, measured by hand on this case
    and kept out of the assertions (issue 31: timing checks belong to bench/; at load ~8 two
    runs measured 2.66x and 2.16x): Kafka 4.4 3.73x, 4.02x and 3.96x, Skiff 3.86x, 3.93x and
    4.16x (load 5-13), docs/benchmarks.md."""
    result = results["speedup"]
    assert sorted(result["one"]) == list(range(SPEEDUP_COUNT)), "one consumer: every record once"
    per_consumer = [list(c) for c in result["four"]]
    everything = [o for c in per_consumer for o in c]
    assert sorted(everything) == list(range(SPEEDUP_COUNT)), "four consumers: every record once"
    assert sum(1 for c in per_consumer if c) >= 2, \
        {k: v for k, v in result.items() if k not in ("one", "four")}
    print(f"speed-up of four share consumers over one: {result['ratio']:.2f}x "
          f"({result['one_ms']} ms / {result['four_ms']} ms)")


RESTART_COUNT = 60
RESTART_ACCEPT = 25


def _cases(proc: Any) -> dict[str, dict[str, Any]]:
    out = {}
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            item = json.loads(line)
            out[item["case"]] = item
    return out


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "kill-9"])
def test_accepted_records_survive_a_restart(tmp_path: Path, sig: signal.Signals) -> None:
    node = _ready(SkiffNode(tmp_path / "node"))
    try:
        topic = unique_topic("share-restart")
        group = f"share-restart-{sig.name.lower()}"
        proc = run_program(PROGRAM, node.bootstrap,
                           f"accept:{topic}:{group}:{RESTART_COUNT}:{RESTART_ACCEPT}",
                           timeout=180)
        first = _cases(proc)
        assert proc.returncode == 0 and "accept" in first, proc.stdout[-3000:] + proc.stderr[-3000:]
        accepted, left = first["accept"]["accepted"], first["accept"]["left"]
        assert first["accept"]["commit_errors"] == 0
        assert len(accepted) == RESTART_ACCEPT and len(set(accepted)) == RESTART_ACCEPT
        node.stop(sig, timeout=60)
        node.start()
        node.wait_ready(READY_S)
        expected = RESTART_COUNT - RESTART_ACCEPT
        proc = run_program(PROGRAM, node.bootstrap, f"drain:{topic}:{group}:{expected}:3000",
                           timeout=180)
        second = _cases(proc)
        assert proc.returncode == 0 and "drain" in second, \
            proc.stdout[-3000:] + proc.stderr[-3000:]
        drained = second["drain"]["offsets"]
        # nothing ACCEPTed is delivered again, nothing else is lost, nothing comes twice
        assert not set(drained) & set(accepted), (accepted, drained)
        assert sorted(drained) == sorted(set(range(RESTART_COUNT)) - set(accepted)), \
            (accepted, left, drained)
    finally:
        node.close()
