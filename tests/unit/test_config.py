from __future__ import annotations

import re
from pathlib import Path

import pytest

from broker.config import (
    BROKER_CONFIGS,
    TOPIC_CONFIGS,
    ConfigError,
    ConfigSource,
    build_config,
    describe_broker_configs,
    describe_topic_configs,
    effective_topic_configs,
    env_key,
    load_config,
    parse_properties,
    topic_log_config,
    validate_topic_configs,
)

COMBINED = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.quorum.voters": "1@127.0.0.1:9093",
    "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
    "controller.listener.names": "CONTROLLER",
    "log.dirs": "/tmp/skiff-a,/tmp/skiff-b",
}


def cfg(**changes: str | None):
    raw = dict(COMBINED)
    for k, v in changes.items():
        key = k.replace("_", ".")
        if v is None:
            raw.pop(key, None)
        else:
            raw[key] = v
    return build_config(raw)


# -- java.util.Properties --------------------------------------------------------


def test_properties_syntax():
    text = (
        "# comment\n"
        "! also a comment\n"
        "\n"
        "   a=1\n"
        "b : 2\n"
        "c 3\n"
        "d=x\\\n"
        "    y\\\n"
        "  z\n"
        "e=tab\\there\\nnew\n"
        "f=\\u0041\\u00e9\n"
        "key\\ with\\ space = v\n"
        "g\\:h=colon\n"
        "empty=\n"
        "onlykey\n"
        "trailing=ends with backslash\\\\\n"
        "dup=1\n"
        "dup=2\n"
        "url=PLAINTEXT://:9092\n"
    )
    p = parse_properties(text)
    assert p == {
        "a": "1", "b": "2", "c": "3", "d": "xyz", "e": "tab\there\nnew", "f": "Aé",
        "key with space": "v", "g:h": "colon", "empty": "", "onlykey": "",
        "trailing": "ends with backslash\\", "dup": "2", "url": "PLAINTEXT://:9092",
    }


def test_properties_crlf_and_comment_not_continued():
    p = parse_properties("a=1\r\n# x \\\r\nb=2\r\n")
    assert p == {"a": "1", "b": "2"}


def test_properties_continuation_is_not_a_comment_and_last_line_backslash():
    assert parse_properties("a=1\\\n  #x\nb=2\\") == {"a": "1#x", "b": "2"}


def test_properties_bad_unicode_escape():
    with pytest.raises(ValueError):
        parse_properties("a=\\u12\n")


# -- loading and precedence ----------------------------------------------------------


def test_file_then_override_then_env(tmp_path: Path):
    f = tmp_path / "server.properties"
    f.write_text("\n".join(f"{k}={v}" for k, v in COMBINED.items()) +
                 "\nnum.partitions=2\nmessage.max.bytes=100\nlog.retention.hours=1\n")
    c = load_config(f, ["num.partitions=3", "message.max.bytes=200"],
                    {"SKIFF_NUM_PARTITIONS": "4", "PATH": "/bin", "SKIFF_": "x"})
    assert c["num.partitions"] == 4 and c.origin["num.partitions"] == "env"
    assert c["message.max.bytes"] == 200 and c.origin["message.max.bytes"] == "override"
    assert c["log.retention.hours"] == 1 and c.origin["log.retention.hours"] == "file"
    assert effective_topic_configs(c, {})["retention.ms"] == 3_600_000


def test_environment_is_read_by_default(monkeypatch):
    monkeypatch.setenv("SKIFF_NUM_PARTITIONS", "9")
    assert load_config(overrides=COMBINED)["num.partitions"] == 9
    assert load_config(overrides=COMBINED, env={})["num.partitions"] == 1


@pytest.mark.parametrize("key", ["node.id", "a_b.c", "x-y.z", "log.dirs"])
def test_env_key_round_trip(key):
    from broker.config.properties import _key_from_env
    assert _key_from_env(env_key(key)) == key


def test_env_key_names():
    assert env_key("node.id") == "SKIFF_NODE_ID"
    assert env_key("log.dirs") == "SKIFF_LOG_DIRS"
    c = load_config(overrides=COMBINED, env={
        "SKIFF_NODE_ID": "1", "SKIFF_LOG_DIRS": "/data/x",
        "SKIFF_AUTO_CREATE_TOPICS_ENABLE": "false",
    })
    assert c.log_dirs == [Path("/data/x")] and c["auto.create.topics.enable"] is False


