"""The Apache Kafka 4.4 Java client against Skiff, over four listeners (and two more for
key and trust stores in Java's formats).

One combined Skiff node for the module serves four client listeners: PLAINTEXT, MTLS (SSL
with ssl.client.auth=required), SCRAM (SASL_SSL, SCRAM-SHA-512, users written at format
time) and SASLPLAIN (SASL_PLAINTEXT, PLAIN from the listener's JAAS config). The Java
client reads PEM trust and key stores, so no keytool is needed.

One JVM (tests/java/src/skiff/compat/clients/ClientCases.java) runs every case on every
listener, the listeners in parallel, and prints one JSON line per (listener, case) with
what the client sent and what it read back; the tests here parse those lines and assert.
The same program runs against the reference Kafka 4.4 node (PLAINTEXT) and the same
assertions hold there: they are Kafka's behaviour, not Skiff's.

Cases: producer acks 0/1/all, idempotence, the five codecs, headers, explicit timestamps, a
record at the topic's max.message.bytes and one byte over; transactions (commit, abort,
sendOffsetsToTransaction), fencing by a second producer with the same transactional.id,
read_committed and the last stable offset; classic groups with the range and
cooperative-sticky assignors, static membership, group.protocol=consumer (KIP-848); seek,
offsetsForTimes, beginningOffsets, endOffsets.

The same node serves two more mTLS listeners whose key and trust stores are keytool-made
files: JKS (Kafka's default ssl.keystore.type, with a key password of its own) and PKCS12.
The Java client connects to each with client stores of the same format (and to a Kafka 4.4
node serving the same two listeners from the same files, where the same holds),
confluent-kafka and kafka-python with PEM files; a wrong store password stops a node's
startup with Kafka's message.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from broker.testing.cluster import Cluster, free_ports
from broker.testing.tls import JavaStores, Pki, have_openssl, make_java_stores, make_pki
from tests.support.kafka_ref import KafkaNode, run_program

pytestmark = [
    pytest.mark.timeout(600),
    # the cases' results come through request.getfixturevalue("results"), which runs them
    # on the reference too: declared, so tests/conftest.py runs this file among the other
    # kafka_ref users, whose node its worker then keeps rather than starts again
    pytest.mark.usefixtures("kafka_ref"),
    pytest.mark.skipif(not have_openssl(), reason="openssl not installed (tests/run.sh checks)"),
]

PROGRAM = "skiff.compat.clients.ClientCases"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
LISTENERS = ["PLAINTEXT", "MTLS", "SCRAM", "SASLPLAIN"]
STORE_LISTENERS = {"JKS": "JKS", "P12": "PKCS12"}  # listener -> its stores' type
REFERENCE = "KAFKA_4_4"
CASES = ["acks", "idempotence", "codecs", "headers", "timestamps", "max_message",
         "transactions", "fencing", "read_committed", "group_range", "group_cooperative",
         "static_membership", "group_consumer_protocol", "offsets"]
# A node's first start on a 2-core machine shared with other suites has taken over 60 s.
START_TIMEOUT_S = 150.0
Results = dict[tuple[str, str], dict[str, Any]]


def _client_properties(listener: str, bootstrap: str, pki: Pki) -> dict[str, str]:
    props = {"bootstrap.servers": bootstrap}
    tls = {"ssl.truststore.type": "PEM", "ssl.truststore.location": pki.ca}
    if listener == "MTLS":
        props.update(tls, **{"security.protocol": "SSL", "ssl.keystore.type": "PEM",
                             "ssl.keystore.location": pki.keystore("alice")})
    elif listener == "SCRAM":
        props.update(tls, **{"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                             "sasl.jaas.config":
                                 f'{SCRAM} required username="alice" password="alice-secret";'})
    elif listener == "SASLPLAIN":
        props.update({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                      "sasl.jaas.config":
                          f'{PLAIN} required username="alice" password="alice-secret";'})
    return props


def _run_cases(base: Path, prefix: str, bootstraps: dict[str, dict[str, str]]) -> Results:
    args = [prefix]
    for name, props in bootstraps.items():
        path = base / f"{name.lower()}.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        args.append(f"{name}={path}")
    proc = run_program(PROGRAM, *args, "--", *CASES, timeout=420)
    (base / "java.stderr").write_text(proc.stderr)
    (base / "java.stdout").write_text(proc.stdout)  # per case: "ms", what was sent and read
    results: Results = {}
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            results[(r["listener"], r["case"])] = r
    assert proc.returncode == 0, f"java exited {proc.returncode}:\n{proc.stderr[-4000:]}"
    return results


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def java_stores(pki: Pki) -> JavaStores:
    return make_java_stores(pki)


def _store_listener_config(stores: JavaStores) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, store_type in STORE_LISTENERS.items():
        pre = f"listener.name.{name.lower()}."
        out.update({
            pre + "ssl.keystore.type": store_type,
            pre + "ssl.keystore.location": stores.keystore("server", store_type),
            pre + "ssl.keystore.password": stores.store_password,
            pre + "ssl.truststore.type": store_type,
            pre + "ssl.truststore.location": stores.truststore(store_type),
            pre + "ssl.truststore.password": stores.trust_password,
            pre + "ssl.client.auth": "required",
        })
        if store_type == "JKS":
            out[pre + "ssl.key.password"] = stores.key_password
    return out


@pytest.fixture(scope="module")
def skiff_node(tmp_path_factory: pytest.TempPathFactory, pki: Pki,
               java_stores: JavaStores) -> Iterator[tuple[Cluster, dict[str, str]]]:
    """One combined Skiff node with the four client listeners and the two store listeners;
    yields the cluster and listener -> address."""
    cluster = Cluster(tmp_path_factory.mktemp("java-clients-node"), controllers=1, brokers=0,
                      combined=True, add_scram=["SCRAM-SHA-512=[name=alice,password=alice-secret]"],
                      overrides={
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,MTLS:SSL,SCRAM:SASL_SSL,"
                                          "SASLPLAIN:SASL_PLAINTEXT,JKS:SSL,P12:SSL,"
                                          "CONTROLLER:PLAINTEXT",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": pki.keystore("server"),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": pki.ca,
        "listener.name.mtls.ssl.client.auth": "required",
        **_store_listener_config(java_stores),
        "listener.name.scram.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.scram.scram-sha-512.sasl.jaas.config": f"{SCRAM} required;",
        "listener.name.saslplain.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.saslplain.plain.sasl.jaas.config":
            f'{PLAIN} required user_alice="alice-secret";',
        # a single node: the internal topics at RF 1, as Kafka's sample server.properties
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
    })
    node = cluster.nodes[1]
    names = [*LISTENERS, *STORE_LISTENERS]
    ports = dict(zip(names[1:], free_ports(len(names) - 1), strict=True))
    ports["PLAINTEXT"] = node.client_port or 0
    client = ",".join(f"{name}://127.0.0.1:{ports[name]}" for name in names)
    cluster.node_overrides[1] = {
        "listeners": f"{client},CONTROLLER://127.0.0.1:{node.controller_port}",
        "advertised.listeners": client,
    }
    try:
        cluster.start(timeout=START_TIMEOUT_S)
        yield cluster, {name: f"127.0.0.1:{ports[name]}" for name in names}
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def skiff_four_listeners(skiff_node: tuple[Cluster, dict[str, str]]) -> dict[str, str]:
    return {name: addr for name, addr in skiff_node[1].items() if name in LISTENERS}


@pytest.fixture(scope="module")
def results(skiff_four_listeners: dict[str, str], kafka_ref: KafkaNode, pki: Pki,
            tmp_path_factory: pytest.TempPathFactory) -> Results:
    """The program against Skiff (four listeners) and against Kafka 4.4, run together."""
    skiff = {name: _client_properties(name, addr, pki)
             for name, addr in skiff_four_listeners.items()}
    reference = {REFERENCE: _client_properties("PLAINTEXT", kafka_ref.bootstrap, pki)}
    # Skiff's four listeners in two programs beside Kafka's one: each listener's cases take
    # ~25 s, mostly waiting on group rebalances, so three JVMs at once take a third of the time
    # of one running all listeners in turn (topic names carry the listener, so they never meet)
    names = sorted(skiff)
    halves = [{n: skiff[n] for n in names[::2]}, {n: skiff[n] for n in names[1::2]}]
    with ThreadPoolExecutor(3) as pool:
        on_skiff = [pool.submit(_run_cases, tmp_path_factory.mktemp("java-skiff"), "skiff", half)
                    for half in halves]
        on_kafka = pool.submit(_run_cases, tmp_path_factory.mktemp("java-kafka"),
                               f"ref{int(time.time())}", reference)
        out = on_kafka.result()
        for run in on_skiff:
            out.update(run.result())
        return out


@pytest.fixture(params=[*LISTENERS, REFERENCE])
def listener(request: pytest.FixtureRequest) -> str:
    return str(request.param)


# lines of the node's log shown with any failure besides the listener's own: what the
# transaction coordinator refused or lost, and leadership or fencing under the node
_NODE_EVENTS = ("end_txn_refused", "coordinator_unloaded", "coordinator_loaded", "_write_error",
                "txn_verification", "txn_marker", "brokers_fenced", "broker_fenced",
                "broker_unfenced", "metadata_leader_changed", "leaders_rebalanced")


def _result(request: pytest.FixtureRequest, listener: str, case: str) -> dict[str, Any]:
    results: Results = request.getfixturevalue("results")
    r = results.get((listener, case))
    assert r is not None, f"the Java program printed no result for {case} on {listener}"
    if not r["ok"]:
        broker_log = ""
        if listener in LISTENERS:  # what Skiff logged about this listener's topics and ids
            cluster, _ = request.getfixturevalue("skiff_node")
            marker = f"-{listener.lower()}-"
            lines = [ln for ln in cluster.nodes[1].log_path.read_text(errors="replace")
                     .splitlines() if marker in ln or any(w in ln for w in _NODE_EVENTS)]
            broker_log = "\nSkiff's log:\n" + "\n".join(lines[-60:])
        elif listener == REFERENCE:  # Kafka's lines about this case's topics, else its tail
            kafka: KafkaNode = request.getfixturevalue("kafka_ref")
            text = kafka.log_path.read_text(errors="replace")
            lines = [ln for ln in text.splitlines() if f"-{listener.lower()}-{case}" in ln]
            broker_log = "\nKafka's log:\n" + ("\n".join(lines[-40:]) or text[-4000:])
        pytest.fail(f"{case} on {listener} failed in the client at step {r.get('step')!r}:\n"
                    f"{r.get('error')}{broker_log}")
    return r


def values(records: list[dict[str, Any]]) -> list[str | None]:
    return [r.get("v") for r in records]


# ---- producer --------------------------------------------------------------------------

def test_acks(request: pytest.FixtureRequest, listener: str) -> None:
    r = _result(request, listener, "acks")
    records = r["records"]
    assert [x["o"] for x in records] == list(range(15))
    for i, acks in enumerate(["0", "1", "all"]):
        mine = records[5 * i:5 * i + 5]
        assert [x["k"] for x in mine] == [f"acks{acks}-k{j}" for j in range(5)]
        assert values(mine) == [f"acks{acks}-v{j}" for j in range(5)]
        sent = r["sent"][acks]
        if acks == "0":  # no response: the producer cannot know the offset
            assert [m["o"] for m in sent] == [-1] * 5
        else:
            assert [m["o"] for m in sent] == [x["o"] for x in mine]
            assert [m["ts"] for m in sent] == [x["ts"] for x in mine]
    assert {x["tt"] for x in records} == {"CreateTime"}


def test_idempotence(request: pytest.FixtureRequest, listener: str) -> None:
    r = _result(request, listener, "idempotence")
    records = r["records"]
    for p in range(3):
        mine = [x for x in records if x["p"] == p]
        assert values(mine) == [f"idem-{i}" for i in range(300) if i % 3 == p]
        assert [x["o"] for x in mine] == list(range(100))
    by_value = {x["v"]: (x["p"], x["o"]) for x in records}
    assert [(m["p"], m["o"]) for m in r["sent"]] == [by_value[f"idem-{i}"] for i in range(300)]


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_codecs(request: pytest.FixtureRequest, listener: str, codec: str) -> None:
    r = _result(request, listener, "codecs")["codecs"][codec]
    records = r["records"]
    assert [x["o"] for x in records] == list(range(40))
    assert [x["k"] for x in records] == [f"{codec}-k{i}" for i in range(40)]
    assert values(records) == [f"{codec}-{i}-" + "abcdefgh" * (i % 7 + 1) for i in range(40)]
    assert [(m["o"], m["ts"]) for m in r["sent"]] == [(x["o"], x["ts"]) for x in records]


def test_headers(request: pytest.FixtureRequest, listener: str) -> None:
    records = _result(request, listener, "headers")["records"]
    assert len(records) == 3
    assert records[0]["k"] == "with-headers" and records[0]["v"] == "v0"
    assert records[0]["h"] == [["dup", "first"], ["z", ""], ["nul", None], ["dup", "second"],
                               ["a", "x"], ["ünï", "ħ€"], ["dup", "third"]]
    assert records[1]["k"] == "no-headers" and records[1]["h"] == []
    assert records[2]["k"] is None and records[2]["v"] is None
    assert records[2]["h"] == [["only", None]]


def test_timestamps(request: pytest.FixtureRequest, listener: str) -> None:
    r = _result(request, listener, "timestamps")
    records = r["records"]
    explicit = r["stamps"][:-1]
    assert [x["ts"] for x in records[:-1]] == explicit
    assert r["before_ms"] <= records[-1]["ts"] <= r["after_ms"]  # stamped by the producer
    assert {x["tt"] for x in records} == {"CreateTime"}
    assert [m["ts"] for m in r["sent"]] == [x["ts"] for x in records]
    assert [x["o"] for x in records] == list(range(len(r["stamps"])))


def test_max_message_bytes(request: pytest.FixtureRequest, listener: str) -> None:
    r = _result(request, listener, "max_message")
    assert r["at_limit_batch"] == r["limit"] and r["over_limit_batch"] == r["limit"] + 1
    assert r["at_limit"]["o"] == 0
    assert "over_limit" not in r
    assert r["over_limit_error"] == "RecordTooLargeException"
    assert r["after"]["o"] == 1
    records = r["records"]
    assert len(records) == 2
    assert records[0]["vlen"] == r["at_limit_len"]
    assert records[0]["vsha"] == r["at_limit_sha"]
    assert records[1]["v"] == "after"


# ---- transactions ----------------------------------------------------------------------

def test_transactions(request: pytest.FixtureRequest, listener: str) -> None:
    r = _result(request, listener, "transactions")
    committed = r["read_committed"]
    # partition 0: c1 at 0-2, commit marker 3, aborted 4-6, abort marker 7, c2 at 8-10
    assert [(x["p"], x["o"], x["v"]) for x in committed if x["p"] == 0] == [
        (0, 0, "c1-0"), (0, 1, "c1-2"), (0, 2, "c1-4"),
        (0, 8, "c2-0"), (0, 9, "c2-2"), (0, 10, "c2-4")]
    assert [(x["o"], x["v"]) for x in committed if x["p"] == 1] == [
        (0, "c1-1"), (1, "c1-3"), (6, "c2-1"), (7, "c2-3")]
    uncommitted = r["read_uncommitted"]
    assert [(x["o"], x["v"]) for x in uncommitted if x["p"] == 0] == [
        (0, "c1-0"), (1, "c1-2"), (2, "c1-4"), (4, "a-0"), (5, "a-2"), (6, "a-4"),
        (8, "c2-0"), (9, "c2-2"), (10, "c2-4")]
    assert len(uncommitted) == 15
    in_topic = next(iter(r["committed_offsets"]))
    assert in_topic.endswith("-txn-in-0")
    assert r["committed_offsets"] == {in_topic: [42, "tx-meta"]}


def test_fencing(request: pytest.FixtureRequest, listener: str) -> None:
    """A second producer's InitProducerId bumps the epoch and aborts the first one's
    transaction. Kafka 4.4 (transaction.version 2): the fenced producer's next Produce gets
    INVALID_PRODUCER_EPOCH, which its commit then rethrows; an EndTxn with the old epoch
    (no send in between) gets PRODUCER_FENCED."""
    r = _result(request, listener, "fencing")
    assert r["first_send_error"] == "InvalidProducerEpochException", r
    assert r["first_commit_error"] == "InvalidProducerEpochException", r
    assert r["commit_only_error"] == "ProducerFencedException", r
    assert values(r["read_committed"]) == ["second-1", "second-2"]


def test_read_committed_stops_at_the_last_stable_offset(request: pytest.FixtureRequest,
                                                        listener: str) -> None:
    r = _result(request, listener, "read_committed")
    assert r["open_end_read_committed"] == 2   # the open transaction's first offset
    assert r["open_end_read_uncommitted"] == 5
    assert values(r["open_read_committed"]) == ["plain-0", "plain-1"]
    assert r["open_position_read_committed"] == 2
    assert r["committed_end_read_committed"] == 6  # past the commit marker
    assert [(x["o"], x["v"]) for x in r["committed_read_committed"]] == [
        (2, "open-0"), (3, "open-1"), (4, "open-2")]


# ---- consumer groups -------------------------------------------------------------------

def _check_group(r: dict[str, Any], group_type: str) -> None:
    assert r["first_alone"] == [0, 1, 2, 3]
    owned = [set(o) for o in r["owned"]]
    assert owned[0] | owned[1] == {0, 1, 2, 3} and not owned[0] & owned[1]
    assert [len(o) for o in owned] == [2, 2]
    assert [set(o) for o in r["owned_after"]] == owned
    records = r["records"]
    for mine, parts in zip(records, owned, strict=True):
        assert {x["p"] for x in mine} <= parts
    assert sorted(values(records[0] + records[1]), key=lambda v: int(str(v)[1:])) == \
        [f"v{i}" for i in range(40)]
    g = r["group"]
    assert g["type"] == group_type and g["state"] == "Stable"
    assert sorted(m["partitions"] for m in g["members"]) == sorted(sorted(o) for o in owned)
    assert g["committed"] == {str(p): 10 for p in range(4)}


def test_group_range(request: pytest.FixtureRequest, listener: str) -> None:
    r = _result(request, listener, "group_range")
    _check_group(r, "Classic")
    assert sorted(sorted(o) for o in r["owned"]) == [[0, 1], [2, 3]]
    assert r["group"]["assignor"] == "range"
    first, second = r["events"]
    # eager: the first member gives everything back before the second joins
    assert first[:2] == [["assigned", [0, 1, 2, 3]], ["revoked", [0, 1, 2, 3]]]
    assert first[-1] == ["assigned", sorted(r["owned"][0])]
    assert second == [["assigned", sorted(r["owned"][1])]]


def test_group_cooperative_sticky(request: pytest.FixtureRequest, listener: str) -> None:
    r = _result(request, listener, "group_cooperative")
    _check_group(r, "Classic")
    assert r["group"]["assignor"] == "cooperative-sticky"
    first, second = r["events"]
    assert first[0] == ["assigned", [0, 1, 2, 3]]
    revoked = [e[1] for e in first if e[0] == "revoked"]
    # incremental: only the partitions that moved are revoked, once
    assert revoked == [sorted(r["owned"][1])]
    assert [e for e in first if e[0] == "lost"] == []
    assert sorted(p for e in second if e[0] == "assigned" for p in e[1]) == sorted(r["owned"][1])


def test_group_consumer_protocol(request: pytest.FixtureRequest, listener: str) -> None:
    r = _result(request, listener, "group_consumer_protocol")
    _check_group(r, "Consumer")
    # The consumer protocol calls onPartitionsAssigned after every reconciliation, also with
    # nothing: a heartbeat answered before the coordinator's metadata holds the new topic
    # (seen with Skiff on a loaded machine) is followed by the real assignment.
    first, second = ([e for e in events if e != ["assigned", []]] for events in r["events"])
    assert first[0] == ["assigned", [0, 1, 2, 3]]
    revoked = [p for e in first if e[0] == "revoked" for p in e[1]]
    assert sorted(revoked) == sorted(r["owned"][1])
    assert sorted(p for e in second if e[0] == "assigned" for p in e[1]) == sorted(r["owned"][1])


def test_static_membership(request: pytest.FixtureRequest, listener: str) -> None:
    r = _result(request, listener, "static_membership")
    # RangeAssignor orders static members by group.instance.id
    assert r["owned"] == [[0, 1], [2, 3]]
    assert sorted(m["instance"] for m in r["group"]["members"]) == ["a", "b"]
    assert r["owned_after"] == [[0, 1], [2, 3]]
    assert r["b_events_after"] == []  # the replacement of a caused no rebalance
    assert r["a2_events"] == [["assigned", [0, 1]]]
    after = {m["instance"]: m["partitions"] for m in r["group_after"]["members"]}
    assert after == {"a": [0, 1], "b": [2, 3]}


# ---- offsets ---------------------------------------------------------------------------

def test_offsets_seek_and_times(request: pytest.FixtureRequest, listener: str) -> None:
    r = _result(request, listener, "offsets")
    base = r["base"]
    assert r["beginning"] == 0 and r["end"] == 10
    times = r["for_times"]
    assert times["0"] == [0, base]
    assert times[str(base)] == [0, base]
    assert times[str(base + 3500)] == [4, base + 4000]
    assert times[str(base + 9000)] == [9, base + 9000]
    assert times[str(base + 9001)] is None
    assert list(times.values())[-1] is None  # now: later than every record
    assert r["after_seek_5"][0]["o"] == 5 and r["after_seek_5"][0]["v"] == "v5"
    assert r["position_end"] == 10 and r["position_beginning"] == 0
    assert r["beginning_after_delete"] == 3 and r["position_beginning_after_delete"] == 3


# ---- JKS and PKCS12 key and trust stores ----------------------------------------------

def _java_store_properties(address: str, stores: JavaStores, store_type: str) -> dict[str, str]:
    props = {"bootstrap.servers": address, "security.protocol": "SSL",
             "ssl.keystore.type": store_type,
             "ssl.keystore.location": stores.keystore("alice", store_type),
             "ssl.keystore.password": stores.store_password,
             "ssl.truststore.type": store_type,
             "ssl.truststore.location": stores.truststore(store_type),
             "ssl.truststore.password": stores.trust_password}
    if store_type == "JKS":
        props["ssl.key.password"] = stores.key_password
    return props


@pytest.fixture(scope="module")
def kafka_store_node(tmp_path_factory: pytest.TempPathFactory,
                     java_stores: JavaStores) -> Iterator[dict[str, str]]:
    """A Kafka 4.4 node with the same two store listeners (the same files and settings);
    yields listener -> address."""
    ports = dict(zip(STORE_LISTENERS, free_ports(len(STORE_LISTENERS)), strict=True))
    node = KafkaNode(tmp_path_factory.mktemp("java-stores-kafka"),
                     listeners={name: ("SSL", port) for name, port in ports.items()},
                     overrides=_store_listener_config(java_stores))
    try:
        node.start()
        node.wait_ready()
        yield {name: f"127.0.0.1:{port}" for name, port in ports.items()}
    finally:
        node.close()


def _store_clients(addresses: dict[str, str], stores: JavaStores,
                   d: Path) -> dict[str, dict[str, Any]]:
    d.mkdir(parents=True, exist_ok=True)
    args = []
    for name, store_type in STORE_LISTENERS.items():
        props = _java_store_properties(addresses[name], stores, store_type)
        # refused: under TLS 1.3 the client may only see the connection close, and retry
        # until its API timeout, so that timeout is short
        no_cert = {k: v for k, v in props.items() if not k.startswith("ssl.key")}
        no_cert.update({"default.api.timeout.ms": "4000", "request.timeout.ms": "2000"})
        for case, p in ((name.lower(), props), (f"{name.lower()}-nocert", no_cert)):
            path = d / f"{case}.properties"
            path.write_text("".join(f"{k}={v}\n" for k, v in p.items()))
            args.append(f"{case}={path}")
    proc = run_program("skiff.compat.tls.StoreClients", *args, timeout=240)
    (d / "java.stdout").write_text(proc.stdout)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return {r["name"]: r for r in map(json.loads, (x for x in proc.stdout.splitlines()
                                                   if x.startswith("{")))}


def test_java_client_with_jks_and_pkcs12_stores(
        skiff_node: tuple[Cluster, dict[str, str]], kafka_store_node: dict[str, str],
        java_stores: JavaStores, tmp_path: Path) -> None:
    """The Java client authenticates with its own JKS / PKCS12 store to listeners whose key
    and trust stores are JKS / PKCS12; without a client certificate it is refused. The same
    program runs against Kafka 4.4 with the same stores, and the same holds there."""
    with ThreadPoolExecutor(2) as pool:
        on = {target: pool.submit(_store_clients, addresses, java_stores, tmp_path / target)
              for target, addresses in (("skiff", skiff_node[1]), ("kafka", kafka_store_node))}
        runs = {target: f.result() for target, f in on.items()}
    for target, out in runs.items():
        for name in STORE_LISTENERS:
            ok = out[name.lower()]
            assert ok["status"] == "ok", (target, ok)
            assert ok["consumed"] == ok["produced"] == [f"{name.lower()}-{i}" for i in range(20)]
            refused = out[f"{name.lower()}-nocert"]
            assert refused["status"] in ("SslAuthenticationException", "TimeoutException"), \
                (target, refused)


def test_python_clients_with_pem_on_store_listeners(
        skiff_node: tuple[Cluster, dict[str, str]], pki: Pki) -> None:
    """PEM client certificates (confluent-kafka, kafka-python) against the JKS and PKCS12
    backed listeners: the server's store format is invisible to clients."""
    from confluent_kafka import Producer
    from kafka import KafkaConsumer, TopicPartition

    for name in STORE_LISTENERS:
        topic = f"stores-pem-{name.lower()}"
        address = skiff_node[1][name]
        producer = Producer({"bootstrap.servers": address, "security.protocol": "ssl",
                             "ssl.ca.location": pki.ca,
                             "ssl.certificate.location": pki.path("bob.pem"),
                             "ssl.key.location": pki.path("bob.key"), "log_level": 0})
        for i in range(10):
            producer.produce(topic, f"{name}-{i}".encode())
        assert producer.flush(30) == 0
        consumer = KafkaConsumer(bootstrap_servers=address, security_protocol="SSL",
                                 ssl_cafile=pki.ca, ssl_certfile=pki.path("alice.pem"),
                                 ssl_keyfile=pki.path("alice.key"), consumer_timeout_ms=10000,
                                 enable_auto_commit=False)
        try:
            consumer.assign([TopicPartition(topic, 0)])
            consumer.seek_to_beginning()
            got = [m.value.decode() for _, m in zip(range(10), consumer, strict=False)]
        finally:
            consumer.close()
        assert got == [f"{name}-{i}" for i in range(10)]


