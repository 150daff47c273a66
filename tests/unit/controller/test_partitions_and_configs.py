from __future__ import annotations

from collections import Counter

import pytest
from conftest import Harness, cluster
from kio.schema.errors import ErrorCode

from broker.config import build_config
from broker.controller import (
    AlterConfigOp,
    AlterConfigsResource,
    ConfigResource,
    CreatableTopic,
    CreatePartitionsTopic,
    IncrementalAlterConfigsResource,
)
from broker.metadata import apply_records
from broker.metadata.records import RESOURCE_BROKER, RESOURCE_TOPIC, kind, pb, wrap

E = ErrorCode
TOPIC = lambda name: ConfigResource(RESOURCE_TOPIC, name)  # noqa: E731
BROKER = lambda name: ConfigResource(RESOURCE_BROKER, name)  # noqa: E731


def with_topic(n_brokers: int = 3, partitions: int = 3, rf: int = 2, **kw) -> Harness:
    h = Harness(cluster(n_brokers), **kw)
    [r] = h.commit(h.controller.create_topics(h.image, [CreatableTopic("t", partitions, rf)]))
    assert r.error is E.none
    return h


# -- CreatePartitions ---------------------------------------------------------------


def test_add_partitions_keeps_rf_and_balances_leaders():
    h = with_topic(3, 3, 2)
    r = h.controller.create_partitions(h.image, [CreatePartitionsTopic("t", 9)])
    assert [kind(x) for x in r.records] == ["partition"] * 6
    [res] = h.commit(r)
    assert res.error is E.none
    t = h.image.topic("t")
    assert sorted(t.partitions) == list(range(9))
    assert all(len(p.replicas) == 2 and p.leader == p.replicas[0] for p in t.partitions.values())
    assert sorted(Counter(p.leader for p in t.partitions.values()).values()) == [3, 3, 3]


def test_add_partitions_manual_and_validate_only():
    h = with_topic(3, 1, 2)
    r = h.controller.create_partitions(h.image, [CreatePartitionsTopic("t", 3, [[2, 0], [1, 2]])],
                                       validate_only=True)
    assert r.records == [] and r.response[0].error is E.none
    h.commit(h.controller.create_partitions(
        h.image, [CreatePartitionsTopic("t", 3, [[2, 0], [1, 2]])]))
    t = h.image.topic("t")
    assert t.partitions[1].replicas == (2, 0) and t.partitions[2].leader == 1


@pytest.mark.parametrize("req,code", [
    (CreatePartitionsTopic("nope", 4), E.unknown_topic_or_partition),
    (CreatePartitionsTopic("t", 2), E.invalid_partitions),
    (CreatePartitionsTopic("t", 3), E.invalid_partitions),
    (CreatePartitionsTopic("t", 5, [[0, 1]]), E.invalid_replica_assignment),
    (CreatePartitionsTopic("t", 4, [[0]]), E.invalid_replica_assignment),
    (CreatePartitionsTopic("t", 4, [[0, 0]]), E.invalid_replica_assignment),
    (CreatePartitionsTopic("t", 4, [[0, 9]]), E.invalid_replica_assignment),
])
def test_create_partitions_errors(req, code):
    h = with_topic(3, 3, 2)
    r = h.controller.create_partitions(h.image, [req])
    assert r.response[0].error is code and r.response[0].message and r.records == []


def test_create_partitions_needs_enough_live_brokers_and_rejects_duplicates():
    h = with_topic(3, 1, 3)
    epoch = h.image.brokers[2].epoch
    h.image = apply_records(h.image, [wrap(pb.FenceBroker(broker_id=2, broker_epoch=epoch))])
    r = h.controller.create_partitions(h.image, [CreatePartitionsTopic("t", 2)])
    assert r.response[0].error is E.invalid_replication_factor
    r = h.controller.create_partitions(h.image, [CreatePartitionsTopic("t", 2),
                                                 CreatePartitionsTopic("t", 3)])
    assert [x.error for x in r.response] == [E.invalid_request] * 2


# -- AlterConfigs ----------------------------------------------------------------------


