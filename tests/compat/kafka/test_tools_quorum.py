"""Kafka 4.4's kafka-metadata-quorum against Skiff (issue 30): describe --status and
--replication through a broker (--bootstrap-server) and straight from the controllers
(--bootstrap-controller, KIP-919), and KIP-853's add-controller / remove-controller both
ways, compared with the reference Kafka 4.4 node where the output is comparable (a
successful add and remove side by side with a Kafka 4.4 dynamic quorum of the same shape:
test_tools_quorum_voters.py).

One Skiff cluster for the module: three controllers and one broker with dynamic voters
(controller 1 formatted --standalone, 2 and 3 observers until added, as docs/raft.md says).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from broker.testing.cluster import Cluster
from tests.compat.kafka.tools_support import ok, quorum_replication, quorum_status, until_ok
from tests.support.kafka_ref import KafkaNode, tool

pytestmark = pytest.mark.timeout(600)
READY_S = 180.0  # generous: CI machines here are shared
STATUS_KEYS = ["ClusterId", "LeaderId", "LeaderEpoch", "HighWatermark", "MaxFollowerLag",
               "MaxFollowerLagTimeMs", "CurrentVoters", "CurrentObservers"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("quorum-tools"), controllers=3, brokers=1,
                dynamic_voters=True)
    try:
        c.start(timeout=READY_S)
        yield c
    finally:
        c.stop()


def controllers(c: Cluster) -> str:
    return ",".join(f"127.0.0.1:{c.nodes[i].controller_port}" for i in c.controller_ids)


def directory_id(c: Cluster, node_id: int) -> str:
    meta = (c.nodes[node_id].metadata_dir / "meta.properties").read_text()
    return next(line.split("=", 1)[1] for line in meta.splitlines()
                if line.startswith("directory.id="))


def via(c: Cluster, how: str) -> list[str]:
    return ["--bootstrap-server", c.bootstrap_servers] if how == "server" \
        else ["--bootstrap-controller", controllers(c)]


def status(c: Cluster, how: str) -> dict[str, object]:
    return quorum_status(ok("kafka-metadata-quorum", *via(c, how), "describe", "--status").stdout)


def observer_ids(st: dict[str, object]) -> set[int]:
    return {int(o["id"]) for o in st["CurrentObservers"]}  # type: ignore[attr-defined]


def status_with_every_observer(c: Cluster, how: str) -> dict[str, object]:
    """The status once nodes 2, 3 and 4 are listed: the leader lists an observer from its
    first fetch in the leader's epoch, which a node still starting (CI, under load) has not
    sent yet; a listNodes timeout while the controllers settle is asked again too."""
    deadline = time.monotonic() + 60
    while True:
        try:
            st = status(c, how)
            if observer_ids(st) >= {2, 3, 4} or time.monotonic() > deadline:
                return st
        except AssertionError:
            if time.monotonic() > deadline:
                raise
        time.sleep(1)


def voter_ids(st: dict[str, object]) -> list[int]:
    return sorted(int(v["id"]) for v in st["CurrentVoters"])  # type: ignore[attr-defined]


@pytest.mark.parametrize("how", ["server", "controller"])
def test_describe_status(cluster: Cluster, kafka_ref: KafkaNode, how: str) -> None:
    st = status_with_every_observer(cluster, how)
    assert list(st) == STATUS_KEYS, st
    assert st["ClusterId"] == cluster.cluster_id
    assert int(str(st["LeaderId"])) == cluster.active_controller() == 1
    assert int(str(st["HighWatermark"])) > 0
    [voter] = st["CurrentVoters"]  # type: ignore[misc]
    assert voter == {"id": 1, "directoryId": directory_id(cluster, 1),
                     "endpoints": [f"CONTROLLER://127.0.0.1:{cluster.nodes[1].controller_port}"]}
    # the other controllers and the broker fetch the metadata log as observers, each named
    # with the directory id of its metadata log dir, as Kafka reports them
    observers = {int(o["id"]): o.get("directoryId") for o in st["CurrentObservers"]}  # type: ignore[attr-defined]
    assert observers == {i: directory_id(cluster, i) for i in (2, 3, 4)}

    # the reference answers the same question with the same keys, in the same order
    ref_via = ["--bootstrap-server", kafka_ref.bootstrap] if how == "server" \
        else ["--bootstrap-controller", kafka_ref.controller_bootstrap]
    ref = quorum_status(ok("kafka-metadata-quorum", *ref_via, "describe", "--status").stdout)
    assert list(ref) == STATUS_KEYS
    assert [sorted(v) for v in ref["CurrentVoters"]] == [sorted(voter)]


@pytest.mark.parametrize("how", ["server", "controller"])
def test_describe_replication(cluster: Cluster, kafka_ref: KafkaNode, how: str) -> None:
    header, rows = quorum_replication(
        ok("kafka-metadata-quorum", *via(cluster, how), "describe", "--replication").stdout)
    ref_via = ["--bootstrap-server", kafka_ref.bootstrap] if how == "server" \
        else ["--bootstrap-controller", kafka_ref.controller_bootstrap]
    ref_header, ref_rows = quorum_replication(
        ok("kafka-metadata-quorum", *ref_via, "describe", "--replication").stdout)
    assert header == ref_header == ["NodeId", "DirectoryId", "LogEndOffset", "Lag",
                                    "LastFetchTimestamp", "LastCaughtUpTimestamp", "Status"]
    assert [r["Status"] for r in ref_rows] == ["Leader"]
    by_id = {int(r["NodeId"]): r for r in rows}
    assert by_id[1]["Status"] == "Leader"
    assert {i: by_id[i]["Status"] for i in (2, 3, 4)} == {i: "Observer" for i in (2, 3, 4)}
    for i in (1, 2, 3, 4):
        assert by_id[i]["DirectoryId"] == directory_id(cluster, i)
        assert int(by_id[i]["LogEndOffset"]) > 0 and int(by_id[i]["Lag"]) >= 0
        assert int(by_id[i]["LastFetchTimestamp"]) > 1_700_000_000_000


def test_add_and_remove_controllers_both_ways(cluster: Cluster) -> None:
    """add-controller reads the new controller's own properties file (--command-config: its
    node.id, controller listener and the directory id in its meta.properties) and sends
    AddRaftVoter; remove-controller sends RemoveRaftVoter by id and directory id."""
    until_ok("kafka-metadata-quorum", *via(cluster, "server"), "--command-config",
             str(cluster.nodes[2].config_path), "add-controller")
    cluster.wait_for(lambda: voter_ids(status(cluster, "controller")) == [1, 2], 60,
                     "controller 2 a voter")
    added = until_ok("kafka-metadata-quorum", *via(cluster, "controller"), "--command-config",
                     str(cluster.nodes[3].config_path), "add-controller")
    assert f"Added controller 3 with directory id {directory_id(cluster, 3)}" in added.stdout
    st = cluster.wait_for(lambda: (s := status(cluster, "server")) and voter_ids(s) == [1, 2, 3]
                          and s, 60, "controller 3 a voter")
    assert {int(o["id"]) for o in st["CurrentObservers"]} == {4}  # type: ignore[union-attr,index]

    # a wrong directory id is not the voter: Kafka's VOTER_NOT_FOUND, nothing removed
    refused = tool("kafka-metadata-quorum", *via(cluster, "controller"), "remove-controller",
                   "--controller-id", "3", "--controller-directory-id", directory_id(cluster, 2))
    assert refused.returncode != 0
    assert "VoterNotFoundException" in refused.stdout + refused.stderr, refused.stderr[-2000:]

    removed = until_ok("kafka-metadata-quorum", *via(cluster, "server"), "remove-controller",
                       "--controller-id", "3", "--controller-directory-id",
                       directory_id(cluster, 3))
    assert "Removed KRaft controller 3" in removed.stdout, removed.stdout
    st = cluster.wait_for(lambda: (s := status(cluster, "controller")) and voter_ids(s) == [1, 2]
                          and s, 60, "controller 3 removed")
    assert int(str(st["LeaderId"])) in (1, 2)
    # the quorum still commits: a topic made through the broker after the changes
    ok("kafka-topics", "--bootstrap-server", cluster.bootstrap_servers, "--create",
       "--topic", "after-voter-changes", "--partitions", "1", "--replication-factor", "1")



@pytest.mark.parametrize("how", ["server", "controller"])
def test_voter_refusals_as_kafka(cluster: Cluster, kafka_ref: KafkaNode, how: str) -> None:
    """AddRaftVoter and RemoveRaftVoter refused by the quorum, through a broker (which
    forwards them, as Kafka's brokers do) and straight to the controllers, side by side with
    the reference: adding the node that is already the first voter (each side's own node 1,
    from its properties file) and removing a voter neither quorum has."""
    unknown = "AAAAAAAAAAAAAAAAAAAAAQ"
    sides = ((via(cluster, how), cluster.nodes[1].config_path),
             ((["--bootstrap-server", kafka_ref.bootstrap] if how == "server"
               else ["--bootstrap-controller", kafka_ref.controller_bootstrap]),
              kafka_ref.config_path))

    def first_line(out: object) -> str:
        """The error, each side's directory ids and voter set aside (the voter sets differ:
        Skiff's has the controllers the test above added; Kafka's is its one node)."""
        text = getattr(out, "stdout", "") + getattr(out, "stderr", "")
        line = next((line for line in text.splitlines() if line.strip()), "")
        line = re.sub(r"set of voters \[.*\]", "set of voters <voters>", line)
        return re.sub(r"directoryId=[A-Za-z0-9_-]{22}", "directoryId=<id>", line)

    for step in ("add", "remove"):
        def one(side: tuple[list[str], object], step: str = step) -> object:
            bootstrap, config = side
            if step == "add":
                return tool("kafka-metadata-quorum", *bootstrap, "--command-config",
                            str(config), "add-controller")
            return tool("kafka-metadata-quorum", *bootstrap, "remove-controller",
                        "--controller-id", "99", "--controller-directory-id", unknown)
        with ThreadPoolExecutor(2) as pool:
            skiff, ref = pool.map(one, sides)
        assert skiff.returncode != 0 and ref.returncode != 0, (skiff, ref)
        assert first_line(skiff) == first_line(ref), (step, skiff, ref)
        assert ("DuplicateVoterException: The voter id for ReplicaKey(id=1, directoryId=<id>)"
                if step == "add" else "VoterNotFoundException: Cannot remove voter ReplicaKey("
                "id=99, directoryId=<id>)") in first_line(ref), first_line(ref)


# ---- what else an admin client bootstrapped from the controllers gets (KIP-919, issue 36) ----

# On Kafka 4.4's controller listener and not on Skiff's, each for a reason (docs/compatibility.md):
# SASL on the controller listener (17, 36), delegation tokens (38-41: brokers send the token
# writes in an Envelope, 58, which Skiff's controller listener serves for those alone),
# UnregisterController (94, Kafka 4.4, unknown to kio).
NOT_ON_SKIFF_CONTROLLER = {17, 36, 38, 39, 40, 41, 94}
# The admin APIs KIP-919 serves there, at the same version ranges as Kafka's.
KIP_919_APIS = {29, 32, 33, 44, 50, 55, 60}


def _api_versions(bootstrap: str) -> dict[int, tuple[int, int]]:
    from kio.schema.api_versions.v3 import request as av

    from tests.support.differential import KafkaWire, build

    with KafkaWire(bootstrap) as w:
        resp = w.send(build(av.ApiVersionsRequest, client_software_name="skiff-tests",
                            client_software_version="1"))
    assert resp.error_code.value == 0
    return {int(a.api_key): (int(a.min_version), int(a.max_version)) for a in resp.api_keys}


def test_controller_listener_api_versions(cluster: Cluster, kafka_ref: KafkaNode) -> None:
    skiff = _api_versions(f"127.0.0.1:{cluster.nodes[1].controller_port}")
    ref = _api_versions(kafka_ref.controller_bootstrap)
    assert set(skiff) == set(ref) - NOT_ON_SKIFF_CONTROLLER, (sorted(skiff), sorted(ref))
    assert {k: skiff[k] for k in KIP_919_APIS} == {k: ref[k] for k in KIP_919_APIS}


def test_configs_through_the_controllers(cluster: Cluster, kafka_ref: KafkaNode) -> None:
    """kafka-configs --bootstrap-controller: DescribeConfigs of each controller and of the
    cluster default, and an IncrementalAlterConfigs of the cluster default Kafka allows
    there, seen through the brokers afterwards; the same steps on the reference."""
    def steps(ctrl: str, brokers: str) -> None:
        described = ok("kafka-configs", "--bootstrap-controller", ctrl, "--describe",
                       "--entity-type", "brokers").stdout
        assert "Dynamic configs for broker 1 are:" in described, described
        assert "Default configs for brokers in the cluster are:" in described, described
        ok("kafka-configs", "--bootstrap-controller", ctrl, "--alter", "--entity-type",
           "brokers", "--entity-default", "--add-config", "log.cleaner.threads=2")
        try:
            line = ("log.cleaner.threads=2 sensitive=false "
                    "synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.cleaner.threads=2}")
            for how in (["--bootstrap-controller", ctrl], ["--bootstrap-server", brokers]):
                out = until_ok("kafka-configs", *how, "--describe", "--entity-type", "brokers",
                               "--entity-default").stdout
                assert line in out, out
        finally:
            ok("kafka-configs", "--bootstrap-controller", ctrl, "--alter", "--entity-type",
               "brokers", "--entity-default", "--delete-config", "log.cleaner.threads")

    # Skiff and the reference side by side (each side's steps in order)
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda a: steps(*a), (
            (controllers(cluster), cluster.bootstrap_servers),
            (kafka_ref.controller_bootstrap, kafka_ref.bootstrap))))
    # A key Kafka's brokers refuse as not dynamic: Kafka's controller stores it when asked
    # directly (the brokers' ConfigAdminManager check is skipped); Skiff's controller refuses
    # it with the brokers' error (docs/compatibility.md lists the difference).
    with ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(lambda ctrl: tool(
            "kafka-configs", "--bootstrap-controller", ctrl, "--alter", "--entity-type",
            "brokers", "--entity-default", "--add-config", "log.dirs=/tmp/x"),
            (controllers(cluster), kafka_ref.controller_bootstrap)))
    ok("kafka-configs", "--bootstrap-controller", kafka_ref.controller_bootstrap, "--alter",
       "--entity-type", "brokers", "--entity-default", "--delete-config", "log.dirs")
    skiff, ref = answers
    assert ref.returncode == 0, ref.stderr[-2000:]
    assert skiff.returncode != 0
    assert "InvalidRequestException: Cannot update these configs dynamically: [log.dirs]" \
        in skiff.stderr, skiff.stderr[-2000:]

def test_acls_and_scram_through_the_controllers(cluster: Cluster, kafka_ref: KafkaNode) -> None:
    """kafka-acls --bootstrap-controller --list (no authorizer on either: Kafka's
    SECURITY_DISABLED with its words) and DescribeUserScramCredentials sent to the
    controllers (kafka-configs --entity-type users cannot be bootstrapped from controllers:
    the Java admin client refuses DescribeClientQuotas there, against Kafka too)."""
    from kio.schema.describe_user_scram_credentials.v0 import request as dus

    from tests.support.differential import KafkaWire, build

    with ThreadPoolExecutor(2) as pool:
        outs = list(pool.map(lambda ctrl: tool("kafka-acls", "--bootstrap-controller", ctrl,
                                               "--list"),
                             (controllers(cluster), kafka_ref.controller_bootstrap)))
    assert [o.returncode for o in outs] == [1, 1]
    assert [o.stdout.splitlines()[0] for o in outs] == [
        "Error while executing ACL command: org.apache.kafka.common.errors."
        "SecurityDisabledException: No Authorizer is configured on the broker"] * 2, outs[0]

    user = "scram-through-controllers"
    seen = []
    for ctrl, brokers in ((f"127.0.0.1:{cluster.nodes[1].controller_port}",
                           cluster.bootstrap_servers),
                          (kafka_ref.controller_bootstrap, kafka_ref.bootstrap)):
        ok("kafka-configs", "--bootstrap-server", brokers, "--alter", "--entity-type", "users",
           "--entity-name", user, "--add-config", "SCRAM-SHA-512=[iterations=8192,password=pw]")
        try:
            with KafkaWire(ctrl) as w:
                resp = w.send(build(dus.DescribeUserScramCredentialsRequest,
                                    users=[{"name": user}, {"name": "nobody-here"}]))
            seen.append((resp.error_code.value, [
                (r.user, r.error_code.value, [(int(c.mechanism), int(c.iterations))
                                              for c in r.credential_infos])
                for r in resp.results]))
        finally:
            ok("kafka-configs", "--bootstrap-server", brokers, "--alter", "--entity-type",
               "users", "--entity-name", user, "--delete-config", "SCRAM-SHA-512")
    # Kafka 4.4's controller lists DescribeUserScramCredentials in ApiVersions but does not
    # handle it (ControllerApis: "Unsupported ApiKey", UNKNOWN_SERVER_ERROR; with users null
    # it never answers); Skiff's answers as its brokers do (docs/compatibility.md).
    assert seen[0] == (0, [(user, 0, [(2, 8192)]), ("nobody-here", 91, [])]), seen
    assert seen[1] == (-1, [("", -1, []), ("", -1, [])]), seen
