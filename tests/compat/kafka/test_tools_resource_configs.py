"""GROUP and CLIENT_METRICS config resources (issue 36): Kafka 4.4's kafka-configs and
kafka-client-metrics against Skiff and the reference side by side, then what Skiff does with
them: a group's consumer.session.timeout.ms expires a silent member sooner, its
consumer.assignment.interval.ms holds a second member's partitions back (as on Kafka 4.4), and
a Java client
with Kafka 4.4's default enable.metrics.push=true receives a client-metrics subscription and
pushes its metrics, which Skiff exports on its metrics endpoint.

Steps compared with the reference run on the session nodes (`skiff_node`, `kafka_ref`) with
names unique to the run; the two behaviour tests use one node of this module whose
group.consumer.min.session.timeout.ms / min.heartbeat.interval.ms are lowered (Kafka's
defaults, 45000 / 5000, allow no group a shorter session than the broker's)."""

from __future__ import annotations

import base64
import re
import subprocess
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kio.schema.consumer_group_describe.v1 import request as cgd
from kio.schema.consumer_group_heartbeat.v1 import request as cgh
from kio.schema.find_coordinator.v4 import request as fc

from tests.compat.kafka.tool_differences import RESOURCE_CONFIGS
from tests.compat.kafka.tools_support import ok
from tests.conftest import Broker
from tests.support.differential import KafkaWire, build
from tests.support.kafka_ref import TOOL_JVM_OPTS, KafkaNode, java_program_classpath, run_program
from tests.support.kafka_tools import BrokerPair, Output
from tests.support.node import SkiffNode

pytestmark = pytest.mark.timeout(600)
RUN = uuid.uuid4().hex[:8]


@pytest.fixture(scope="module")
def pair(skiff_node: Broker, kafka_ref: KafkaNode) -> BrokerPair:
    return BrokerPair(kafka=kafka_ref.bootstrap, skiff=skiff_node.bootstrap,
                      differences=RESOURCE_CONFIGS)


class ShortSessionNode(SkiffNode):
    def command(self) -> list[str]:
        return [*super().command(),
                "--override", "group.consumer.min.session.timeout.ms=1000",
                "--override", "group.consumer.min.heartbeat.interval.ms=500"]


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SkiffNode]:
    n = ShortSessionNode(tmp_path_factory.mktemp("resource-configs-node"))
    n.start()
    try:
        n.wait_ready(timeout=120)
        yield n
    finally:
        n.close()


def configs(bootstrap: str, *args: str) -> None:
    ok("kafka-configs", "--bootstrap-server", bootstrap, *args)


# ---- GROUP ----------------------------------------------------------------------------------


def test_group_configs_as_kafka(pair: BrokerPair) -> None:
    """The steps a user takes, printed alike; the other refusals (heartbeat bounds, not a
    number) are compared on the wire in test_differential.py and unit-tested."""
    group = f"cfg-group-{RUN}"
    entity = ["--entity-type", "groups", "--entity-name", group]
    pair.same("groups.alter", "kafka-configs", "--bootstrap-server", "{bootstrap}", "--alter",
              *entity, "--add-config",
              "consumer.session.timeout.ms=50000,consumer.heartbeat.interval.ms=6000")
    out = pair.same("groups.describe", "kafka-configs", "--bootstrap-server", "{bootstrap}",
                    "--describe", *entity)
    assert ("consumer.session.timeout.ms=50000 sensitive=false synonyms={DYNAMIC_GROUP_CONFIG:"
            "consumer.session.timeout.ms=50000, DEFAULT_CONFIG:group.consumer.session.timeout.ms"
            "=45000}") in out.stdout, out.stdout
    pair.same("groups.describe_all", "kafka-configs", "--bootstrap-server", "{bootstrap}",
              "--describe", *entity, "--all")
    # Kafka's checks within the broker's bounds, with its words
    for step, setting in (("groups.session_below_min", "consumer.session.timeout.ms=10000"),
                          ("groups.unknown_key", "bogus.key=1")):
        k = pair.same(step, "kafka-configs", "--bootstrap-server", "{bootstrap}", "--alter",
                      *entity, "--add-config", setting)
        assert k.returncode == 1 and "InvalidConfigurationException" in k.stderr, k.text()
    # share-group configs Skiff serves (issue 34)
    pair.same("groups.share_session", "kafka-configs", "--bootstrap-server", "{bootstrap}",
              "--alter", *entity, "--add-config", "share.session.timeout.ms=50000")
    pair.same("groups.share_isolation", "kafka-configs", "--bootstrap-server", "{bootstrap}",
              "--alter", *entity, "--add-config", "share.isolation.level=read_committed")
    pair.same("groups.share_isolation_bad", "kafka-configs", "--bootstrap-server",
              "{bootstrap}", "--alter", *entity, "--add-config",
              "share.isolation.level=serializable")
    pair.same("groups.share_config", "kafka-configs", "--bootstrap-server", "{bootstrap}",
              "--alter", *entity, "--add-config", "share.renew.acknowledge.enable=false")
    pair.same("groups.delete", "kafka-configs", "--bootstrap-server", "{bootstrap}", "--alter",
              *entity, "--delete-config",
              "consumer.session.timeout.ms,consumer.heartbeat.interval.ms,share.session.timeout.ms,"
              "share.isolation.level")