def test_incremental_set_delete_append_subtract():
    h = with_topic()
    ops = [("retention.ms", AlterConfigOp.SET, "1000"),
           ("cleanup.policy", AlterConfigOp.APPEND, "compact")]
    [res] = h.commit(h.controller.incremental_alter_configs(
        h.image, [IncrementalAlterConfigsResource(TOPIC("t"), ops)]))
    assert res.error is E.none
    assert h.image.topic_config("t") == {"retention.ms": "1000", "cleanup.policy": "delete,compact"}
    [res] = h.commit(h.controller.incremental_alter_configs(h.image, [
        IncrementalAlterConfigsResource(TOPIC("t"), [
            ("cleanup.policy", AlterConfigOp.SUBTRACT, "delete"),
            ("retention.ms", AlterConfigOp.DELETE, None)])]))
    assert res.error is E.none and h.image.topic_config("t") == {"cleanup.policy": "compact"}


def test_incremental_unchanged_value_writes_nothing():
    h = with_topic()
    h.commit(h.controller.incremental_alter_configs(h.image, [IncrementalAlterConfigsResource(
        TOPIC("t"), [("retention.ms", AlterConfigOp.SET, "5")])]))
    r = h.controller.incremental_alter_configs(h.image, [IncrementalAlterConfigsResource(
        TOPIC("t"), [("retention.ms", AlterConfigOp.SET, "5")])])
    assert r.records == [] and r.response[0].error is E.none


@pytest.mark.parametrize("resource,ops,code", [
    (TOPIC("nope"), [("retention.ms", AlterConfigOp.SET, "1")], E.unknown_topic_or_partition),
    (TOPIC("t"), [("retention.ms", AlterConfigOp.SET, "x")], E.invalid_config),
    (TOPIC("t"), [("no.such", AlterConfigOp.SET, "1")], E.invalid_config),
    (TOPIC("t"), [("retention.ms", AlterConfigOp.APPEND, "1")], E.invalid_config),
    (TOPIC("t"), [("cleanup.policy", AlterConfigOp.APPEND, "keep")], E.invalid_config),
    (TOPIC("t"), [("retention.ms", AlterConfigOp.SET, "1"),
                  ("retention.ms", AlterConfigOp.DELETE, None)], E.invalid_request),
    (TOPIC("t"), [("retention.ms", 9, "1")], E.invalid_request),
    (BROKER("x"), [("log.retention.ms", AlterConfigOp.SET, "1")], E.invalid_request),
    # not dynamic: INVALID_REQUEST, as Kafka 4.4's broker answers ("Cannot update these
    # configs dynamically: [node.id]"); only the first broker synonym of a topic config is
    # dynamic (log.retention.ms, not log.retention.hours); any refused value on a BROKER
    # resource is INVALID_REQUEST in Kafka (KAFKA-13609)
    (BROKER("1"), [("node.id", AlterConfigOp.SET, "5")], E.invalid_request),
    (BROKER(""), [("log.retention.hours", AlterConfigOp.SET, "1")], E.invalid_request),
    (BROKER(""), [("log.roll.hours", AlterConfigOp.SET, "1")], E.invalid_request),
    (BROKER(""), [("log.retention.ms", AlterConfigOp.SET, "soon")], E.invalid_request),
    # thread counts with nothing to size in Skiff: only Kafka's default; and the sender
    # threads (num.network.threads), sized at start only
    (BROKER(""), [("num.io.threads", AlterConfigOp.SET, "16")], E.invalid_request),
    (BROKER("1"), [("num.network.threads", AlterConfigOp.SET, "6")], E.invalid_request),
    (ConfigResource(8, "x"), [("a", AlterConfigOp.SET, "1")], E.invalid_request),
])
def test_incremental_errors(resource, ops, code):
    h = with_topic()
    r = h.controller.incremental_alter_configs(
        h.image, [IncrementalAlterConfigsResource(resource, ops)])
    assert r.response[0].error is code, r.response[0]
    assert r.records == []


def test_incremental_delete_of_any_topic_or_group_config_name_is_accepted():
    """Kafka 4.4 checks topic and group configs as they are after the change: a DELETE of a
    name that is not set, known or not, changes nothing and is no error (a SET is)."""
    h = with_topic()
    r = h.controller.incremental_alter_configs(h.image, [
        IncrementalAlterConfigsResource(TOPIC("t"), [
            ("errors.deadletterqueue.group.enable", AlterConfigOp.DELETE, None),
            ("local.retention.ms", AlterConfigOp.DELETE, None),
            ("no.such", AlterConfigOp.DELETE, None)]),
        IncrementalAlterConfigsResource(GROUP("g"), [
            ("bogus.key", AlterConfigOp.DELETE, None),
            ("streams.num.standby.replicas", AlterConfigOp.DELETE, None)])])
    assert [x.error for x in r.response] == [E.none, E.none]
    assert r.records == []


