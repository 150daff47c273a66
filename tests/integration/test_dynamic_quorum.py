"""KIP-853 on real processes: a quorum that starts as one controller formatted --standalone
grows to three with `skiff quorum add-controller` (each new controller an observer that
catches up, then a voter), survives kill -9 of its leader, and shrinks with
`skiff quorum remove-controller`.  The broker and the joining controllers have no
controller.quorum.voters: they find the quorum through controller.quorum.bootstrap.servers."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from typing import Any

import pytest

from broker.protocol.kafka_uuid import uuid_to_kafka
from broker.testing.cluster import REPO_ROOT, Cluster

pytestmark = pytest.mark.timeout(300)
WAIT_S = 60.0


def skiff(c: Cluster, via: int, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "broker.cli.main", *args, "--bootstrap",
         c.admin_address(via), "--timeout", "20"],
        capture_output=True, text=True, timeout=60, cwd=REPO_ROOT)


def describe(c: Cluster, via: int) -> dict[str, Any] | None:
    p = skiff(c, via, "quorum", "describe", "-o", "json")
    if p.returncode != 0:
        return None
    out: dict[str, Any] = json.loads(p.stdout)
    return out


def voters(c: Cluster, via: int) -> list[int]:
    d = describe(c, via)
    return sorted(int(v.get("replica_id", 0)) for v in d.get("voters", [])) if d else []


def add_controller(c: Cluster, node_id: int, via: int) -> None:
    """Retried while the new controller is not yet a caught-up observer (or leadership
    moves): the leader answers REQUEST_TIMED_OUT then, as Kafka's does."""
    deadline = time.monotonic() + WAIT_S
    last = ""
    while time.monotonic() < deadline:
        p = skiff(c, via, "quorum", "add-controller", "--config",
                  str(c.nodes[node_id].config_path))
        if p.returncode == 0:
            return
        last = p.stdout + p.stderr
        time.sleep(0.5)
    raise AssertionError(f"add-controller {node_id} never succeeded: {last}\n{c.log_tails()}")


def create_topic(c: Cluster, via: int, name: str) -> None:
    deadline = time.monotonic() + WAIT_S
    last = ""
    while time.monotonic() < deadline:
        p = skiff(c, via, "topics", "create", name, "--partitions", "1",
                  "--replication-factor", "1")
        if p.returncode == 0:
            return
        last = p.stdout + p.stderr
        time.sleep(0.5)
    raise AssertionError(f"topic {name} not created: {last}\n{c.log_tails()}")


def test_standalone_quorum_grows_fails_over_and_shrinks(tmp_path: Any) -> None:
    with Cluster(tmp_path, controllers=3, brokers=1, dynamic_voters=True) as c:
        # every node runs; controllers 2 and 3 are observers of the standalone quorum
        broker = c.broker_ids[0]
        assert voters(c, broker) == [1]
        d = describe(c, broker)
        assert d is not None
        assert {2, 3} <= {int(o.get("replica_id", 0)) for o in d.get("observers", [])}, d
        # one at a time: observer -> caught up -> voter
        for i in (2, 3):
            add_controller(c, i, via=broker)
            c.wait_for(lambda i=i: i in voters(c, broker), WAIT_S, f"controller {i} a voter")
        assert voters(c, broker) == [1, 2, 3]
        d = describe(c, broker)
        assert d is not None
        dirs = {int(v["replica_id"]): v.get("directory_id", "") for v in d["voters"]}
        for i in (1, 2, 3):
            meta = (c.nodes[i].metadata_dir / "meta.properties").read_text()
            assert f"directory.id={dirs[i]}" in meta
        create_topic(c, broker, "before-failover")

        leader = c.wait_for(lambda: c.active_controller() if c.active_controller() > 0
                            else None, WAIT_S, "a quorum leader")
        c.kill(leader)
        survivors = [i for i in (1, 2, 3) if i != leader]
        c.wait_for(lambda: c.active_controller() in survivors or None, WAIT_S,
                   "a new leader among the survivors")
        create_topic(c, broker, "after-failover")  # the quorum keeps committing

        # remove the dead voter by id and directory id
        p = subprocess.CompletedProcess[str]([], 1, "", "")
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            # `=`: a directory id is URL-safe base64 and may start with "-"
            p = skiff(c, broker, "quorum", "remove-controller", "--controller-id",
                      str(leader), f"--controller-directory-id={dirs[leader]}")
            if p.returncode == 0:
                break
            time.sleep(0.5)
        assert p.returncode == 0, p.stdout + p.stderr
        c.wait_for(lambda: voters(c, broker) == survivors or None, WAIT_S,
                   f"voters {survivors}")
        create_topic(c, broker, "after-removal")
        # the id with another (or no) directory id is not the voter
        for other in (uuid_to_kafka(uuid.uuid4()), "AAAAAAAAAAAAAAAAAAAAAA"):
            p = skiff(c, broker, "quorum", "remove-controller", "--controller-id",
                      str(survivors[0]), f"--controller-directory-id={other}")
            assert p.returncode != 0 and "VOTER_NOT_FOUND" in p.stderr, p.stdout + p.stderr
        assert voters(c, broker) == survivors