def test_an_unknown_key_in_the_file_or_an_override_stops_the_node(tmp_path: Path):
    # Kafka logs and ignores it; Skiff does not run with a setting it would ignore.
    with pytest.raises(ConfigError, match=r"no\.such\.key.*does not implement"):
        load_config(overrides={**COMBINED, "no.such.key": "1"}, env={})
    props = tmp_path / "server.properties"
    props.write_text("".join(f"{k}={v}\n" for k, v in COMBINED.items())
                     + "log.retention.hour=1\n")  # a typo of log.retention.hours
    with pytest.raises(ConfigError, match=r"log\.retention\.hour\b"):
        load_config(props, env={})
    with pytest.raises(ConfigError, match="KRaft mode only"):
        load_config(overrides={**COMBINED, "zookeeper.connect": "zk:2181"}, env={})


def test_an_unknown_environment_variable_is_a_warning():
    seen: list[str] = []
    c = load_config(overrides=COMBINED, env={"SKIFF_NO_SUCH_KEY": "1"}, warn=seen.append)
    assert seen and "no.such.key" in seen[0] and "SKIFF_NO_SUCH_KEY" in seen[0]
    assert c.warnings == seen and c.originals["no.such.key"] == "1"


def test_an_unknown_environment_variable_is_logged_without_a_callback(capsys):
    c = load_config(overrides=COMBINED, env={"SKIFF_NO_SUCH_KEY": "1"})
    assert "no.such.key" in c.warnings[0]
    captured = capsys.readouterr()
    assert "no.such.key" in captured.out + captured.err


def test_broker_id_is_kafkas_older_name_for_node_id():
    without_node_id = {k: v for k, v in COMBINED.items() if k != "node.id"}
    assert load_config(overrides={**without_node_id, "broker.id": "1"}, env={}).node_id == 1
    assert load_config(overrides={**COMBINED, "broker.id": "1"}, env={}).node_id == 1
    with pytest.raises(ConfigError, match=r"broker\.id"):
        load_config(overrides={**COMBINED, "broker.id": "2"}, env={})


def test_cross_field_warning_is_reported():
    seen: list[str] = []
    c = build_config({**COMBINED, "socket.request.max.bytes": "100"}, warn=seen.append)
    assert len(seen) == 1 and "socket.request.max.bytes" in seen[0] and c.warnings == seen


def test_missing_file_is_a_clear_error(tmp_path: Path):
    with pytest.raises(ConfigError, match="readable"):
        load_config(tmp_path / "nope.properties", env={})


def test_overrides_must_be_key_value():
    with pytest.raises(ConfigError, match="key=value"):
        load_config(overrides=["novalue"], env={})


# -- types and defaults ---------------------------------------------------------------


def test_kafka_defaults():
    c = cfg()
    assert c["num.partitions"] == 1 and c["default.replication.factor"] == 1
    assert c["auto.create.topics.enable"] is True
    assert c["message.max.bytes"] == 1048588
    assert c["socket.request.max.bytes"] == 104857600
    assert c["log.segment.bytes"] == 1073741824
    assert c["log.retention.hours"] == 168
    assert effective_topic_configs(c, {})["retention.ms"] == 604_800_000
    assert c["log.cleanup.policy"] == ["delete"]
    assert c["min.insync.replicas"] == 1 and c["unclean.leader.election.enable"] is False
    assert c["offsets.topic.num.partitions"] == 50
    assert c["offsets.topic.replication.factor"] == 3
    assert c["broker.session.timeout.ms"] == 9000 and c["broker.heartbeat.interval.ms"] == 2000
    assert c["replica.lag.time.max.ms"] == 30000
    assert c["connections.max.idle.ms"] == 600000 and c["queued.max.requests"] == 500
    assert c["log.format"] == "console"
    assert not c.is_set("num.partitions") and c.is_set("node.id")


@pytest.mark.parametrize("key,value,expected", [
    ("num.partitions", "zero", "Not a number of type INT"),
    ("num.partitions", "0", "at least 1"),
    ("num.partitions", "2147483648", "Not a number of type INT"),
    ("auto.create.topics.enable", "yes", "true or false"),
    ("log.cleanup.policy", "compact,keep", "Valid values"),
    ("log.format", "xml", "one of"),
    ("connections.max.idle.ms", "1.5", "Not a number of type LONG"),
    ("log.cleaner.min.cleanable.ratio", "2", "between"),
    ("offsets.topic.replication.factor", "40000", "Not a number of type SHORT"),
])
def test_bad_values_name_key_value_and_expectation(key, value, expected):
    with pytest.raises(ConfigError) as ei:
        cfg(**{key.replace(".", "_"): value})
    msg = str(ei.value)
    # Kafka's ConfigException: "Invalid value <value> for configuration <key>: <why>"
    assert msg.startswith(f"Invalid value {value.strip()} for configuration {key}: ")
    assert expected in msg
    assert ei.value.key == key


