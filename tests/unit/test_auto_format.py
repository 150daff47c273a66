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
