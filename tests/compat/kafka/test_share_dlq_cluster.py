"""Share-group dead letters (KIP-1191) written to a dead-letter topic led by another broker.

test_tools_share_groups.py compares the dead letters of one Skiff node with Kafka 4.4's;
there the dead-letter topic is always led by the node that archives the records. Here three
combined Skiff nodes are formatted at 4.4 (so share.version is 2 from the start, as on a new
Kafka 4.4 cluster), the topic's one partition is placed on one broker and both partitions of
dlq.<topic> on another, so the leader of the share-partition writes its dead letters with a
Produce over the inter-broker listener (broker/share/shell.py's _produce_remote). Kafka 4.4's
KafkaShareConsumer runs ShareCases.java's "dlq" case (ACCEPT 0 and 3, REJECT 1, RELEASE 2
twice with a delivery count limit of 2, the records copied); the dead letters must be those
Kafka 4.4 writes in the single-node comparison, and the share-partition's leader counts them
in ShareGroupMetrics' dead-letter meters.
"""

from __future__ import annotations

import json
import subprocess
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka.admin import NewTopic

from broker.testing.cluster import Cluster
from tests.support.kafka_ref import run_program, tool

pytestmark = [pytest.mark.timeout(300)]

PROGRAM = "skiff.compat.share.ShareCases"
TOPIC = "remote-dlq"


def _features(bootstrap: str) -> str:
    proc: subprocess.CompletedProcess[str] = tool("kafka-features", "--bootstrap-server",
                                                  bootstrap, "describe", timeout=120)
    return proc.stdout


def _dlq_metric(address: str, name: str) -> float:
    """kafka_server_sharegroupmetrics_deadletterqueue<name>_total of the group, 0 if none."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    return sum(s.value for fam in text_string_to_metric_families(text) for s in fam.samples
               if s.name == f"kafka_server_sharegroupmetrics_deadletterqueue{name}_total"
               and s.labels.get("group") == f"{TOPIC}-g")


def test_dead_letters_reach_a_topic_led_by_another_broker(tmp_path: Path) -> None:
    with Cluster(tmp_path / "cluster", controllers=3, combined=True,
                 release_version="4.4") as cluster:
        source, other = cluster.broker_ids[0], cluster.broker_ids[1]
        assert "Feature: share.version" in _features(cluster.bootstrap_servers)
        assert "FinalizedVersionLevel: 2" in next(
            line for line in _features(cluster.bootstrap_servers).splitlines()
            if "Feature: share.version" in line)
        admin = cluster.admin(source)
        for f in admin.create_topics([
                NewTopic(TOPIC, 1, replica_assignment=[[source]],
                         config={"retention.ms": "-1"}),  # its records carry 1970 timestamps
                NewTopic(f"dlq.{TOPIC}", 2, replica_assignment=[[other], [other]],
                         config={"errors.deadletterqueue.group.enable": "true"})]).values():
            f.result(60)
        def leader(topic: str, partition: int) -> int:
            meta = admin.list_topics(topic, timeout=10).topics[topic]
            return -1 if meta.error or partition not in meta.partitions \
                else int(meta.partitions[partition].leader)

        cluster.wait_for(lambda: leader(TOPIC, 0) == source and
                         leader(f"dlq.{TOPIC}", 0) == other, 30, "the topics' leaders")
        proc = run_program(PROGRAM, cluster.bootstrap_servers,
                           f"dlq:{TOPIC}:{TOPIC}-g:true", timeout=180)
        lines = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
        assert proc.returncode == 0 and lines, proc.stdout[-3000:] + proc.stderr[-3000:]
        result = lines[-1]
        # the share-partition's leader counts them (ShareGroupMetrics' dead-letter meters):
        # two archivings, a produce request each, two dead letters
        address = cluster.nodes[source].metrics_address
        wanted = {"recordcount": 2.0, "totalproducerequests": 2.0}
        cluster.wait_for(lambda: all(_dlq_metric(address, k) == v for k, v in wanted.items()),
                         10, "the dead-letter metrics")
        assert _dlq_metric(address, "failedproducerequests") == 0
    assert result["steps"] == ["0:accept:1", "1:reject:1", "2:release:1", "3:accept:1",
                               "2:release:2"], result
    common = [f"__dlq.errors.topic={TOPIC}", "__dlq.errors.partition=0"]
    assert result["dlq"] == [
        {"partition": 0, "offset": 0, "key": "k1", "value": "v1", "timestamp_type": "CreateTime",
         "timestamp_is_original": False,
         "headers": [*common, "__dlq.errors.offset=1", f"__dlq.errors.group={TOPIC}-g",
                     "__dlq.errors.delivery.count=1",
                     "__dlq.errors.message=Offset rejected by client."]},
        {"partition": 0, "offset": 1, "key": "k2", "value": "v2", "timestamp_type": "CreateTime",
         "timestamp_is_original": False,
         "headers": [*common, "__dlq.errors.offset=2", f"__dlq.errors.group={TOPIC}-g",
                     "__dlq.errors.delivery.count=2",
                     "__dlq.errors.message=Offset delivery count exceeded the threshold."]},
    ], result