def test_streams_group_settings_as_kafka():
    """Kafka 4.4's group.streams.* assignor, tag, task-offset, warm-up and recovery-lag
    keys: its defaults, and its checks (the values Kafka's GroupCoordinatorConfig refuses)."""
    c = cfg()
    assert c["group.streams.assignors"] == ["sticky"]
    assert c["group.streams.rack.aware.assignment.tags"] == []
    assert (c["group.streams.task.offset.interval.ms"],
            c["group.streams.min.task.offset.interval.ms"]) == (60000, 15000)
    assert (c["group.streams.num.warmup.replicas"],
            c["group.streams.max.warmup.replicas"]) == (2, 20)
    assert c["group.streams.acceptable.recovery.lag"] == 10000
    c = cfg(group_streams_rack_aware_assignment_tags=" zone , rack ",
            group_streams_assignors="sticky,sticky")
    assert c["group.streams.rack.aware.assignment.tags"] == ["zone", "rack"]
    for changes, key, why in (
            ({"group_streams_assignors": ""}, "group.streams.assignors", "must not be empty"),
            ({"group_streams_assignors": "range"}, "group.streams.assignors",
             "Class cannot be found"),
            ({"group_streams_rack_aware_assignment_tags": "zone,zone"},
             "group.streams.rack.aware.assignment.tags", "duplicate tag keys"),
            ({"group_streams_rack_aware_assignment_tags": "zone,"},
             "group.streams.rack.aware.assignment.tags", "values must not be empty"),
            ({"group_streams_acceptable_recovery_lag": "-1"},
             "group.streams.acceptable.recovery.lag", "at least 0"),
            ({"group_streams_task_offset_interval_ms": "1000"},
             "group.streams.task.offset.interval.ms",
             "greater than or equal to group.streams.min.task.offset.interval.ms"),
            ({"group_streams_num_warmup_replicas": "30"}, "group.streams.num.warmup.replicas",
             "less than or equal to group.streams.max.warmup.replicas")):
        with pytest.raises(ConfigError) as ei:
            cfg(**changes)
        assert ei.value.key == key and why in str(ei.value), str(ei.value)


@pytest.mark.parametrize("key,kafka_default,other", [
    ("num.io.threads", "8", "16"),
    ("num.replica.fetchers", "1", "4"),
])
def test_thread_counts_with_nothing_to_size_take_only_kafkas_default(key, kafka_default, other):
    """Kafka's sample server.properties carries num.network.threads=3 and num.io.threads=8:
    those start; a count Skiff cannot honour stops the node, saying why and what to do."""
    assert cfg(**{key.replace(".", "_"): kafka_default})[key] == int(kafka_default)
    with pytest.raises(ConfigError) as ei:
        cfg(**{key.replace(".", "_"): other})
    msg = str(ei.value)
    assert msg.startswith(f"Invalid value {other} for configuration {key}: "
                          f"{kafka_default} (Kafka's default) or unset: ")
    assert ("skiff.broker.workers" in msg) == (key != "num.replica.fetchers")


def test_num_network_threads_sizes_the_sender_threads():
    """num.network.threads is the count of native threads that send large answers
    (broker/protocol/frames.py, SenderPool): Kafka's default 3, 1 to 64; the node's
    server gets it."""
    from broker.node import server_config_for

    assert cfg()["num.network.threads"] == 3
    assert server_config_for(cfg()).network_threads == 3
    assert server_config_for(cfg(num_network_threads="8")).network_threads == 8
    for bad in ("0", "65"):
        with pytest.raises(ConfigError, match=r"num\.network\.threads.*between 1 and 64"):
            cfg(num_network_threads=bad)


@pytest.mark.parametrize("key", ["socket.send.buffer.bytes", "socket.receive.buffer.bytes"])
def test_socket_buffer_sizes_take_a_size_or_minus_one(key):
    """Kafka's SO_SNDBUF / SO_RCVBUF sizes of the listeners' sockets: bytes, or -1 for the OS's
    own sizing (applied by the server: tests/unit/server/test_server_basics.py)."""
    name = key.replace(".", "_")
    assert cfg()[key] == 102400
    assert cfg(**{name: "-1"})[key] == -1
    assert cfg(**{name: "1048576"})[key] == 1048576
    refused = re.escape(f"configuration {key}: a size in bytes, or -1")
    for bad in ("0", "-2"):
        with pytest.raises(ConfigError, match=refused):
            cfg(**{name: bad})