BAD_STORES = [
    ("listener.name.jks.ssl.keystore.password", "wrong",
     "Failed to load SSL keystore {jks} of type JKS: keystore password was incorrect"),
    ("listener.name.jks.ssl.key.password", "wrong", "Cannot recover key"),
    ("listener.name.p12.ssl.truststore.password", "wrong",
     "Failed to load SSL keystore {p12trust} of type PKCS12: keystore password was incorrect"),
]


def test_bad_store_stops_startup(skiff_node: tuple[Cluster, dict[str, str]],
                                 java_stores: JavaStores) -> None:
    """The node's own file with one store password wrong: the startup check (check_tls)
    names the store and Java's reason for each; `skiff server start` runs once with the
    first and exits 1 before serving (the running node is untouched)."""
    from broker.config import ConfigError, load_config
    from broker.security.tls import check_tls

    config = skiff_node[0].nodes[1].config_path
    paths = {"jks": java_stores.keystore("server", "JKS"),
             "p12trust": java_stores.truststore("PKCS12")}
    for key, value, message in BAD_STORES:
        with pytest.raises(ConfigError) as refused:
            check_tls(load_config(str(config), [f"{key}={value}"], {}))
        assert message.format(**paths) in str(refused.value)
        assert f"listener.name.{key.split('.')[2]}.ssl." in str(refused.value)
    key, value, message = BAD_STORES[0]
    proc = subprocess.run([sys.executable, "-m", "broker.cli.main", "server", "start",
                           str(config), "--override", f"{key}={value}"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stderr
    assert message.format(**paths) in proc.stderr
