"""The classes broker/protocol/kio_next_gen.py generates for the Kafka 4.4 versions kio 0.6.5
lacks (ApiVersions v5, TxnOffsetCommit v6, DeleteGroups v3, StreamsGroupHeartbeat and
StreamsGroupDescribe v1, StreamsGroupTopologyDescriptionUpdate v0), on kio's serial runtime.

REFERENCE holds Kafka 4.4's own encoding of a sample of each message: the output of
`NewVersions ref` (tests/java/src/skiff/compat/versions), which tests/compat/kafka/
test_java_new_versions.py re-runs and compares with these constants. Each decodes with the
generated class to the sample's values and re-encodes byte for byte. The generator itself is
checked against kio: run on the previous versions' schemas it gives kio's own fields."""

from __future__ import annotations

import dataclasses
import importlib
import io
import json
import sys
import uuid
import zipfile
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from kio.serial import entity_reader, entity_writer

from broker.protocol import api, kio_next_gen

TOPIC_ID = uuid.UUID(bytes=bytes(range(16)))

# name -> (api key, version, request?, Kafka's bytes (hex), checks on the decoded entity)
REFERENCE: dict[str, tuple[int, int, bool, str, dict[str, Any]]] = {
    "api_versions_request": (
        18, 5, True, "0b736b6966662d7465737404312e300c436c75737465722d6162630000000700",
        {"client_software_name": "skiff-test", "cluster_id": "Cluster-abc", "node_id": 7}),
    "api_versions_request_defaults": (
        18, 5, True, "0263023100ffffffff00", {"cluster_id": None, "node_id": -1}),
    "api_versions_response": (
        18, 5, False, "008102001200000005000000000000", {"error_code": 129}),
    "txn_offset_commit_request": (
        28, 6, True,
        "0374780267000000000000002a000300000005026d0002000102030405060708090a0b0c0d0e0f0200000001"
        "000000000000006400000002036d64000000",
        {"transactional_id": "tx", "group_id": "g", "producer_id": 42, "producer_epoch": 3,
         "generation_id_or_member_epoch": 5, "member_id": "m", "group_instance_id": None}),
    "txn_offset_commit_response": (
        28, 6, False, "0000000002000102030405060708090a0b0c0d0e0f02000000010064000000", {}),
    "delete_groups_request": (42, 3, True, "030261026200", {"groups_names": ("a", "b")}),
    "delete_groups_response": (
        42, 3, False,
        "000000000302610000000002620044185468652067726f7570206973206e6f7420656d7074792e0000", {}),
    # KIP-1331
    "streams_group_heartbeat_response": (
        88, 1, False,
        "00000000000000026d00000003000013880000ea600000000000002710010202300300000000000000010001"
        "0101000000010000",
        {"member_id": "m", "member_epoch": 3, "acceptable_recovery_lag": 10000,
         "topology_description_required": True, "endpoint_information_epoch": 1}),
    "streams_group_describe_request": (
        89, 1, True, "020267000100", {"group_ids": ("g",), "include_topology_description": True}),
    "streams_group_describe_response": (
        89, 1, False,
        "0000000002000000026707537461626c650000000200000002010000000101000180000000010202300304"
        "737263010203696e0001020461676700046167670201000207636f756e74730100000204737263010203696e"
        "0001020461676700046167670201000207636f756e7473010000000307737469636b790000", {}),
    "streams_group_topology_description_update_request": (
        93, 0, True, "0267026d00000001020230020573696e6b0301046f757401010000010000",
        {"group_id": "g", "member_id": "m", "topology_epoch": 1}),
    "streams_group_topology_description_update_response": (
        93, 0, False, "0000000000230a6e6f20706c7567696e00",
        {"error_code": 35, "error_message": "no plugin"}),
}


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_kafka_bytes_decode_and_reencode(name: str) -> None:
    key, version, is_request, hexed, checks = REFERENCE[name]
    schema = (api.request_schema if is_request else api.response_schema)(key, version)
    assert schema.__module__.startswith("broker.protocol._kio_next.")
    data = bytes.fromhex(hexed)
    entity, consumed = entity_reader(schema)(memoryview(data), 0)
    assert consumed == len(data)
    for field, want in checks.items():
        assert getattr(entity, field) == want, field
    out = io.BytesIO()
    entity_writer(schema)(out, entity)
    assert out.getvalue() == data


def test_decoded_nested_values() -> None:
    req = entity_reader(api.request_schema(28, 6))(
        memoryview(bytes.fromhex(REFERENCE["txn_offset_commit_request"][3])), 0)[0]
    (topic,) = req.topics
    assert topic.topic_id == TOPIC_ID
    (p,) = topic.partitions
    assert (p.partition_index, p.committed_offset, p.committed_leader_epoch,
            p.committed_metadata) == (1, 100, 2, "md")
    resp = entity_reader(api.response_schema(42, 3))(
        memoryview(bytes.fromhex(REFERENCE["delete_groups_response"][3])), 0)[0]
    assert [(r.group_id, int(r.error_code), r.error_message) for r in resp.results] == [
        ("a", 0, None), ("b", 68, "The group is not empty.")]