def test_streams_group_configs_as_kafka(pair: BrokerPair) -> None:
    """Kafka 4.4's other streams.* group configs (issue 34): set, described with their broker
    synonyms, refused with Kafka's words, deleted, printed alike on both."""
    group = f"cfg-streams-{RUN}"
    entity = ["--entity-type", "groups", "--entity-name", group]

    def configs_same(step: str, *args: str) -> Output:
        return pair.same(step, "kafka-configs", "--bootstrap-server", "{bootstrap}", *args)

    configs_same("groups.streams_alter", "--alter", *entity, "--add-config",
                 "streams.task.offset.interval.ms=20000,streams.num.warmup.replicas=3,"
                 "streams.acceptable.recovery.lag=500,streams.assignor.name=sticky,"
                 "streams.rack.aware.assignment.tags=[zone,rack]")
    out = configs_same("groups.streams_describe", "--describe", *entity)
    assert ("streams.task.offset.interval.ms=20000 sensitive=false synonyms={"
            "DYNAMIC_GROUP_CONFIG:streams.task.offset.interval.ms=20000, DEFAULT_CONFIG:"
            "group.streams.task.offset.interval.ms=60000}") in out.stdout, out.stdout
    assert "streams.assignor.name=sticky" in out.stdout, out.stdout
    # --all: Kafka 4.4 lists the assignor name and the tags, not its internal configs
    # (task offset interval, warm-up replicas, recovery lag) unless the group sets them
    wanted = ("streams.assignor.name=", "streams.rack.aware.assignment.tags=",
              "streams.task.offset.interval.ms=", "streams.num.warmup.replicas=",
              "streams.acceptable.recovery.lag=")
    other = f"cfg-streams-unset-{RUN}"
    for o in pair.run("kafka-configs", "--bootstrap-server", "{bootstrap}", "--describe",
                      "--entity-type", "groups", "--entity-name", other, "--all"):
        assert [line.strip() for line in o.stdout.splitlines()
                if line.strip().startswith(wanted)] == [
            "streams.assignor.name=sticky sensitive=false synonyms={DEFAULT_CONFIG:"
            "group.streams.assignors=sticky}",
            "streams.rack.aware.assignment.tags= sensitive=false synonyms={DEFAULT_CONFIG:"
            "group.streams.rack.aware.assignment.tags=}"], o.stdout
    for step, setting in (("groups.streams_unknown_assignor", "streams.assignor.name=range"),
                          ("groups.streams_offset_interval_below_min",
                           "streams.task.offset.interval.ms=1000"),
                          ("groups.streams_warmups_above_max", "streams.num.warmup.replicas=21"),
                          ("groups.streams_negative_lag", "streams.acceptable.recovery.lag=-1"),
                          ("groups.streams_repeated_tag",
                           "streams.rack.aware.assignment.tags=[zone,zone]")):
        k = configs_same(step, "--alter", *entity, "--add-config", setting)
        assert k.returncode == 1 and "InvalidConfigurationException" in k.stderr, k.text()
    configs_same("groups.streams_delete", "--alter", *entity, "--delete-config",
                 "streams.task.offset.interval.ms,streams.num.warmup.replicas,"
                 "streams.acceptable.recovery.lag,streams.assignor.name,"
                 "streams.rack.aware.assignment.tags")
    configs_same("groups.streams_describe_deleted", "--describe", *entity)