@pytest.mark.parametrize("key,kafka_default,other,why", [
    ("queued.max.requests", "500", "1000", "no request queue"),
    ("num.recovery.threads.per.data.dir", "2", "8", "one after another"),
    ("metadata.log.segment.bytes", "1073741824", "8388608", "every 64 MiB"),
    ("metadata.log.segment.ms", "604800000", "3600000", "never by time"),
    ("metadata.max.retention.bytes", "104857600", "-1", "two latest snapshots"),
    ("metadata.max.retention.ms", "604800000", "86400000", "two latest snapshots"),
])
def test_keys_with_nothing_to_apply_take_only_kafkas_default(key, kafka_default, other, why):
    """Keys Skiff has nothing to apply to were accepted and ignored; now Kafka's default
    starts, any other value stops the node, saying why."""
    assert cfg(**{key.replace(".", "_"): kafka_default})[key] == int(kafka_default)
    with pytest.raises(ConfigError) as ei:
        cfg(**{key.replace(".", "_"): other})
    msg = str(ei.value)
    assert msg.startswith(f"Invalid value {other} for configuration {key}: "
                          f"{kafka_default} (Kafka's default)"), msg
    assert why in msg, msg


def test_kafkas_sample_recovery_thread_count_still_starts():
    """Kafka 4's config/server.properties sets num.recovery.threads.per.data.dir=1."""
    assert cfg(num_recovery_threads_per_data_dir="1")["num.recovery.threads.per.data.dir"] == 1
    with pytest.raises(ConfigError, match=r"2 \(Kafka's default\), 1 \(Kafka's sample "
                       r"server.properties\) or unset"):
        cfg(num_recovery_threads_per_data_dir="4")


def test_values_are_trimmed_and_booleans_case_insensitive():
    c = cfg(num_partitions=" 7 ", auto_create_topics_enable="TRUE")
    assert c["num.partitions"] == 7 and c["auto.create.topics.enable"] is True


# -- cross-field checks ---------------------------------------------------------------


def test_combined_node_derivations():
    c = cfg()
    assert c.process_roles == {"broker", "controller"} and c.is_broker and c.is_controller
    assert [v.node_id for v in c.voters] == [1] and c.voters[0].port == 9093
    assert [x.name for x in c.broker_listeners] == ["PLAINTEXT"]
    assert [x.name for x in c.controller_listeners] == ["CONTROLLER"]
    assert c.inter_broker_listener_name == "PLAINTEXT"
    assert c.security_protocol_map["CONTROLLER"] == "PLAINTEXT"
    assert c.log_dirs == [Path("/tmp/skiff-a"), Path("/tmp/skiff-b")]
    assert c.metadata_log_dir == Path("/tmp/skiff-a")
    assert c.all_directories() == c.log_dirs


def test_metadata_log_dir_and_log_dir_fallback():
    c = cfg(log_dirs=None, metadata_log_dir="/tmp/meta")
    assert c.log_dirs == [Path("/tmp/kafka-logs")] and c.metadata_log_dir == Path("/tmp/meta")
    assert c.all_directories() == [Path("/tmp/kafka-logs"), Path("/tmp/meta")]
    c = cfg(log_dirs=None, log_dir="/tmp/one")
    assert c.log_dirs == [Path("/tmp/one")]


