"""`skiff server start --auto-format`: what a container's first start formats, and when it
refuses; SKIFF_CLUSTER_ID is read by it and is not taken for a node property."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.cli.server import auto_format
from broker.config import load_config
from broker.metadata.storage import StorageError, read_meta_properties
from broker.protocol.kafka_uuid import random_kafka_uuid


def combined(tmp: Path, voters: str = "1@localhost:9093") -> dict[str, str]:
    return {
        "process.roles": "broker,controller", "node.id": "1",
        "controller.quorum.voters": voters,
        "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(tmp / "data"),
    }


def test_single_combined_node_formats_with_a_random_id(tmp_path: Path) -> None:
    cfg = load_config(None, combined(tmp_path), {})
    auto_format(cfg, None)
    meta = read_meta_properties(tmp_path / "data")
    assert meta is not None and meta.node_id == 1
    # a second start keeps what the first one wrote
    auto_format(cfg, None)
    again = read_meta_properties(tmp_path / "data")
    assert again is not None and again.cluster_id == meta.cluster_id


def test_cluster_node_without_cluster_id_is_refused(tmp_path: Path) -> None:
    cfg = load_config(None, combined(tmp_path, "1@c1:9093,2@c2:9093,3@c3:9093"), {})
    with pytest.raises(StorageError, match="SKIFF_CLUSTER_ID"):
        auto_format(cfg, None)
    assert not (tmp_path / "data").exists()


def test_given_cluster_id_is_written(tmp_path: Path) -> None:
    cluster_id = random_kafka_uuid()
    cfg = load_config(None, combined(tmp_path, "1@c1:9093,2@c2:9093,3@c3:9093"), {})
    auto_format(cfg, cluster_id)
    meta = read_meta_properties(tmp_path / "data")
    assert meta is not None and meta.cluster_id == cluster_id


def test_cluster_id_env_is_not_a_node_property(tmp_path: Path) -> None:
    warnings: list[str] = []
    cfg = load_config(None, combined(tmp_path),
                      {"SKIFF_CLUSTER_ID": random_kafka_uuid(), "SKIFF_NODE_ID": "1"},
                      warn=warnings.append)
    assert warnings == []
    assert "cluster.id" not in cfg.originals


def dynamic_controller(tmp: Path, node_id: int) -> dict[str, str]:
    """A controller of a KIP-853 quorum, as deploy/kubernetes/base/controller.properties."""
    return {
        "process.roles": "controller", "node.id": str(node_id),
        "controller.quorum.bootstrap.servers": "c0:9093,c1:9093,c2:9093",
        "listeners": "CONTROLLER://:9093", "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT",
        "log.dirs": str(tmp / f"data-{node_id}"),
    }


def test_initial_controllers_format_a_listed_controller_and_a_joiner(tmp_path: Path) -> None:
    """`skiff kube cluster-secret`'s SKIFF_INITIAL_CONTROLLERS: a listed controller gets
    that voter set with its own directory id; an unlisted one (a scale-up) joins later."""
    from broker.metadata.storage import read_bootstrap_voters
    from broker.protocol.kafka_uuid import kafka_to_uuid

    cluster_id, dirs = random_kafka_uuid(), [random_kafka_uuid() for _ in range(3)]
    initial = ",".join(f"{i}@c{i}:9093:{d}" for i, d in enumerate(dirs))
    listed = load_config(None, dynamic_controller(tmp_path, 1), {})
    auto_format(listed, cluster_id, initial_controllers=initial)
    meta = read_meta_properties(tmp_path / "data-1")
    assert meta is not None and meta.directory_id == dirs[1]
    voters = read_bootstrap_voters(tmp_path / "data-1")
    assert sorted((v.node_id, v.directory_id) for v in voters) == [
        (i, kafka_to_uuid(d)) for i, d in enumerate(dirs)]
    joiner = load_config(None, dynamic_controller(tmp_path, 3), {})
    auto_format(joiner, cluster_id, initial_controllers=initial)
    assert read_meta_properties(tmp_path / "data-3") is not None
    assert read_bootstrap_voters(tmp_path / "data-3") is None


def test_scram_credentials_from_a_file_reach_the_bootstrap_metadata(tmp_path: Path) -> None:
    from broker.cli.server import read_scram_file
    from broker.metadata.storage import BOOTSTRAP_CHECKPOINT

    users = tmp_path / "users"
    users.write_text("# users of the cluster\nSCRAM-SHA-512=[name=alice,password=a s3cret]\n\n"
                     "SCRAM-SHA-256=[name=bob,password=b]\n")
    scram = read_scram_file(str(users))
    assert scram == ["SCRAM-SHA-512=[name=alice,password=a s3cret]",
                     "SCRAM-SHA-256=[name=bob,password=b]"]
    cfg = load_config(None, combined(tmp_path), {})
    auto_format(cfg, random_kafka_uuid(), add_scram=scram)
    checkpoint = (tmp_path / "data" / BOOTSTRAP_CHECKPOINT).read_bytes()
    assert b"alice" in checkpoint and b"bob" in checkpoint
    with pytest.raises(StorageError, match="add-scram-file"):
        read_scram_file(str(tmp_path / "missing"))


def test_initial_controllers_env_is_not_a_node_property(tmp_path: Path) -> None:
    warnings: list[str] = []
    load_config(None, combined(tmp_path), {"SKIFF_INITIAL_CONTROLLERS": "0@c0:9093:x"},
                warn=warnings.append)
    assert warnings == []