def test_a_streams_member_is_told_its_groups_task_offset_interval(
        node: SkiffNode, tmp_path: Path) -> None:
    """Kafka Streams 4.4 (group.protocol=streams) logs the group configuration the
    coordinator's heartbeat answers carry: the group's streams.task.offset.interval.ms."""
    from confluent_kafka.admin import AdminClient

    from tests.compat.kafka.test_streams_app import PROGRAM, create_topics

    ok("kafka-features", "--bootstrap-server", node.bootstrap, "upgrade", "--feature",
       "streams.version=1")
    topic, prefix, app_id = f"tio-in-{RUN}", f"tio-out-{RUN}", f"tio-app-{RUN}"
    configs(node.bootstrap, "--alter", "--entity-type", "groups", "--entity-name", app_id,
            "--add-config", "streams.task.offset.interval.ms=20000")
    create_topics(AdminClient({"bootstrap.servers": node.bootstrap}),
                  [topic, f"{prefix}-words", f"{prefix}-windows"], 1)
    log_path = tmp_path / "app.log"
    with open(log_path, "wb") as log:
        app = subprocess.Popen(
            ["java", *TOOL_JVM_OPTS, "-Dorg.slf4j.simpleLogger.log.org.apache.kafka.clients."
             "consumer.internals.StreamsGroupHeartbeatRequestManager=info",
             "-cp", java_program_classpath(), PROGRAM, node.bootstrap, app_id, topic, prefix,
             str(tmp_path / "state"), "1", "streams"],
            stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT)
        try:
            told = re.compile(r"Received Streams group configuration from the group "
                              r"coordinator: heartbeatIntervalMs=(\d+), "
                              r"taskOffsetIntervalMs=(\d+)")
            deadline = time.monotonic() + 60
            while not (seen := told.findall(log_path.read_text(errors="replace"))):
                assert app.poll() is None and time.monotonic() < deadline, \
                    log_path.read_text(errors="replace")[-4000:]
                time.sleep(0.3)
            assert seen[0] == ("5000", "20000"), seen
        finally:
            assert app.stdin is not None
            app.stdin.close()
            try:
                app.wait(30)
            except subprocess.TimeoutExpired:
                app.kill()
                app.wait(10)


def test_assignment_interval_configs_as_kafka(pair: BrokerPair) -> None:
    """{consumer,share,streams}.assignment.interval.ms (Kafka 4.4's assignment batching) set,
    described with the broker synonyms and refused above group.*.max.assignment.interval.ms
    alike; the offload flag taken alike (Kafka 4.4 never reads it; nor does Skiff)."""
    group = f"interval-group-{RUN}"
    entity = ["--entity-type", "groups", "--entity-name", group]
    pair.same("groups.interval_set", "kafka-configs", "--bootstrap-server", "{bootstrap}",
              "--alter", *entity, "--add-config", "consumer.assignment.interval.ms=3000,"
              "share.assignment.interval.ms=0,streams.assignment.interval.ms=15000")
    out = pair.same("groups.interval_describe", "kafka-configs", "--bootstrap-server",
                    "{bootstrap}", "--describe", *entity)
    for kind, value in (("consumer", 3000), ("share", 0), ("streams", 15000)):
        name = f"{kind}.assignment.interval.ms"
        assert (f"{name}={value} sensitive=false synonyms={{DYNAMIC_GROUP_CONFIG:{name}={value}, "
                f"DEFAULT_CONFIG:group.{name}=1000}}") in out.stdout, out.stdout
    k = pair.same("groups.interval_above_max", "kafka-configs", "--bootstrap-server",
                  "{bootstrap}", "--alter", *entity, "--add-config",
                  "consumer.assignment.interval.ms=15001")
    assert k.returncode == 1 and "InvalidConfigurationException" in k.stderr, k.text()
    k = pair.same("groups.offload_set", "kafka-configs", "--bootstrap-server", "{bootstrap}",
                  "--alter", *entity, "--add-config", "consumer.assignor.offload.enable=false")
    assert k.returncode == 0, k.text()