def test_broker_dynamic_configs_cluster_default_and_per_broker():
    h = with_topic()
    [a, b] = h.commit(h.controller.incremental_alter_configs(h.image, [
        IncrementalAlterConfigsResource(BROKER(""), [("log.retention.ms", AlterConfigOp.SET,
                                                      "100")]),
        IncrementalAlterConfigsResource(BROKER("1"), [("log.retention.ms", AlterConfigOp.SET,
                                                       "200")])]))
    assert a.error is E.none and b.error is E.none
    assert h.image.broker_config() == {"log.retention.ms": "100"}
    assert h.image.broker_config(1) == {"log.retention.ms": "200"}


def test_deleting_an_unknown_broker_config_is_a_no_op_setting_it_is_refused():
    """As on Kafka 4.4: kafka-reassign-partitions --verify deletes the replication throttle
    rates (leader.replication.throttled.rate, ...) on every broker once a move is done."""
    h = with_topic()
    for name in ("leader.replication.throttled.rate", "follower.replication.throttled.rate",
                 "replica.alter.log.dirs.io.max.bytes.per.second"):
        r = h.controller.incremental_alter_configs(h.image, [IncrementalAlterConfigsResource(
            BROKER("1"), [(name, AlterConfigOp.DELETE, None)])])
        assert r.response[0].error is E.none and r.records == []
        r = h.controller.incremental_alter_configs(h.image, [IncrementalAlterConfigsResource(
            BROKER("1"), [(name, AlterConfigOp.SET, "1000")])])
        assert r.response[0].error is E.invalid_request and r.records == []
        assert r.response[0].message == f"Unknown broker config name: {name}"


def test_legacy_alter_configs_replaces_the_set():
    h = with_topic()
    h.commit(h.controller.alter_configs(h.image, [AlterConfigsResource(
        TOPIC("t"), {"retention.ms": "1", "segment.bytes": "1048576"})]))
    assert h.image.topic_config("t") == {"retention.ms": "1", "segment.bytes": "1048576"}
    r = h.controller.alter_configs(h.image, [AlterConfigsResource(TOPIC("t"),
                                                                  {"retention.ms": "2"})])
    assert sorted(x.config.name for x in r.records) == ["retention.ms", "segment.bytes"]
    h.commit(r)
    assert h.image.topic_config("t") == {"retention.ms": "2"}
    r = h.controller.alter_configs(h.image, [AlterConfigsResource(TOPIC("t"), {"x": "1"})],
                                   validate_only=False)
    assert r.response[0].error is E.invalid_config and r.records == []
    r = h.controller.alter_configs(h.image, [AlterConfigsResource(TOPIC("t"), {})],
                                   validate_only=True)
    assert r.records == [] and r.response[0].error is E.none
    r = h.controller.alter_configs(h.image, [AlterConfigsResource(TOPIC("t"), {}),
                                             AlterConfigsResource(TOPIC("t"), {})])
    assert [x.error for x in r.response] == [E.invalid_request] * 2


def test_append_starts_from_the_broker_default_when_node_config_given():
    nc = build_config({
        "process.roles": "broker,controller", "node.id": "0",
        "controller.quorum.voters": "0@127.0.0.1:9093",
        "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093",
        "controller.listener.names": "CONTROLLER", "log.cleanup.policy": "compact"})
    h = with_topic(node_config=nc)
    h.commit(h.controller.incremental_alter_configs(h.image, [IncrementalAlterConfigsResource(
        TOPIC("t"), [("cleanup.policy", AlterConfigOp.APPEND, "delete")])]))
    assert h.image.topic_config("t") == {"cleanup.policy": "compact,delete"}


# -- GROUP and CLIENT_METRICS resources (broker/config/resource_configs.py) -----------------

GROUP = lambda name: ConfigResource(32, name)  # noqa: E731
CLIENT_METRICS = lambda name: ConfigResource(16, name)  # noqa: E731