def test_decoded_topology_description() -> None:
    resp = entity_reader(api.response_schema(89, 1))(
        memoryview(bytes.fromhex(REFERENCE["streams_group_describe_response"][3])), 0)[0]
    [g] = resp.groups
    assert (g.topology_description_status, g.assignor_name) == (3, "sticky")
    [sub] = g.topology_description.subtopologies
    assert [(n.name, n.node_type, n.source_topics, n.stores, n.successors) for n in sub.nodes] \
        == [("src", 1, ("in",), (), ("agg",)), ("agg", 2, (), ("counts",), ())]
    [store] = g.topology_description.global_stores
    assert (store.source.name, store.processor.name) == ("src", "agg")
    push = entity_reader(api.request_schema(93, 0))(memoryview(bytes.fromhex(
        REFERENCE["streams_group_topology_description_update_request"][3])), 0)[0]
    [node] = push.topology_description.subtopologies[0].nodes
    assert (node.name, node.node_type, node.sink_topic) == ("sink", 3, "out")


def test_served_versions_have_classes() -> None:
    for key, version in ((18, 5), (28, 6), (42, 3), (88, 1), (89, 1), (93, 0)):
        assert not api.has_current_kio_schema(key, version)  # kio 0.6.5 lacks them
        assert api.has_kio_schema(key, version)
        assert api.BROKER_APIS.supports(key, version)
    assert api.response_schema(18, 5).__header_schema__.__name__ == "ResponseHeader"
    assert api.is_flexible(42, 3)


needs_jar = pytest.mark.skipif(not kio_next_gen.DEFAULT_JAR.exists(),
                               reason="Kafka 4.4's jar is resolved by tests/run.sh (Maven)")


@needs_jar
def test_generator_is_reproducible(tmp_path: Path) -> None:
    out = tmp_path / "_kio_next"
    kio_next_gen.generate(kio_next_gen.DEFAULT_JAR, out)
    committed = kio_next_gen.OUT_DIR
    files = sorted(p.relative_to(out) for p in out.rglob("*.py"))
    assert files == sorted(p.relative_to(committed) for p in committed.rglob("*.py"))
    for rel in files:
        assert (out / rel).read_text() == (committed / rel).read_text(), rel


def _load(text: str, name: str) -> ModuleType:
    module = ModuleType(name)
    sys.modules[name] = module  # dataclasses look their module up while the class is made
    try:
        exec(compile(text, name, "exec"), module.__dict__)
    finally:
        del sys.modules[name]
    return module


def _shape(module: ModuleType) -> dict[str, list[tuple[str, Any, Any]]]:
    """Each dataclass: its fields' (name, metadata, default), and its class variables."""
    out: dict[str, list[tuple[str, Any, Any]]] = {}
    for cls_name, cls in vars(module).items():
        if not dataclasses.is_dataclass(cls) or cls.__module__ != module.__name__:
            continue
        fields = [(f.name, dict(f.metadata), f.default) for f in dataclasses.fields(cls)]
        fields.append(("__class__", (cls.__type__, int(cls.__version__), cls.__flexible__,
                                     int(cls.__api_key__)), cls.__header_schema__))
        out[cls_name] = fields
    return out


@needs_jar
@pytest.mark.parametrize(("api_name", "kafka_name", "version"), [
    ("api_versions", "ApiVersions", 4), ("api_versions", "ApiVersions", 3),
    ("txn_offset_commit", "TxnOffsetCommit", 5), ("txn_offset_commit", "TxnOffsetCommit", 2),
    ("delete_groups", "DeleteGroups", 2), ("delete_groups", "DeleteGroups", 1),
    ("streams_group_heartbeat", "StreamsGroupHeartbeat", 0),
    ("streams_group_describe", "StreamsGroupDescribe", 0),
])
def test_generator_matches_kio_on_older_versions(api_name: str, kafka_name: str,
                                                 version: int) -> None:
    """Kafka 4.4's schema at a version kio 0.6.5 has: the same fields, metadata, defaults and
    class variables as kio's module (only Kafka's renames since 4.1 are mapped)."""
    renamed = {"generation_id_or_member_epoch": "generation_id",
               "acceptable_recovery_lag_legacy": "acceptable_recovery_lag"}
    with zipfile.ZipFile(kio_next_gen.DEFAULT_JAR) as jar:
        for kind in ("request", "response"):
            schema, source = kio_next_gen.load_schema(jar, f"{kafka_name}{kind.capitalize()}")
            ours = _shape(_load(kio_next_gen.render_module(schema, version, source),
                               f"_kio_next_probe_{api_name}_{kind}"))
            kio = _shape(importlib.import_module(f"kio.schema.{api_name}.v{version}.{kind}"))
            ours = {c: [(renamed.get(n, n), m, d) for n, m, d in fs] for c, fs in ours.items()}
            assert json.dumps(ours, default=repr, sort_keys=True) == json.dumps(
                kio, default=repr, sort_keys=True)
