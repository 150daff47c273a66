"""The pure cores of `pipeline/`: option checks (Spark's messages) and offset planning."""

from __future__ import annotations

import pytest

from pipeline.options import (
    ByTimestamp,
    Earliest,
    GlobalTimestamp,
    Latest,
    SkiffOptionError,
    Specific,
    read_options,
    write_options,
)
from tests.support.requires import have_module, require_tool

B = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def test_defaults_follow_spark() -> None:
    batch = read_options({**B, "subscribe": "a, b"}, streaming=False)
    assert batch.subscription.topics == ("a", "b")
    assert isinstance(batch.starting, Earliest) and isinstance(batch.ending, Latest)
    assert batch.fail_on_data_loss and not batch.include_headers
    stream = read_options({**B, "subscribe": "a"}, streaming=True)
    assert isinstance(stream.starting, Latest)
    # Spark's random group.id prefixes: its batch relation's and its streaming source's.
    assert (batch.group_id_prefix, stream.group_id_prefix) == (
        "spark-kafka-relation", "spark-kafka-source")
    named = read_options({**B, "subscribe": "a", "groupIdPrefix": "etl"}, streaming=False)
    assert named.group_id_prefix == "etl"


@pytest.mark.parametrize(("client", "idempotent"), [
    ({}, "true"),                                   # the Java producer's default
    ({"kafka.acks": "all"}, "true"),
    ({"kafka.acks": "-1", "kafka.retries": "3"}, "true"),
    ({"kafka.acks": "1"}, None),                    # Java turns idempotence off, not fails
    ({"kafka.retries": "0"}, None),
    ({"kafka.max.in.flight.requests.per.connection": "6"}, None),
    ({"kafka.enable.idempotence": "false"}, "false"),
    ({"kafka.enable.idempotence": "true", "kafka.acks": "1"}, "true"),  # librdkafka refuses
])
def test_sink_producer_defaults_follow_the_java_producer(client: dict[str, str],
                                                         idempotent: str | None) -> None:
    from pipeline.produce import producer_config

    conf = producer_config(write_options({**B, "topic": "t", **client}))
    assert conf.get("enable.idempotence") == idempotent
    assert conf["partitioner"] == "murmur2_random"


def test_options_are_case_insensitive_and_kafka_params_pass_through() -> None:
    o = read_options({**B, "SUBSCRIBEPATTERN": "ev.*", "kafka.isolation.level": "read_committed",
                      "IncludeHeaders": "TRUE"}, streaming=True)
    assert o.subscription.matches("events") and not o.subscription.matches("xevents")
    assert o.client["isolation.level"] == "read_committed"
    assert o.include_headers


def test_timestamp_precedence() -> None:
    o = read_options({**B, "subscribe": "a", "startingTimestamp": "5",
                      "startingOffsetsByTimestamp": '{"a":{"0":7}}',
                      "startingOffsets": "earliest"}, streaming=True)
    assert o.starting == GlobalTimestamp(5)
    o = read_options({**B, "subscribe": "a", "startingOffsetsByTimestamp": '{"a":{"0":7}}',
                      "startingOffsets": "earliest"}, streaming=True)
    assert o.starting == ByTimestamp({("a", 0): 7})
    o = read_options({**B, "subscribe": "a", "startingOffsets": '{"a":{"0":-2,"1":9}}'},
                     streaming=True)
    assert o.starting == Specific({("a", 0): -2, ("a", 1): 9})


