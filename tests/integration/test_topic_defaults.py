"""Where a topic's defaults come from (issue 31 point 1), on real clusters of separate
controller and broker processes on 127.0.0.1.

Kafka 4.4 reads num.partitions and default.replication.factor in two places:
  * a CreateTopics that leaves them at -1 (an admin client's default, `skiff topics create`
    without --partitions / --replication-factor) is filled in by the ACTIVE CONTROLLER from
    its own config (ControllerServer -> QuorumController.Builder.setDefaultReplicationFactor
    / setDefaultNumPartitions, used by ReplicationControlManager.createTopic);
  * a topic auto-created by a Metadata request gets the BROKER's values: the broker's
    AutoTopicCreationManager puts its own num.partitions and default.replication.factor
    into the CreateTopics it sends (DefaultAutoTopicCreationManager.creatableTopic).

The deployment files (deploy/compose/cluster.yml, deploy/kubernetes/base/*.properties) set
them on both roles. The second test starts real processes with exactly the settings those
files give each role (only the addresses, ports, directories and node ids are this
machine's) and writes with acks=all to a topic created without a replication factor and to
an auto-created one: with the defaults on the brokers only, the first got replication
factor 1 and min.insync.replicas=2 refused the write (NOT_ENOUGH_REPLICAS).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from broker.config.properties import ENV_NOT_CONFIG, _key_from_env, parse_properties
from broker.testing.cluster import REPO_ROOT, Cluster, ClusterNode

pytestmark = pytest.mark.timeout(420)
START_S = 240.0  # six Python processes on a shared 2-core machine
COMPOSE = REPO_ROOT / "deploy" / "compose" / "cluster.yml"
IMAGE_PROPERTIES = REPO_ROOT / "deploy" / "docker" / "server.properties"
KUBERNETES = REPO_ROOT / "deploy" / "kubernetes" / "base"
# What is this machine's, not the deployment's: who the node is and where it listens and
# keeps its data. Everything else comes from the deployment file as it is.
ADDRESS_KEYS = frozenset({
    "node.id", "listeners", "advertised.listeners", "controller.quorum.voters",
    "controller.quorum.bootstrap.servers", "log.dirs", "metadata.log.dir",
    "admin.listeners", "metrics.listeners",
})


def _describe(admin: AdminClient, topic: str) -> tuple[int, set[int]]:
    """(partition count, the replication factors of its partitions) from Metadata."""
    t = admin.list_topics(topic=topic, timeout=10).topics[topic]
    assert t.error is None, t.error
    return len(t.partitions), {len(p.replicas) for p in t.partitions.values()}


def _produce_acks_all(bootstrap: str, topic: str, n: int = 20) -> list[Any]:
    """Produce `n` records with acks=all (the producer may auto-create the topic: librdkafka
    producers allow it); returns the delivery errors."""
    errors: list[Any] = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                  "message.timeout.ms": 60000, "log_level": 0})

    def done(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    for i in range(n):
        p.produce(topic, value=f"v{i}".encode(), on_delivery=done)
        p.poll(0)
    left = p.flush(90)
    assert left == 0, f"{left} records not delivered in time"
    return errors


def _wait_topic(c: Cluster, via: int, topic: str) -> None:
    c.wait_for(lambda: (lambda m: m and -1 not in m.values())(c.partition_leaders(topic, via)),
               60, f"{topic}: every partition has a leader")


# -------------------------------------------------------------------------- which wins


def test_explicit_create_takes_the_controllers_defaults_auto_creation_the_brokers(
        tmp_path: Path) -> None:
    """Only the controller sets default.replication.factor (3); only the brokers set
    num.partitions (2). A CreateTopics with -1/-1 gets the controller's factor and the
    controller's partition count (its default, 1); a topic auto-created by a producer's
    Metadata request gets the brokers' partition count and the brokers' factor (their
    default, 1)."""
    broker_defaults = {"num.partitions": "2"}
    c = Cluster(tmp_path, controllers=1, brokers=3,
                node_overrides={1: {"default.replication.factor": "3"},
                                2: broker_defaults, 3: broker_defaults, 4: broker_defaults})
    try:
        c.start(timeout=START_S)
        admin = c.admin(2)
        c.admin(2).create_topics([NewTopic("explicit")],  # -1 partitions, -1 factor
                                 operation_timeout=30)["explicit"].result(60)
        _wait_topic(c, 2, "explicit")
        assert _describe(admin, "explicit") == (1, {3})

        assert _produce_acks_all(c.bootstrap_servers, "auto-created") == []
        _wait_topic(c, 2, "auto-created")
        assert _describe(admin, "auto-created") == (2, {1})
    finally:
        c.stop()


# ----------------------------------------------------------------- the deployment files


def compose_settings() -> dict[str, tuple[dict[str, str], dict[str, str]]]:
    """role -> (the image's properties file, the SKIFF_* environment) of
    deploy/compose/cluster.yml: each service runs the image's CMD (`skiff server start
    /etc/skiff/server.properties`, the file deploy/docker/server.properties) with the
    service's environment over it."""
    doc = yaml.safe_load(COMPOSE.read_text())
    base = parse_properties(IMAGE_PROPERTIES.read_text())
    out = {}
    for role, service in (("controller", "controller-1"), ("broker", "broker-1")):
        env = {k: str(v) for k, v in doc["services"][service]["environment"].items()}
        assert env["SKIFF_PROCESS_ROLES"] == role
        out[role] = (base, env)
    return out


def kubernetes_settings() -> dict[str, tuple[dict[str, str], dict[str, str]]]:
    """role -> (its properties file, no environment but the addresses the StatefulSets set)
    of deploy/kubernetes/base."""
    return {role: (parse_properties((KUBERNETES / f"{role}.properties").read_text()), {})
            for role in ("controller", "broker")}


class DeployedCluster(Cluster):
    """A Cluster whose nodes run with a deployment's settings: its properties file (minus
    the address keys, which are this harness's) and its SKIFF_* environment, passed to the
    process as environment variables, as the container gets them."""

    def __init__(self, tmp_path: Path,
                 settings: Mapping[str, tuple[Mapping[str, str], Mapping[str, str]]]) -> None:
        super().__init__(tmp_path, controllers=3, brokers=3)
        self.settings = settings

    def _role(self, node: ClusterNode) -> str:
        return "broker" if node.is_broker else "controller"

    def environment(self, node: ClusterNode) -> dict[str, str]:
        _, env = self.settings[self._role(node)]
        kept = {}
        for name, value in env.items():
            if name in ENV_NOT_CONFIG or _key_from_env(name) in ADDRESS_KEYS:
                continue
            assert "${" not in value, (name, value)  # compose interpolation: not expected here
            kept[name] = value
        return kept

    def properties(self, node: ClusterNode) -> dict[str, str]:
        harness = super().properties(node)
        file, _ = self.settings[self._role(node)]
        props = {k: v for k, v in file.items() if k not in ADDRESS_KEYS}
        props.update({k: v for k, v in harness.items() if k in ADDRESS_KEYS})
        # `skiff storage format` reads only the file: the role the environment gives
        # (compose) must be in it too (compose_settings checks they agree)
        props["process.roles"] = harness["process.roles"]
        return props

    def command_prefix(self, node: ClusterNode) -> list[str]:
        env = self.environment(node)
        return ["env", *(f"{k}={v}" for k, v in sorted(env.items()))] if env else []

    def effective(self, node_id: int) -> Any:
        """The node's configuration as its process reads it (file, then environment)."""
        from broker.config import load_config

        node = self.nodes[node_id]
        return load_config(str(node.config_path), [], self.environment(node))


@pytest.mark.parametrize("deployment", ["compose", "kubernetes"])
def test_deployment_files_create_replicated_topics_that_take_acks_all(
        deployment: str, tmp_path: Path) -> None:
    settings = compose_settings() if deployment == "compose" else kubernetes_settings()
    c = DeployedCluster(tmp_path, settings)
    try:
        c.start(timeout=START_S)
        for node_id in c.controller_ids + c.broker_ids:
            cfg = c.effective(node_id)
            assert (cfg["default.replication.factor"], cfg["min.insync.replicas"]) == (3, 2), \
                f"{deployment}: node {node_id} ({c.nodes[node_id].roles})"
        bootstrap = c.bootstrap_servers
        env = dict(os.environ, PYTHONPATH=str(REPO_ROOT),
                   SKIFF_ADMIN=c.admin_address(c.broker_ids[0]))
        # the command of the issue: no --replication-factor
        name = f"rep-{uuid.uuid4().hex[:6]}"
        out = subprocess.run(
            [sys.executable, "-m", "broker.cli.main", "topics", "create", name,
             "--partitions", "3"], capture_output=True, text=True, env=env, timeout=120)
        assert out.returncode == 0, out.stdout + out.stderr
        assert "replication factor 3" in out.stdout, out.stdout
        _wait_topic(c, c.broker_ids[0], name)
        admin = c.admin(c.broker_ids[0])
        assert _describe(admin, name) == (3, {3})
        assert _produce_acks_all(bootstrap, name) == []

        # an admin client's CreateTopics with -1 for both, then an auto-created topic
        admin.create_topics([NewTopic(f"{name}-admin")],
                            operation_timeout=30)[f"{name}-admin"].result(60)
        _wait_topic(c, c.broker_ids[0], f"{name}-admin")
        assert _describe(admin, f"{name}-admin") == (1, {3})
        assert _produce_acks_all(bootstrap, f"{name}-admin") == []
        assert _produce_acks_all(bootstrap, f"{name}-auto") == []
        assert _describe(admin, f"{name}-auto") == (1, {3})

        # min.insync.replicas=2 holds with one broker down: still acks=all
        c.kill(c.broker_ids[-1])
        time.sleep(0.5)
        assert _produce_acks_all(c.live_bootstrap(), name) == []
    finally:
        c.stop()