def test_group_and_client_metrics_configs_are_config_records():
    h = with_topic()
    [g, cm] = h.commit(h.controller.incremental_alter_configs(h.image, [
        IncrementalAlterConfigsResource(GROUP("g"), [
            ("consumer.session.timeout.ms", AlterConfigOp.SET, "50000"),
            ("streams.num.standby.replicas", AlterConfigOp.SET, "1"),
            ("streams.initial.rebalance.delay.ms", AlterConfigOp.SET, "0")]),
        IncrementalAlterConfigsResource(CLIENT_METRICS("sub"), [
            ("metrics", AlterConfigOp.SET, "org.apache.kafka.producer."),
            ("match", AlterConfigOp.SET, "client_id=app.*"),
            ("interval.ms", AlterConfigOp.SET, "1000")])]))
    assert (g.error, cm.error) == (E.none, E.none)
    assert h.image.configs[(32, "g")] == {"consumer.session.timeout.ms": "50000",
                                          "streams.num.standby.replicas": "1",
                                          "streams.initial.rebalance.delay.ms": "0"}
    assert h.image.configs[(16, "sub")] == {"metrics": "org.apache.kafka.producer.",
                                            "match": "client_id=app.*", "interval.ms": "1000"}
    # deleting every key drops the resource (kafka-client-metrics --delete)
    h.commit(h.controller.incremental_alter_configs(h.image, [IncrementalAlterConfigsResource(
        CLIENT_METRICS("sub"), [(k, AlterConfigOp.DELETE, None)
                                for k in ("metrics", "match", "interval.ms")])]))
    assert (16, "sub") not in h.image.configs