@pytest.mark.parametrize(("options", "streaming", "message"), [
    ({"subscribe": "a"}, True, None),
    ({**B}, True, "One of the following options must be specified for Kafka source"),
    ({**B, "subscribe": "a", "subscribePattern": "b"}, True, "Only one of the following"),
    ({**B, "subscribe": " , "}, True, "No topics to subscribe to"),
    ({**B, "subscribePattern": " "}, True, "Pattern to subscribe is empty"),
    ({**B, "assign": "a:0"}, True, "No topicpartitions to assign"),
    ({**B, "assign": '{"a":["x"]}'}, True, "Expected e.g."),
    ({**B, "subscribe": "a", "endingOffsets": "latest"}, True,
     "ending offset not valid in streaming queries"),
    ({**B, "subscribe": "a", "endingOffsetsByTimestamp": '{"a":{"0":1}}'}, True,
     "ending timestamp not valid in streaming queries"),
    ({**B, "subscribe": "a", "startingOffsets": "latest"}, False,
     "starting offset can't be latest for batch queries"),
    ({**B, "subscribe": "a", "startingOffsets": '{"a":{"0":-1}}'}, False,
     "startingOffsets for a-0 can't be latest"),
    ({**B, "subscribe": "a", "endingOffsets": "earliest"}, False,
     "ending offset can't be earliest"),
    ({**B, "subscribe": "a", "endingOffsets": '{"a":{"0":-2}}'}, False,
     "ending offset for a-0 can't be earliest"),
    ({**B, "subscribe": "a", "startingOffsets": '{"a":{"0":-3}}'}, False, "is invalid"),
    ({**B, "subscribe": "a", "startingOffsets": "[1]"}, False, "Expected e.g."),
    ({**B, "subscribe": "a", "minPartitions": "0"}, False, "minPartitions must be positive"),
    ({**B, "subscribe": "a", "maxOffsetsPerTrigger": "x"}, True, "must be an integer"),
    ({**B, "subscribe": "a", "failOnDataLoss": "maybe"}, True, "must be true or false"),
    ({**B, "subscribe": "a", "kafka.auto.offset.reset": "x"}, True,
     "'auto.offset.reset' is not supported"),
    ({**B, "subscribe": "a", "kafka.value.deserializer": "x"}, True,
     "'value.deserializer' is not supported"),
    ({**B, "subscribe": "a", "kafka.enable.auto.commit": "true"}, True,
     "'enable.auto.commit' is not supported"),
    ({**B, "subscribe": "a", "maxTriggerDelay": "5m"}, True, "'maxTriggerDelay' of Spark"),
    ({**B, "subscribe": "a", "startingOffsetsByTimestampStrategy": "x"}, True,
     "must be 'error' or 'latest'"),
])
def test_bad_read_options(options: dict[str, str], streaming: bool, message: str | None) -> None:
    msg = message or "Option 'kafka.bootstrap.servers' must be specified"
    with pytest.raises(SkiffOptionError, match=msg):
        read_options(options, streaming=streaming)


def test_write_options() -> None:
    w = write_options({**B, "topic": "out", "kafka.acks": "all"})
    assert w.topic == "out" and w.client["acks"] == "all"
    with pytest.raises(SkiffOptionError, match=r"'key\.serializer' is not supported"):
        write_options({**B, "kafka.key.serializer": "x"})
    with pytest.raises(SkiffOptionError, match="configuring Kafka producer"):
        write_options({"topic": "t"})


def test_split_ranges_and_rate_limit() -> None:
    require_tool("pyspark", "pipeline.plan needs the pipeline extra (tests/run.sh installs it)",
                 available=have_module("pyspark"))
    from pipeline.plan import OffsetRange, ranges_between, rate_limit, split_ranges

    ranges = ranges_between({("a", 0): 0, ("a", 1): 10}, {("a", 0): 100, ("a", 1): 10})
    assert ranges == [OffsetRange("a", 0, 0, 100)]
    assert split_ranges(ranges, None) == ranges
    parts = split_ranges([OffsetRange("a", 0, 0, 90), OffsetRange("a", 1, 0, 10)], 5)
    # Pieces cover every offset once, in proportion to size (5 * 0.9 -> 5, 5 * 0.1 -> 1).
    assert sum(r.size for r in parts) == 100 and len(parts) == 6
    assert sorted((r.partition, r.from_offset) for r in parts)[0] == (0, 0)
    end = rate_limit({("a", 0): 0, ("a", 1): 0}, {("a", 0): 300, ("a", 1): 100}, 40)
    assert end == {("a", 0): 30, ("a", 1): 10}
    assert rate_limit({("a", 0): 0}, {("a", 0): 5}, 40) == {("a", 0): 5}


def test_group_ranges_never_puts_a_partition_twice_in_a_task() -> None:
    require_tool("pyspark", "pipeline.plan needs the pipeline extra (tests/run.sh installs it)",
                 available=have_module("pyspark"))
    from pipeline.plan import OffsetRange, group_ranges

    rs = [OffsetRange("a", p, 0, 10) for p in range(5)] + [OffsetRange("a", 0, 10, 20)]
    groups = group_ranges(rs, 4)
    assert sorted(r for g in groups for r in g) == sorted(rs)
    assert all(len(g) <= 4 for g in groups)
    for g in groups:
        assert len({(r.topic, r.partition) for r in g}) == len(g)
    assert group_ranges(rs, 1) == [(r,) for r in rs]
