"""Kafka 4.4's data tools against Skiff (issue 30), each compared with the reference Kafka 4.4
node where the output is comparable: kafka-get-offsets (earliest, latest, by time, max
timestamp), kafka-delete-records (its JSON offsets file), kafka-log-dirs --describe, and
kafka-producer-perf-test / kafka-consumer-perf-test on 50k records of 100 B.

The same records (explicit timestamps, one partition) go to Skiff and to the reference, so
kafka-get-offsets and kafka-delete-records must print the very same lines for both."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.compat.kafka.tools_support import ok
from tests.conftest import Broker
from tests.support.kafka_ref import KafkaNode

pytestmark = pytest.mark.timeout(900)
BASE_TS = 1_700_000_000_000
# record i has timestamp BASE_TS + 1000 * i, except record 7, the largest
TIMESTAMPS = [BASE_TS + 1000 * i for i in range(10)]
TIMESTAMPS[7] = BASE_TS + 60_000
PERF_RECORDS = 50_000
PERF_SIZE = 100


def both(skiff_node: Broker, kafka_ref: KafkaNode) -> dict[str, str]:
    return {"skiff": skiff_node.bootstrap, "kafka": kafka_ref.bootstrap}


def create(bootstrap: str, topic: str, partitions: int = 1) -> None:
    # The records carry 2023 timestamps: under the default retention.ms (7 days) the
    # broker's retention check (every 5 min) may delete them all in the middle of a test.
    ok("kafka-topics", "--bootstrap-server", bootstrap, "--create", "--topic", topic,
       "--partitions", str(partitions), "--replication-factor", "1",
       "--config", "retention.ms=-1")


def produce_timed(bootstrap: str, topic: str) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    for i, ts in enumerate(TIMESTAMPS):
        p.produce(topic, value=f"v{i}".encode(), partition=0, timestamp=ts)
        p.flush(30)  # one batch per record: offsets by time resolve per record
    assert p.flush(30) == 0


def offsets(bootstrap: str, topic: str, time_arg: str) -> str:
    return ok("kafka-get-offsets", "--bootstrap-server", bootstrap, "--topic", topic,
              "--time", time_arg).stdout


def test_get_offsets_and_delete_records_same_as_kafka(skiff_node: Broker, kafka_ref: KafkaNode,
                                                      tmp_path: Path) -> None:
    topic = "tools-data-offsets"
    outputs: dict[str, list[str]] = {}
    for name, bootstrap in both(skiff_node, kafka_ref).items():
        create(bootstrap, topic)
        produce_timed(bootstrap, topic)
        out = [offsets(bootstrap, topic, "-1"), offsets(bootstrap, topic, "-2"),
               offsets(bootstrap, topic, str(BASE_TS + 3500)),  # first at or after: record 4
               offsets(bootstrap, topic, "-3"),  # the record with the largest timestamp
               offsets(bootstrap, topic, str(BASE_TS + 3_600_000))]  # after every record
        spec = tmp_path / f"delete-{name}.json"
        spec.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": topic, "partition": 0, "offset": 4}]}))
        out.append(ok("kafka-delete-records", "--bootstrap-server", bootstrap,
                      "--offset-json-file", str(spec)).stdout)
        out.append(offsets(bootstrap, topic, "-2"))
        outputs[name] = out
    skiff = outputs["skiff"]
    assert skiff[:5] == [f"{topic}:0:10\n", f"{topic}:0:0\n", f"{topic}:0:4\n",
                         f"{topic}:0:7\n", ""], skiff  # nothing at or after that time: no line
    assert f"partition: {topic}-0\tlow_watermark: 4" in skiff[5]
    assert skiff[6] == f"{topic}:0:4\n"
    assert skiff == outputs["kafka"]


def test_delete_records_refuses_an_offset_past_the_end_as_kafka(
        skiff_node: Broker, kafka_ref: KafkaNode, tmp_path: Path) -> None:
    topic = "tools-data-delete-past-end"
    errors = {}
    for name, bootstrap in both(skiff_node, kafka_ref).items():
        create(bootstrap, topic)
        produce_timed(bootstrap, topic)
        spec = tmp_path / f"delete-{name}.json"
        spec.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": topic, "partition": 0, "offset": 99}]}))
        from tests.support.kafka_ref import tool
        proc = tool("kafka-delete-records", "--bootstrap-server", bootstrap,
                    "--offset-json-file", str(spec))
        line = next((x for x in proc.stdout.splitlines() if x.startswith("partition:")), "")
        errors[name] = line
    assert "OffsetOutOfRangeException" in errors["skiff"], errors
    assert errors["skiff"] == errors["kafka"]


def test_log_dirs_describe(skiff_node: Broker, kafka_ref: KafkaNode) -> None:
    topic = "tools-data-logdirs"
    docs = {}
    for name, bootstrap in both(skiff_node, kafka_ref).items():
        create(bootstrap, topic, partitions=2)
        produce_timed(bootstrap, topic)
        out = ok("kafka-log-dirs", "--bootstrap-server", bootstrap, "--describe",
                 "--topic-list", topic).stdout
        assert "Querying brokers for log directories information" in out
        docs[name] = json.loads(out.strip().splitlines()[-1])
    for name, doc in docs.items():
        assert doc["version"] == 1
        [broker] = doc["brokers"]
        [log_dir] = broker["logDirs"]
        assert log_dir["error"] is None
        parts = {p["partition"]: p for p in log_dir["partitions"]}
        assert set(parts) == {f"{topic}-0", f"{topic}-1"}, name
        assert parts[f"{topic}-0"]["size"] > 0 and parts[f"{topic}-1"]["size"] == 0, name
        assert all(p["offsetLag"] == 0 and p["isFuture"] is False for p in parts.values())
        assert sorted(parts[f"{topic}-0"]) == ["isFuture", "offsetLag", "partition", "size"]
    # the same records take the same bytes on disk: both write Kafka's format
    size = {n: next(p["size"] for p in d["brokers"][0]["logDirs"][0]["partitions"]
                    if p["partition"] == f"{topic}-0") for n, d in docs.items()}
    assert size["skiff"] == size["kafka"], size
    skiff_dir = Path(docs["skiff"]["brokers"][0]["logDirs"][0]["logDir"])
    assert (skiff_dir / f"{topic}-0").is_dir()


def test_perf_tests_complete_with_sane_numbers(skiff_node: Broker) -> None:
    topic = "tools-data-perf"
    bootstrap = skiff_node.bootstrap
    create(bootstrap, topic, partitions=2)
    prod = ok("kafka-producer-perf-test", "--topic", topic, "--num-records", str(PERF_RECORDS),
              "--record-size", str(PERF_SIZE), "--throughput", "-1", "--producer-props",
              f"bootstrap.servers={bootstrap}", "acks=all",
              timeout=300).stdout
    final = prod.strip().splitlines()[-1]
    m = re.match(r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), "
                 r"([\d.]+) ms avg latency, ([\d.]+) ms max latency", final)
    assert m, prod
    sent, rate, avg, worst = int(m[1]), float(m[2]), float(m[4]), float(m[5])
    assert sent == PERF_RECORDS
    assert rate > 100 and 0 < avg <= worst < 120_000, final
    cons = ok("kafka-consumer-perf-test", "--bootstrap-server", bootstrap, "--topic", topic,
              "--num-records", str(PERF_RECORDS), "--timeout", "60000", timeout=300).stdout
    lines = cons.strip().splitlines()
    header = [h.strip() for h in lines[-2].split(",")]
    row = dict(zip(header, (v.strip() for v in lines[-1].split(",")), strict=True))
    assert int(row["data.consumed.in.nMsg"]) == PERF_RECORDS
    assert float(row["data.consumed.in.MB"]) == pytest.approx(
        PERF_RECORDS * PERF_SIZE / 1024 / 1024, abs=1e-3)
    assert float(row["nMsg.sec"]) > 100 and float(row["MB.sec"]) > 0
    # the topic holds exactly what was produced
    ends = offsets(bootstrap, topic, "-1")
    assert sum(int(x.rsplit(":", 1)[1]) for x in ends.split()) == PERF_RECORDS