@pytest.mark.parametrize("resource,ops,code,message", [
    # Kafka 4.4's words (checked against a reference node with kafka-configs)
    (GROUP("g"), [("consumer.session.timeout.ms", AlterConfigOp.SET, "10000")],
     E.invalid_config, "consumer.session.timeout.ms must be in the range 45000 to 60000 "
                       "inclusive."),
    (GROUP("g"), [("consumer.heartbeat.interval.ms", AlterConfigOp.SET, "20000")],
     E.invalid_config, "consumer.heartbeat.interval.ms must be in the range 5000 to 15000 "
                       "inclusive."),
    (GROUP("g"), [("consumer.session.timeout.ms", AlterConfigOp.SET, "abc")], E.invalid_config,
     "Invalid value abc for configuration consumer.session.timeout.ms: Not a number of type "
     "INT"),
    (GROUP("g"), [("bogus.key", AlterConfigOp.SET, "1")], E.invalid_config,
     "Unknown group config name: bogus.key"),
    (GROUP("g"), [("share.assignor.offload.enable", AlterConfigOp.SET, "maybe")],
     E.invalid_config, "Invalid value maybe for configuration share.assignor.offload.enable: "
                       "Expected value to be either true or false"),
    *[(GROUP("g"), [(f"{kind}.assignment.interval.ms", AlterConfigOp.SET, "15001")],
       E.invalid_config, f"{kind}.assignment.interval.ms must be in the range 0 to 15000 "
                         "inclusive.") for kind in ("consumer", "share", "streams")],
    (GROUP("g"), [("share.renew.acknowledge.enable", AlterConfigOp.SET, "maybe")],
     E.invalid_config, "Invalid value maybe for configuration share.renew.acknowledge.enable: "
                       "Expected value to be either true or false"),
    (GROUP("g"), [("share.isolation.level", AlterConfigOp.SET, "serializable")],
     E.invalid_config, "Invalid value serializable for configuration share.isolation.level: "
                       "String must be one of: read_committed, read_uncommitted"),
    (GROUP("g"), [("share.session.timeout.ms", AlterConfigOp.SET, "1000")], E.invalid_config,
     "share.session.timeout.ms must be in the range 45000 to 60000 inclusive."),
    (GROUP("g"), [("share.record.lock.duration.ms", AlterConfigOp.SET, "1000")],
     E.invalid_config, "share.record.lock.duration.ms must be in the range 15000 to 60000 "
                       "inclusive."),
    (GROUP("g"), [("share.auto.offset.reset", AlterConfigOp.SET, "by_duration:PT1H")],
     E.invalid_config, "Invalid value by_duration:PT1H for configuration "
                       "share.auto.offset.reset: Skiff serves latest and earliest (not "
                       "by_duration)"),
    (GROUP("g"), [("streams.session.timeout.ms", AlterConfigOp.SET, "1000")], E.invalid_config,
     "streams.session.timeout.ms must be in the range 45000 to 60000 inclusive."),
    # Kafka 4.4's words (its GroupConfig.validate: ConfigDef floor, then the node's bound)
    (GROUP("g"), [("streams.num.standby.replicas", AlterConfigOp.SET, "3")], E.invalid_config,
     "streams.num.standby.replicas must be less than or equal to 2"),
    (GROUP("g"), [("streams.num.standby.replicas", AlterConfigOp.SET, "-1")], E.invalid_config,
     "Invalid value -1 for configuration streams.num.standby.replicas: Value must be at "
     "least 0"),
    (GROUP("g"), [("streams.num.warmup.replicas", AlterConfigOp.SET, "21")], E.invalid_config,
     "streams.num.warmup.replicas must be less than or equal to 20"),
    (GROUP("g"), [("streams.task.offset.interval.ms", AlterConfigOp.SET, "14999")],
     E.invalid_config, "streams.task.offset.interval.ms must be greater than or equal to 15000"),
    (GROUP("g"), [("streams.task.offset.interval.ms", AlterConfigOp.SET, "0")],
     E.invalid_config, "Invalid value 0 for configuration streams.task.offset.interval.ms: "
                       "Value must be at least 1"),
    (GROUP("g"), [("streams.acceptable.recovery.lag", AlterConfigOp.SET, "-1")],
     E.invalid_config, "Invalid value -1 for configuration streams.acceptable.recovery.lag: "
                       "Value must be at least 0"),
    (GROUP("g"), [("streams.acceptable.recovery.lag", AlterConfigOp.SET, "x")],
     E.invalid_config, "Invalid value x for configuration streams.acceptable.recovery.lag: "
                       "Not a number of type LONG"),
    (GROUP("g"), [("streams.assignor.name", AlterConfigOp.SET, "range")], E.invalid_config,
     "streams.assignor.name 'range' is not a registered task assignor. Registered assignors "
     "are: [sticky]."),
    (GROUP("g"), [("streams.assignor.name", AlterConfigOp.SET, "")], E.invalid_config,
     "streams.assignor.name '' is not a registered task assignor. Registered assignors "
     "are: [sticky]."),
    (GROUP("g"), [("streams.rack.aware.assignment.tags", AlterConfigOp.SET, "zone, zone")],
     E.invalid_config, "streams.rack.aware.assignment.tags must not contain duplicate tag "
                       "keys."),
    (GROUP("g"), [("streams.rack.aware.assignment.tags", AlterConfigOp.SET, "zone,")],
     E.invalid_config, "Configuration 'streams.rack.aware.assignment.tags' values must not "
                       "be empty."),
    (GROUP("g"), [("consumer.session.timeout.ms", AlterConfigOp.APPEND, "1")],
     E.invalid_config, "Can't APPEND to key consumer.session.timeout.ms because its type is "
                       "not LIST."),
    # as Kafka 4.4 answers, though metrics and match are lists
    (CLIENT_METRICS("s"), [("metrics", AlterConfigOp.APPEND, "a.")], E.invalid_config,
     "Can't APPEND to key metrics because its type is not LIST."),
    (CLIENT_METRICS("s"), [("match", AlterConfigOp.SUBTRACT, "client_id=x")],
     E.invalid_config, "Can't SUBTRACT to key match because its type is not LIST."),
    (CLIENT_METRICS("s"), [("interval.ms", AlterConfigOp.SET, "50")], E.invalid_request,
     "Invalid value 50 for interval.ms, interval must be between 100 and 3600000 (1 hour)"),
    (CLIENT_METRICS("s"), [("match", AlterConfigOp.SET, "bogus=x")], E.invalid_config,
     "Illegal client matching pattern: bogus=x"),
    (CLIENT_METRICS("s"), [("match", AlterConfigOp.SET, "client_id=[")], E.invalid_config,
     "Illegal client matching pattern: client_id=["),
])
def test_group_and_client_metrics_errors(resource, ops, code, message):
    h = with_topic()
    r = h.controller.incremental_alter_configs(
        h.image, [IncrementalAlterConfigsResource(resource, ops)])
    assert (r.response[0].error, r.response[0].message) == (code, message)
    assert r.records == []