@pytest.mark.parametrize("changes,key", [
    ({"process_roles": ""}, "process.roles"),
    ({"process_roles": "broker,broker"}, "process.roles"),
    ({"process_roles": "observer"}, "process.roles"),
    ({"node_id": None}, "node.id"),
    ({"controller_quorum_voters": "2@127.0.0.1:9093"}, "controller.quorum.voters"),
    ({"controller_quorum_voters": "x@127.0.0.1:9093"}, "controller.quorum.voters"),
    ({"controller_quorum_voters": "1@127.0.0.1"}, "controller.quorum.voters"),
    ({"controller_quorum_voters": "1@h:1,1@h:2"}, "controller.quorum.voters"),
    ({"controller_quorum_voters": ""}, "controller.quorum.voters"),
    ({"controller_listener_names": ""}, "controller.listener.names"),
    ({"controller_listener_names": "OTHER"}, "controller.listener.names"),
    ({"listeners": "PLAINTEXT://127.0.0.1:9092"}, "controller.listener.names"),
    ({"listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9092"}, "listeners"),
    ({"listeners": "nonsense"}, "listeners"),
    ({"listeners": "FOO://:1,CONTROLLER://:2"}, "listeners"),
    ({"listeners": "PLAINTEXT://:9092,PLAINTEXT://:9094,CONTROLLER://:9093"}, "listeners"),
    ({"inter_broker_listener_name": "CONTROLLER"}, "inter.broker.listener.name"),
    ({"inter_broker_listener_name": "NOPE"}, "inter.broker.listener.name"),
    ({"advertised_listeners": "PLAINTEXT://0.0.0.0:9092"}, "advertised.listeners"),
    ({"advertised_listeners": "OTHER://h:1"}, "advertised.listeners"),
    ({"broker_heartbeat_interval_ms": "9000"}, "broker.heartbeat.interval.ms"),
    ({"broker_session_disconnect_timeout_ms": "-2"}, "broker.session.disconnect.timeout.ms"),
    ({"log_dirs": "/a,/a"}, "log.dirs"),
    ({"listener_security_protocol_map": "PLAINTEXT:TLS"}, "listener.security.protocol.map"),
])
def test_cross_field_rules(changes, key):
    with pytest.raises(ConfigError) as ei:
        cfg(**changes)
    assert ei.value.key == key, str(ei.value)


def test_the_disconnect_timeout_is_its_own_key():
    """Skiff's closed-connection rule keeps its 750 ms whatever the heartbeat interval: a
    live broker heartbeats again at once when its heartbeat connection closes, so the
    timeout need not cover an interval (it did before the defaults became Kafka's)."""
    assert cfg()["broker.session.disconnect.timeout.ms"] == 750
    assert cfg(broker_heartbeat_interval_ms="5000")["broker.session.disconnect.timeout.ms"] == 750
    assert cfg(broker_session_disconnect_timeout_ms="-1")[
        "broker.session.disconnect.timeout.ms"] == -1
    assert cfg(broker_session_disconnect_timeout_ms="300")[
        "broker.session.disconnect.timeout.ms"] == 300
    from broker.controller.controller import ControllerSettings
    settings = ControllerSettings.from_config(cfg(), "c")
    assert (settings.broker_session_timeout_ms, settings.broker_session_disconnect_timeout_ms) \
        == (9000, 750)


def test_broker_only_and_controller_only_roles():
    b = cfg(process_roles="broker", node_id="2", listeners="PLAINTEXT://127.0.0.1:9092")
    assert b.is_broker and not b.is_controller
    with pytest.raises(ConfigError, match="just the broker role"):
        cfg(process_roles="broker", listeners="PLAINTEXT://127.0.0.1:9092")
    with pytest.raises(ConfigError, match=r"controller\.listener\.names"):
        cfg(process_roles="broker", node_id="2")  # CONTROLLER listener present
    c = cfg(process_roles="controller", listeners="CONTROLLER://127.0.0.1:9093")
    assert c.is_controller and not c.is_broker
    with pytest.raises(ConfigError, match="only controller listeners"):
        cfg(process_roles="controller")
    boot = cfg(controller_quorum_voters=None,
               controller_quorum_bootstrap_servers="127.0.0.1:9093")
    assert boot.bootstrap_servers == [("127.0.0.1", 9093)] and boot.voters == []


def test_advertised_listeners_default_and_partial():
    c = cfg()
    assert [str(x) for x in c.advertised_listeners] == [str(x) for x in c.listeners]
    c = cfg(advertised_listeners="PLAINTEXT://example.com:19092")
    adv = {x.name: x for x in c.advertised_listeners}
    assert (adv["PLAINTEXT"].host, adv["PLAINTEXT"].port) == ("example.com", 19092)
    assert adv["CONTROLLER"].port == 9093


def test_ipv6_listener():
    c = cfg(listeners="PLAINTEXT://[::1]:9092,CONTROLLER://[::1]:9093")
    assert c.listeners[0].host == "::1" and str(c.listeners[0]) == "PLAINTEXT://[::1]:9092"


def test_inter_broker_listener_from_security_protocol():
    c = cfg(listeners="INTERNAL://:9094,CONTROLLER://:9093",
            listener_security_protocol_map="INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT")
    assert c.inter_broker_listener_name == "INTERNAL"


