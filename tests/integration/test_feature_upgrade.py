"""Feature levels on real processes (issue 23, KIP-584/778; issue 17, KIP-853's upgrade).

1. A 3+3 cluster formatted at release 3.9 (metadata.version 3.9-IV0, no group.version, no
   transaction.version) is restarted node by node (as an upgrade of the software is), then
   `skiff features upgrade --release-version 4.1` raises every level; a librdkafka producer
   and consumer keep working throughout, ApiVersions on the brokers' and the controllers'
   listeners shows the new finalized levels, and the consumer protocol (KIP-848), refused
   at group.version 0, works after.
2. A static quorum (controller.quorum.voters, kraft.version 0) refuses `skiff quorum
   add-controller`; `skiff features upgrade --feature kraft.version=1` moves it to
   kraft.version 1 (KRaftVersion and Voters records through Raft, with each voter's
   directory id), after which a controller removed from the voter set is added back with
   `skiff quorum add-controller`."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from typing import Any

import pytest

from broker.testing.cluster import REPO_ROOT, Cluster

pytestmark = pytest.mark.timeout(420)
WAIT_S = 60.0


def skiff(c: Cluster, via: int, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "broker.cli.main", *args, "--bootstrap",
         c.admin_address(via), "--timeout", "30"],
        capture_output=True, text=True, timeout=90, cwd=REPO_ROOT)


def skiff_ok(c: Cluster, via: int, *args: str) -> str:
    """Retried while leadership moves (the admin call answers NOT_CONTROLLER meanwhile)."""
    deadline = time.monotonic() + WAIT_S
    last = ""
    while time.monotonic() < deadline:
        p = skiff(c, via, *args)
        if p.returncode == 0:
            return p.stdout
        last = p.stdout + p.stderr
        if "INVALID_UPDATE_VERSION" in last or "usage" in last:
            break
        time.sleep(0.5)
    raise AssertionError(f"skiff {' '.join(args)} failed: {last}\n{c.log_tails()}")


async def _api_versions(host: str, port: int) -> Any:
    from kio.schema.api_versions.v4 import request as av

    from broker.protocol.transport import KafkaConnection

    conn = KafkaConnection(host, port, "skiff-test")
    try:
        return await conn.request(18, 4, av.ApiVersionsRequest(
            client_software_name="skiff-test", client_software_version="1"), 10.0)
    finally:
        await conn.close()


def finalized(host: str, port: int) -> dict[str, int]:
    resp = asyncio.run(_api_versions(host, port))
    return {f.name: int(f.max_version_level) for f in resp.finalized_features}


def features_json(c: Cluster, via: int) -> dict[str, int]:
    out = json.loads(skiff_ok(c, via, "features", "describe", "-o", "json"))
    return {f["name"]: int(f.get("finalized_version_level", 0)) for f in out["features"]}


class Traffic:
    """A librdkafka producer of numbered records, checked by a consumer at the end."""

    def __init__(self, c: Cluster, topic: str) -> None:
        from confluent_kafka import Producer

        self.c, self.topic, self.sent, self.acked = c, topic, 0, 0
        self.errors: list[str] = []
        self.producer = Producer({"bootstrap.servers": c.bootstrap_servers, "acks": "all",
                                  "enable.idempotence": True, "log_level": 0})

    def _done(self, err: Any, msg: Any) -> None:
        if err is None:
            self.acked += 1
        else:
            self.errors.append(str(err))

    def send(self, n: int = 20) -> None:
        for _ in range(n):
            self.producer.produce(self.topic, str(self.sent).encode(), on_delivery=self._done)
            self.sent += 1
        assert self.producer.flush(60) == 0, "records left unacknowledged"

    def check(self, group_protocol: str = "classic") -> None:
        from confluent_kafka import Consumer

        assert not self.errors and self.acked == self.sent, self.errors
        conf = {"bootstrap.servers": self.c.bootstrap_servers, "group.id":
                f"check-{group_protocol}", "auto.offset.reset": "earliest",
                "enable.auto.commit": False, "log_level": 0,
                "group.protocol": group_protocol}
        if group_protocol == "classic":
            conf["session.timeout.ms"] = 6000
        consumer = Consumer(conf)
        consumer.subscribe([self.topic])
        seen: set[int] = set()
        deadline = time.monotonic() + WAIT_S
        try:
            while len(seen) < self.sent and time.monotonic() < deadline:
                m = consumer.poll(0.5)
                if m is not None and m.error() is None:
                    seen.add(int(m.value()))
        finally:
            consumer.close()
        assert seen == set(range(self.sent)), f"{self.sent - len(seen)} records missing"


def test_rolling_restart_then_feature_upgrade(tmp_path: Any) -> None:
    with Cluster(tmp_path, controllers=3, brokers=3, release_version="3.9") as c:
        broker = c.broker_ids[0]
        node = c.nodes[broker]
        assert features_json(c, broker) == {"group.version": 0, "kraft.version": 0,
                                            "metadata.version": 21, "share.version": 0,
                                            "streams.version": 0, "transaction.version": 0}
        assert finalized(node.host, node.client_port) == {"metadata.version": 21}
        skiff_ok(c, broker, "topics", "create", "t", "--partitions", "3",
                 "--replication-factor", "3")
        traffic = Traffic(c, "t")
        traffic.send()
        # the consumer protocol needs group.version 1
        p = skiff(c, broker, "features", "upgrade", "--feature", "group.version=1")
        assert p.returncode != 0 and "requires metadata.version" in p.stderr, p.stderr
        # a rolling restart, controllers first, as an upgrade of the software
        for i in [*c.controller_ids, *c.broker_ids]:
            c.restart(i)
            traffic.send(10)
        # dry run changes nothing
        out = skiff_ok(c, broker, "features", "upgrade", "--release-version", "4.1",
                       "--dry-run")
        assert "metadata.version was validated to be upgraded to 4.1-IV1" in out
        assert finalized(node.host, node.client_port) == {"metadata.version": 21}
        out = skiff_ok(c, broker, "features", "upgrade", "--release-version", "4.1")
        assert "metadata.version was upgraded to 4.1-IV1." in out
        want = {"metadata.version": 27, "group.version": 1, "transaction.version": 2}
        for i in c.broker_ids:
            n = c.nodes[i]
            c.wait_for(lambda n=n: finalized(n.host, n.client_port) == want, WAIT_S,
                       f"broker {n.node_id}'s ApiVersions with {want}")
        for i in c.controller_ids:
            n = c.nodes[i]
            c.wait_for(lambda n=n: finalized(n.host, n.controller_port) == want, WAIT_S,
                       f"controller {n.node_id}'s ApiVersions with {want}")
        resp = asyncio.run(_api_versions(node.host, node.client_port))
        assert {f.name: (int(f.min_version), int(f.max_version))
                for f in resp.supported_features}["metadata.version"] == (21, 33)
        traffic.send()
        p = skiff(c, broker, "features", "downgrade", "--metadata", "4.0", "--unsafe")
        assert p.returncode != 0 and "Unsafe metadata downgrade is not supported" in p.stderr
        traffic.check("classic")
        traffic.check("consumer")  # KIP-848, enabled by group.version 1
        # the levels survive a whole-cluster restart (they are in the log and snapshots)
        c.restart(c.controller_ids[0])
        assert features_json(c, broker)["metadata.version"] == 27


def test_static_quorum_kraft_version_upgrade_then_add_controller(tmp_path: Any) -> None:
    with Cluster(tmp_path, controllers=3, brokers=1) as c:
        broker = c.broker_ids[0]
        assert features_json(c, broker)["kraft.version"] == 0
        third = c.controller_ids[-1]
        p = skiff(c, broker, "quorum", "add-controller", "--config",
                  str(c.nodes[third].config_path))
        assert p.returncode != 0 and "static voters" in p.stdout + p.stderr, p.stderr
        out = skiff_ok(c, broker, "features", "upgrade", "--feature", "kraft.version=1")
        assert "kraft.version was upgraded to 1." in out
        assert features_json(c, broker)["kraft.version"] == 1
        n = c.nodes[broker]
        c.wait_for(lambda: finalized(n.host, n.client_port).get("kraft.version") == 1,
                   WAIT_S, "kraft.version 1 in ApiVersions")
        d = json.loads(skiff_ok(c, broker, "quorum", "describe", "-o", "json"))
        dirs = {int(v["replica_id"]): v.get("directory_id", "") for v in d["voters"]}
        assert sorted(dirs) == c.controller_ids
        for i in c.controller_ids:
            meta = (c.nodes[i].metadata_dir / "meta.properties").read_text()
            assert f"directory.id={dirs[i]}" in meta, (i, dirs)
        p = skiff(c, broker, "features", "downgrade", "--feature", "kraft.version=0")
        assert p.returncode != 0 and "Downgrading kraft.version is not supported" in p.stderr
        # the voter set is now dynamic: remove one voter, then add it back
        # `=`: a directory id is URL-safe base64 and may start with "-"
        skiff_ok(c, broker, "quorum", "remove-controller", "--controller-id", str(third),
                 f"--controller-directory-id={dirs[third]}")

        def voters() -> list[int]:
            d = json.loads(skiff_ok(c, broker, "quorum", "describe", "-o", "json"))
            return sorted(int(v["replica_id"]) for v in d["voters"])

        c.wait_for(lambda: voters() == [i for i in c.controller_ids if i != third] or None,
                   WAIT_S, f"controller {third} removed")
        skiff_ok(c, broker, "quorum", "add-controller", "--config",
                 str(c.nodes[third].config_path))
        c.wait_for(lambda: voters() == c.controller_ids or None, WAIT_S,
                   f"controller {third} a voter again")
        skiff_ok(c, broker, "topics", "create", "after", "--partitions", "1",
                 "--replication-factor", "1")
        # a restart of every controller keeps kraft.version 1 and the voters
        for i in c.controller_ids:
            c.restart(i)
        assert voters() == c.controller_ids
        assert features_json(c, broker)["kraft.version"] == 1


def test_a_cluster_formatted_before_feature_levels_starts_at_3_9(tmp_path: Any) -> None:
    """A Skiff from before feature levels wrote metadata.version 1 (its own numbering) into
    the bootstrap file; today's nodes support 3.9-IV0 (21) and up. The first active
    controller lifts it: the cluster starts, serves a producer, and reports 21."""
    from broker.metadata.storage import BOOTSTRAP_CHECKPOINT, write_bootstrap

    c = Cluster(tmp_path, controllers=1, brokers=1)
    c.format()
    for node in c.nodes.values():
        path = write_bootstrap(node.metadata_dir, c.cluster_id,
                               levels={"metadata.version": 1})
        assert path.name == BOOTSTRAP_CHECKPOINT
    with c:
        n = c.nodes[c.broker_ids[0]]
        c.wait_for(lambda: finalized(n.host, n.client_port).get("metadata.version") == 21,
                   WAIT_S, "metadata.version 3.9-IV0 finalized")
        traffic = Traffic(c, "legacy")
        traffic.send()
        traffic.check("classic")