def _interval_story(bootstrap: str, topic: str, group: str, interval_ms: int,
                    ) -> list[tuple[str, int, int | None]]:
    """Two members of a group with consumer.assignment.interval.ms = `interval_ms` on a
    4-partition topic: (step, member epoch counted from the first member's join, partitions
    of an assignment that changed since the last answer, else None). Kafka 4.4 gives the
    first member of a group with a config epoch 2, Skiff 1; and Skiff repeats an unchanged
    assignment to a heartbeat that lists owned partitions, Kafka only to a full one."""
    configs(bootstrap, "--alter", "--entity-type", "groups", "--entity-name", group,
            "--add-config", f"consumer.assignment.interval.ms={interval_ms}")
    seen: list[tuple[str, int, int | None]] = []
    with KafkaWire(bootstrap) as wire:
        a, _ = _join(wire, group, topic)
        b, _ = _join(wire, group, topic)
        first = time.monotonic()
        owned: list[cgh.TopicPartitions] = []

        def hb(step: str, member: str, epoch: int) -> int:
            resp = wire.send(build(cgh.ConsumerGroupHeartbeatRequest, group_id=group,
                                   member_id=member, member_epoch=epoch, rebalance_timeout=-1,
                                   topic_partitions=owned if member == a else []))
            assert resp.error_code.value == 0, resp
            got = None if resp.assignment is None else sum(
                len(tp.partitions) for tp in resp.assignment.topic_partitions)
            seen.append((step, int(resp.member_epoch) - base,
                         None if got == last[0] else got))
            last[0] = got if got is not None else last[0]
            return int(resp.member_epoch)

        describe = wire.send(build(cgd.ConsumerGroupDescribeRequest, group_ids=[group]))
        ms = {str(m.member_id): m for m in describe.groups[0].members}
        owned = list(ms[a].assignment.topic_partitions)
        owned_partitions = [p for tp in owned for p in tp.partitions]
        last = [len(owned_partitions)]  # the size of the last assignment a was told
        base = int(ms[a].member_epoch) - 1
        seen.append(("b joined", int(ms[b].member_epoch) - base,
                     sum(len(tp.partitions) for tp in ms[b].assignment.topic_partitions)))
        seen.append(("a joined", int(ms[a].member_epoch) - base, len(owned_partitions)))
        hb("a at once", a, int(ms[a].member_epoch))
        time.sleep(max(0.0, interval_ms / 1000 + 0.3 - (time.monotonic() - first)))
        hb("a after the interval", a, int(ms[a].member_epoch))
    return seen


def test_a_second_member_gets_partitions_after_the_interval_as_on_kafka(
        pair: BrokerPair) -> None:
    """consumer.assignment.interval.ms 3000: the second member gets the assignment epoch and
    nothing until a heartbeat 3 s after the first target, which tells the first member to
    give up half its partitions; with 0 that happens at once. The same on the reference."""
    topic = f"interval-topic-{RUN}"
    for bootstrap in (pair.kafka, pair.skiff):
        ok("kafka-topics", "--bootstrap-server", bootstrap, "--create", "--topic", topic,
           "--partitions", "4", "--replication-factor", "1")
    stories = {}
    for interval_ms in (3000, 0):
        group = f"interval-{interval_ms}-{RUN}"
        stories[interval_ms] = [_interval_story(b, topic, group, interval_ms)
                                for b in (pair.kafka, pair.skiff)]
        assert stories[interval_ms][0] == stories[interval_ms][1], stories[interval_ms]
    assert stories[3000][1] == [("b joined", 1, 0), ("a joined", 1, 4),
                                ("a at once", 1, None), ("a after the interval", 1, 2)], \
        stories[3000]
    assert stories[0][1] == [("b joined", 2, 0), ("a joined", 1, 4), ("a at once", 1, 2),
                             ("a after the interval", 1, None)], stories[0]


def _join(wire: KafkaWire, group: str, topic: str) -> tuple[str, int]:
    """A member joins (its first ConsumerGroupHeartbeat), once the group's coordinator is
    loaded (FindCoordinator creates __consumer_offsets; NOT_COORDINATOR until loaded)."""
    member = str(uuid.uuid4())
    deadline = time.monotonic() + 60
    while True:
        wire.send(build(fc.FindCoordinatorRequest, key_type=0, coordinator_keys=[group]))
        resp = wire.send(build(cgh.ConsumerGroupHeartbeatRequest, group_id=group,
                               member_id=member, member_epoch=0, rebalance_timeout=30000,
                               subscribed_topic_names=[topic], topic_partitions=[]))
        if resp.error_code.value in (14, 15, 16) and time.monotonic() < deadline:
            time.sleep(0.2)  # COORDINATOR_LOAD_IN_PROGRESS / NOT_AVAILABLE, NOT_COORDINATOR
            continue
        assert resp.error_code.value == 0, resp
        return member, int(resp.heartbeat_interval.total_seconds() * 1000)


def _members(wire: KafkaWire, group: str) -> list[str]:
    resp = wire.send(build(cgd.ConsumerGroupDescribeRequest, group_ids=[group]))
    [g] = resp.groups
    return [m.member_id for m in g.members]