# -- topic configs ------------------------------------------------------------------------


def test_topic_config_validation():
    assert validate_topic_configs({"retention.ms": "-1", "cleanup.policy": "compact,delete",
                                   "min.cleanable.dirty.ratio": "0.1"}) == {
        "retention.ms": -1, "cleanup.policy": ["compact", "delete"],
        "min.cleanable.dirty.ratio": 0.1}
    for bad in ({"retention.ms": "-2"}, {"segment.bytes": "13"}, {"nope": "1"},
                {"message.timestamp.type": "Whenever"}, {"compression.type": "brotli"},
                {"max.message.bytes": "-1"}, {"min.cleanable.dirty.ratio": "nan"}):
        with pytest.raises(ConfigError):
            validate_topic_configs(bad)


def test_every_topic_config_synonym_is_a_broker_config():
    for d in TOPIC_CONFIGS.values():
        for s in d.synonyms:
            assert s in BROKER_CONFIGS, s


def test_effective_values_fall_back_to_broker_keys():
    c = cfg(log_retention_minutes="2", log_roll_ms="5000", message_max_bytes="500",
            log_cleanup_policy="compact")
    eff = effective_topic_configs(c, {"retention.bytes": "10"})
    assert eff["retention.ms"] == 120_000 and eff["segment.ms"] == 5000
    assert eff["max.message.bytes"] == 500 and eff["cleanup.policy"] == ["compact"]
    assert eff["retention.bytes"] == 10
    assert eff["leader.replication.throttled.replicas"] == []
    lc = topic_log_config(c, {"segment.bytes": "1048576", "compression.type": "LZ4"})
    assert lc["segment.bytes"] == 1048576 and lc["compression.type"] == "lz4"
    assert lc["retention.ms"] == 120_000 and lc["message.timestamp.type"] == "CreateTime"
    assert set(lc) >= {"segment.bytes", "retention.ms", "retention.bytes", "cleanup.policy",
                       "max.message.bytes", "message.timestamp.type", "segment.ms",
                       "segment.index.bytes", "index.interval.bytes", "flush.messages"}


def test_a_stored_override_that_no_longer_parses_does_not_break_readers():
    c = cfg()
    assert effective_topic_configs(c, {"retention.ms": "soon"})["retention.ms"] == 604_800_000
    [e] = describe_topic_configs(c, {"retention.ms": "soon"}, names=["retention.ms"])
    assert e.value == "soon" and e.source is ConfigSource.DYNAMIC_TOPIC_CONFIG


