"""A successful voter change (KIP-853) side by side: Kafka 4.4's kafka-metadata-quorum
add-controller and remove-controller against a Kafka 4.4 dynamic quorum and against Skiff's,
each step's output compared (tests/support/kafka_tools.py), and the voters and observers
after each step compared through both bootstraps (`describe --status`, `--replication`).

The two clusters have the same shape: controller 1 formatted `--standalone` (the first
voter), controller 2 formatted `--no-initial-controllers` (it fetches as an observer until
added), broker 3; every node finds the quorum through `controller.quorum.bootstrap.servers`.
Kafka needs no broker for add/remove-controller (`--bootstrap-controller` reaches the
controllers); broker 3 is there for `--bootstrap-server`, whose AddRaftVoter and
RemoveRaftVoter the broker forwards to the controllers. Two rounds: add through a broker and
remove through the controllers, then the other way round (re-adding the removed controller).

Normalised: each side's controller addresses (`<ctrl1>`, `<ctrl2>`), directory ids (`<dirN>`,
node N's from its meta.properties), cluster id, epochs, offsets, lags and times; the voters
and observers listed in id order (Kafka lists its observers from a hash map). Refusals are
test_tools_quorum.py's.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from broker.testing.cluster import Cluster
from broker.testing.kafka_ref import CLUSTER_READY_TIMEOUT_S
from tests.compat.kafka.tool_differences import VOTERS
from tests.compat.kafka.tools_support import quorum_replication, quorum_status
from tests.support.kafka_ref import KafkaNode, random_cluster_id, tool
from tests.support.kafka_tools import BrokerPair

MODULE = "tests/compat/kafka/test_tools_quorum_voters.py"
pytestmark = [pytest.mark.timeout(600), pytest.mark.xdist_group(f"kafka-ref:{MODULE}")]
READY_S = 180.0
SETTLE_S = 90.0
QUORUM = "kafka-metadata-quorum"
VIA = {"server": ("--bootstrap-server", "{bootstrap}"),
       "controller": ("--bootstrap-controller", "{ctrl1}")}
COUNTERS = ("LeaderEpoch", "HighWatermark", "MaxFollowerLag", "MaxFollowerLagTimeMs")
STATUS_ORDER = {"Leader": 0, "Follower": 1, "Observer": 2}


def meta_properties(log_dir: Path) -> dict[str, str]:
    text = (log_dir / "meta.properties").read_text()
    return dict(line.split("=", 1) for line in text.splitlines()
                if "=" in line and not line.startswith("#"))


def start_kafka(nodes: dict[int, KafkaNode]) -> None:
    cluster_id = random_cluster_id()
    nodes[1].format(cluster_id)
    nodes[2].format(cluster_id, standalone=False, no_initial_controllers=True)
    nodes[3].format(cluster_id, standalone=False)
    for node in nodes.values():
        node.start()
    deadline = time.monotonic() + CLUSTER_READY_TIMEOUT_S
    for node in nodes.values():
        node.wait_ready(max(1.0, deadline - time.monotonic()))


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[tuple[dict[int, KafkaNode], Cluster]]:
    kdir = tmp_path_factory.mktemp("voters-kafka")
    first = KafkaNode(kdir / "node-1", node_id=1, roles=("controller",))
    kafka = {1: first,
             2: KafkaNode(kdir / "node-2", node_id=2, roles=("controller",),
                          quorum_bootstrap=first.controller_bootstrap),
             3: KafkaNode(kdir / "node-3", node_id=3, roles=("broker",),
                          quorum_bootstrap=first.controller_bootstrap)}
    skiff = Cluster(tmp_path_factory.mktemp("voters-skiff"), controllers=2, brokers=1,
                    dynamic_voters=True)
    try:
        with ThreadPoolExecutor(2) as pool:
            started = [pool.submit(start_kafka, kafka), pool.submit(skiff.start, READY_S)]
            for f in started:
                f.result()
        yield kafka, skiff
    finally:
        skiff.stop()
        for node in reversed(kafka.values()):  # the broker first, while its controller runs
            node.close()


@pytest.fixture(scope="module")
def pair(clusters: tuple[dict[int, KafkaNode], Cluster]) -> BrokerPair:
    kafka, skiff = clusters
    kafka_meta = {i: meta_properties(n.data_dir / "data") for i, n in kafka.items()}
    skiff_meta = {i: meta_properties(n.metadata_dir) for i, n in skiff.nodes.items()}
    return BrokerPair(
        kafka=kafka[3].bootstrap, skiff=skiff.nodes[3].bootstrap, differences=VOTERS,
        kafka_names={"ctrl1": kafka[1].controller_bootstrap,
                     "ctrl2": kafka[2].controller_bootstrap,
                     "config2": str(kafka[2].config_path),
                     "cluster": kafka_meta[1]["cluster.id"],
                     **{f"dir{i}": m["directory.id"] for i, m in kafka_meta.items()}},
        skiff_names={"ctrl1": f"127.0.0.1:{skiff.nodes[1].controller_port}",
                     "ctrl2": f"127.0.0.1:{skiff.nodes[2].controller_port}",
                     "config2": str(skiff.nodes[2].config_path),
                     "cluster": skiff.cluster_id,
                     **{f"dir{i}": m["directory.id"] for i, m in skiff_meta.items()}})


def status_shape(text: str) -> str:
    """describe --status with its counters as <n> and voters and observers in id order."""
    lines = []
    for line in text.splitlines():
        key, _, value = line.partition(": ")
        if key in ("CurrentVoters", "CurrentObservers"):
            line = f"{key}: {json.dumps(sorted(json.loads(value), key=lambda r: r['id']))}"
        elif key in COUNTERS:
            line = f"{key}: <n>"
        lines.append(line)
    return "\n".join(lines)


def replication_shape(text: str) -> str:
    """describe --replication: each row's id, directory id and status (offsets, lags and
    times as <n>, -1 kept: never fetched / never caught up), rows in status then id order."""
    head: list[str] = []
    rows: list[list[str]] = []
    for line in text.splitlines():
        cells = line.split(" ")
        if len(cells) == 7 and cells[0].isdigit() and cells[6] in STATUS_ORDER:
            rows.append([*cells[:2], *(c if c == "-1" else "<n>" for c in cells[2:6]),
                         cells[6]])
        else:
            head.append(line)
    rows.sort(key=lambda r: (STATUS_ORDER[r[6]], int(r[0])))
    return "\n".join([*head, *(" ".join(r) for r in rows)])


def describe(pair: BrokerPair, when: str) -> None:
    for how in ("server", "controller"):
        pair.same(f"voters.{when}.status.{how}", QUORUM, *VIA[how], "describe", "--status",
                  normalise=status_shape)
        pair.same(f"voters.{when}.replication.{how}", QUORUM, *VIA[how], "describe",
                  "--replication", normalise=replication_shape)


def settle(pair: BrokerPair, voters: list[int], observers: list[int]) -> None:
    """Until each side's quorum, asked through its first controller, has these voters and
    observers and node 2 is caught up (Kafka's leader adds only a caught-up observer)."""
    def one(target: tuple[str, str]) -> None:
        name, ctrl1 = target
        deadline = time.monotonic() + SETTLE_S
        seen: object = None
        while time.monotonic() < deadline:
            st = tool(QUORUM, "--bootstrap-controller", ctrl1, "describe", "--status")
            rep = tool(QUORUM, "--bootstrap-controller", ctrl1, "describe", "--replication")
            if st.returncode == 0 and rep.returncode == 0:
                status = quorum_status(st.stdout)
                rows = {int(r["NodeId"]): r for r in quorum_replication(rep.stdout)[1]}
                seen = (sorted(int(v["id"]) for v in status["CurrentVoters"]),
                        sorted(int(o["id"]) for o in status["CurrentObservers"]),
                        rows.get(2))
                if seen[:2] == (voters, observers) and rows.get(2, {}).get("Lag") == "0":
                    return
            time.sleep(0.5)
        raise AssertionError(f"{name}: not {voters} voters / {observers} observers with node 2 "
                             f"caught up after {SETTLE_S:.0f}s: {seen}")

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(one, (("kafka", pair.kafka_names["ctrl1"]),
                            ("skiff", pair.skiff_names["ctrl1"]))))


def test_add_and_remove_a_controller_as_kafka(pair: BrokerPair) -> None:
    settle(pair, voters=[1], observers=[2, 3])
    describe(pair, "before")
    for add_via, remove_via in (("server", "controller"), ("controller", "server")):
        added = pair.same(f"voters.add.{add_via}", QUORUM, *VIA[add_via], "--command-config",
                          "{config2}", "add-controller")
        assert (added.returncode, added.stdout) == (
            0, "Added controller 2 with directory id <dir2> and endpoints: "
               "CONTROLLER://<ctrl2>"), added.text()
        settle(pair, voters=[1, 2], observers=[3])
        describe(pair, f"added.{add_via}")

        removed = pair.same(f"voters.remove.{remove_via}", QUORUM, *VIA[remove_via],
                            "remove-controller", "--controller-id", "2",
                            "--controller-directory-id", "{dir2}")
        assert (removed.returncode, removed.stdout) == (
            0, "Removed KRaft controller 2 with directory id <dir2>"), removed.text()
        settle(pair, voters=[1], observers=[2, 3])
        describe(pair, f"removed.{remove_via}")