def test_a_shorter_group_session_expires_a_silent_member_sooner(node: SkiffNode) -> None:
    short, default = f"short-session-{RUN}", f"default-session-{RUN}"
    topic = f"session-topic-{RUN}"
    ok("kafka-topics", "--bootstrap-server", node.bootstrap, "--create", "--topic", topic,
       "--partitions", "2", "--replication-factor", "1")
    configs(node.bootstrap, "--alter", "--entity-type", "groups", "--entity-name", short,
            "--add-config", "consumer.session.timeout.ms=2000,consumer.heartbeat.interval.ms=700")
    with KafkaWire(node.bootstrap) as wire:
        short_member, short_interval = _join(wire, short, topic)
        default_member, default_interval = _join(wire, default, topic)
        # the group's heartbeat interval is what its members are told; the other gets the
        # broker's group.consumer.heartbeat.interval.ms
        assert (short_interval, default_interval) == (700, 5000)
        joined = time.monotonic()
        # neither member heartbeats again: the short group's session (2 s) ends, the default
        # group's (group.consumer.session.timeout.ms, 45 s) does not
        while _members(wire, short) and time.monotonic() - joined < 20:
            time.sleep(0.2)
        gone_after = time.monotonic() - joined
        assert _members(wire, short) == [], "the silent member of the short group stayed"
        assert 1.5 <= gone_after < 20, gone_after
        assert _members(wire, default) == [default_member]
        assert short_member != default_member


# ---- CLIENT_METRICS -------------------------------------------------------------------------


def test_client_metrics_command_as_kafka(pair: BrokerPair) -> None:
    """kafka-client-metrics' subcommands printed alike (the other refusals and a resource's
    defaults are compared on the wire in test_differential.py)."""
    name = f"sub-{RUN}"

    def cm(step: str, *args: str) -> None:
        pair.same(step, "kafka-client-metrics", "--bootstrap-server", "{bootstrap}", *args)

    cm("client_metrics.create", "--alter", "--name", name, "--metrics",
       "org.apache.kafka.producer.,org.apache.kafka.consumer.coordinator", "--interval", "1000",
       "--match", "client_id=abc.*")
    cm("client_metrics.interval_too_short", "--alter", "--name", name, "--interval", "50")
    cm("client_metrics.bad_selector", "--alter", "--name", name, "--match", "bogus=x")
    cm("client_metrics.alter", "--alter", "--name", name, "--interval", "2000")
    cm("client_metrics.describe", "--describe", "--name", name)
    listed = pair.run("kafka-client-metrics", "--bootstrap-server", "{bootstrap}", "--list")
    assert all(name in o.stdout.splitlines() for o in listed), listed
    cm("client_metrics.delete", "--delete", "--name", name)
    cm("client_metrics.describe_deleted", "--describe", "--name", name)


def _scrape(node: SkiffNode) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{node.metrics_port}/metrics",
                                timeout=10) as resp:
        return str(resp.read().decode())


def test_a_java_client_pushes_what_a_subscription_asks_for(node: SkiffNode) -> None:
    client_id = f"telemetry-java-{RUN}"
    topic = f"telemetry-topic-{RUN}"
    ok("kafka-client-metrics", "--bootstrap-server", node.bootstrap, "--alter", "--name",
       f"java-{RUN}", "--metrics", "org.apache.kafka.producer.", "--interval", "500",
       "--match", f"client_id={client_id}")
    seen: list[str] = []
    stop = threading.Event()

    def scrape() -> None:
        while not stop.is_set():
            text = _scrape(node)
            seen.extend(line for line in text.splitlines()
                        if f'client_id="{client_id}"' in line)
            stop.wait(0.3)

    scraper = threading.Thread(target=scrape, daemon=True)
    scraper.start()
    try:
        proc = run_program("skiff.compat.clients.TelemetryProducer", node.bootstrap, topic,
                           client_id, "6000", timeout=120)
    finally:
        stop.set()
        scraper.join(15)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    printed = next(line.split()[1] for line in proc.stdout.splitlines()
                   if line.startswith("INSTANCE "))
    # Kafka's Uuid prints as URL-safe base64 of its 16 bytes
    instance = str(uuid.UUID(bytes=base64.urlsafe_b64decode(printed + "==")))
    assert uuid.UUID(instance).int != 0  # handed out by GetTelemetrySubscriptions
    pushed = [line for line in seen if f'client_instance_id="{instance}"' in line]
    assert pushed, (seen[:20], proc.stderr[-3000:])
    names = {line.split("{", 1)[0] for line in pushed}
    # what the subscription asks for, and only that (the client filters by prefix)
    assert all(n.startswith("org_apache_kafka_producer_") for n in names), names
    assert "org_apache_kafka_producer_record_send_total" in names \
        or any("record_send" in n for n in names), names