def test_describe_topic_sources_and_synonyms():
    c = cfg(log_retention_ms="1000")
    entries = {e.name: e for e in describe_topic_configs(
        c, {"cleanup.policy": "compact"}, include_synonyms=True)}
    assert set(entries) == set(TOPIC_CONFIGS)
    cp = entries["cleanup.policy"]
    assert cp.value == "compact" and cp.source is ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert [(s.name, s.source) for s in cp.synonyms] == [
        ("cleanup.policy", ConfigSource.DYNAMIC_TOPIC_CONFIG),
        ("log.cleanup.policy", ConfigSource.DEFAULT_CONFIG)]
    rm = entries["retention.ms"]
    assert rm.value == "1000" and rm.source is ConfigSource.STATIC_BROKER_CONFIG
    seg = entries["segment.bytes"]
    assert seg.value == "1073741824" and seg.source is ConfigSource.DEFAULT_CONFIG
    assert seg.is_default
    assert entries["min.cleanable.dirty.ratio"].value == "0.5"
    assert entries["unclean.leader.election.enable"].value == "false"
    only = describe_topic_configs(c, {}, names=["retention.ms", "bogus"])
    assert [e.name for e in only] == ["retention.ms"] and only[0].synonyms == ()
    dyn = describe_topic_configs(c, {}, names=["retention.ms"],
                                 dynamic_default={"log.retention.ms": "7"})
    assert dyn[0].value == "7" and dyn[0].source is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    own = describe_topic_configs(c, {}, names=["retention.bytes"], include_synonyms=True,
                                 dynamic_default={"log.retention.bytes": "5"},
                                 dynamic_broker={"log.retention.bytes": "9"})
    assert own[0].value == "9" and own[0].source is ConfigSource.DYNAMIC_BROKER_CONFIG
    assert [(s.name, s.value, s.source) for s in own[0].synonyms] == [
        ("log.retention.bytes", "9", ConfigSource.DYNAMIC_BROKER_CONFIG),
        ("log.retention.bytes", "5", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("log.retention.bytes", "-1", ConfigSource.DEFAULT_CONFIG)]


def test_describe_broker_configs():
    c = cfg(num_partitions="3")
    entries = {e.name: e for e in describe_broker_configs(c, include_synonyms=True)}
    assert entries["num.partitions"].value == "3"
    assert entries["num.partitions"].source is ConfigSource.STATIC_BROKER_CONFIG
    assert entries["message.max.bytes"].source is ConfigSource.DEFAULT_CONFIG
    assert entries["node.id"].read_only and not entries["num.partitions"].read_only
    assert entries["log.dirs"].value == "/tmp/skiff-a,/tmp/skiff-b"
    assert entries["advertised.listeners"].value is None


def test_broker_config_synonyms_fall_back_as_kafkas_do():
    """kafka-configs --describe --all against Kafka 4.4 after --entity-default
    log.retention.ms=7200000: synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=7200000,
    DEFAULT_CONFIG:log.retention.hours=168}; the hours key alone lists only itself."""
    c = cfg()
    entries = {e.name: e for e in describe_broker_configs(
        c, ["log.retention.ms", "log.retention.hours"], include_synonyms=True,
        dynamic_default={"log.retention.ms": "7200000"})}
    ms = entries["log.retention.ms"]
    assert (ms.value, ms.source) == ("7200000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert [(s.name, s.value, s.source) for s in ms.synonyms] == [
        ("log.retention.ms", "7200000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG)]
    hours = entries["log.retention.hours"]
    assert [(s.name, s.source) for s in hours.synonyms] == [
        ("log.retention.hours", ConfigSource.DEFAULT_CONFIG)]
    for name in ("log.retention.ms", "log.retention.minutes", "log.roll.ms"):
        unset = describe_broker_configs(c, [name], include_synonyms=True)[0]
        assert (unset.value, unset.source, unset.synonyms) == (
            None, ConfigSource.DEFAULT_CONFIG, ()), name


def test_described_as_kafka_4_4_describes_them():
    """What Apache Kafka 4.4 answered to the same DescribeConfigs (tests/compat/kafka/
    test_differential.py): a default synonym only for a topic config's first broker key,
    none for the keys Kafka defines without a default, Kafka's config types, and Kafka 4's
    num.recovery.threads.per.data.dir default."""
    from broker.config.types import ConfigType

    c = cfg()
    topic = {e.name: e for e in describe_topic_configs(c, {}, include_synonyms=True)}
    for name in ("retention.ms", "segment.ms", "segment.jitter.ms", "flush.ms"):
        assert topic[name].synonyms == (), name
    assert topic["retention.ms"].value == "604800000"
    assert topic["segment.ms"].value == "604800000"
    assert [(s.name, s.source) for s in topic["segment.bytes"].synonyms] == [
        ("log.segment.bytes", ConfigSource.DEFAULT_CONFIG)]
    hours = describe_topic_configs(cfg(log_retention_hours="2"), {}, names=["retention.ms"],
                                   include_synonyms=True)[0]
    # seen on a Kafka 4.4 node started with log.retention.hours=48: the value follows it, but
    # Kafka drops the synonyms before log.retention.ms (dropWhile) and reports the default
    assert (hours.value, hours.source, hours.synonyms) == (
        "7200000", ConfigSource.DEFAULT_CONFIG, ())
    broker = {e.name: e for e in describe_broker_configs(c, include_synonyms=True)}
    for name in ("node.id", "process.roles", "controller.listener.names"):
        assert [s.source for s in broker[name].synonyms] == [
            ConfigSource.STATIC_BROKER_CONFIG], name
    assert broker["listener.security.protocol.map"].type is ConfigType.STRING
    assert broker["log.dir"].type is ConfigType.LIST
    assert broker["num.recovery.threads.per.data.dir"].value == "2"
    assert [(s.name, s.source) for s in broker["message.max.bytes"].synonyms] == [
        ("message.max.bytes", ConfigSource.DEFAULT_CONFIG)]


def test_min_api_versions_choices():
    from broker.config import build_config as bc
    base = {"process.roles": "broker,controller", "node.id": "1",
            "controller.quorum.voters": "1@127.0.0.1:9093",
            "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
            "controller.listener.names": "CONTROLLER", "log.dirs": "/tmp/skiff-x"}
    assert bc(base)["skiff.min.api.versions"] == "kafka3"
    assert bc({**base, "skiff.min.api.versions": "kafka4"})["skiff.min.api.versions"] == "kafka4"
    with pytest.raises(ConfigError, match="kafka3, kafka4"):
        bc({**base, "skiff.min.api.versions": "kafka2"})


def test_cordoned_log_dirs_must_name_log_dirs() -> None:
    """KIP-1066: Kafka's KafkaConfig.validateCordonedLogDirs, at startup."""
    assert cfg(**{"cordoned.log.dirs": "/tmp/skiff-b"})["cordoned.log.dirs"] == ["/tmp/skiff-b"]
    assert cfg(**{"cordoned.log.dirs": "*"})["cordoned.log.dirs"] == ["*"]
    with pytest.raises(ConfigError, match=r"When cordoned\.log\.dirs is set to \*, it must "
                                          r"not contain other values"):
        cfg(**{"cordoned.log.dirs": "*,/tmp/skiff-a"})
    with pytest.raises(ConfigError, match="Missing entries : /tmp/elsewhere"):
        cfg(**{"cordoned.log.dirs": "/tmp/skiff-a,/tmp/elsewhere"})


def test_topology_description_plugin_is_kafkas_in_memory_one_or_none():
    """KIP-1331: Skiff builds in Kafka's InMemoryTopologyDescriptionPlugin and no other."""
    key = "group.streams.topology.description.plugin.class"
    assert build_config(dict(COMBINED))[key] is None
    plugin = "org.apache.kafka.server.streams.InMemoryTopologyDescriptionPlugin"
    assert build_config({**COMBINED, key: plugin})[key] == plugin
    with pytest.raises(ConfigError, match="can load no other"):
        build_config({**COMBINED, key: "com.example.JdbcTopologyStore"})


@pytest.mark.parametrize("kind", ["consumer", "share", "streams"])
def test_assignment_interval_within_its_node_bounds(kind: str) -> None:
    """Kafka 4.4's GroupCoordinatorConfig requirements, at startup, with its defaults."""
    interval = f"group.{kind}.assignment.interval.ms"
    low = f"group.{kind}.min.assignment.interval.ms"
    high = f"group.{kind}.max.assignment.interval.ms"
    c = cfg()
    assert (c[interval], c[low], c[high]) == (1000, 0, 15000)
    assert cfg(**{interval: "0"})[interval] == 0
    with pytest.raises(ConfigError, match=f"{interval} must be less than or equal to {high}"):
        cfg(**{interval: "15001"})
    with pytest.raises(ConfigError, match=f"{interval} must be greater than or equal to {low}"):
        cfg(**{low: "2000"})
    with pytest.raises(ConfigError, match=f"{high} must be greater than or equal to {low}"):
        cfg(**{low: "600", high: "500", interval: "550"})


def test_quorum_and_controller_channel_keys_reach_what_they_set():
    """controller.quorum.fetch.snapshot.max.bytes sizes a FetchSnapshot (what a follower asks
    for, and the most a leader answers with); controller.socket.timeout.ms bounds a call
    to the active controller. Both were accepted and ignored."""
    from broker.node import controller_channel_timeouts
    from broker.node.quorum import raft_config

    default = raft_config(cfg(), "c").core_config()
    assert default.snapshot_chunk_bytes == 1024 * 1024  # Kafka's default
    set_ = raft_config(cfg(controller_quorum_fetch_snapshot_max_bytes="65536"), "c")
    assert set_.core_config().snapshot_chunk_bytes == 65536
    assert controller_channel_timeouts(cfg())["default_timeout_s"] == 30.0
    assert controller_channel_timeouts(
        cfg(controller_socket_timeout_ms="5000"))["default_timeout_s"] == 5.0


# -- skiff.broker.workers ----------------------------------------------------------


def test_broker_workers_default_to_one_and_take_a_count():
    assert cfg()["skiff.broker.workers"] == 1
    assert cfg(**{"skiff.broker.workers": "2"})["skiff.broker.workers"] == 2


@pytest.mark.parametrize(("changes", "says"), [
    ({"skiff.broker.workers": "0"}, "at least 1"),
    ({"skiff.broker.workers": "2", "metrics.listeners": "", "process.roles": "controller",
      "listeners": "CONTROLLER://127.0.0.1:9093"}, "broker role"),
])
def test_what_a_broker_of_several_workers_does_not_serve_yet_is_refused(changes, says):
    with pytest.raises(ConfigError, match=says):
        build_config({**COMBINED, **changes})
