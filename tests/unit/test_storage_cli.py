from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from broker.config import load_config, parse_properties
from broker.metadata.storage import (
    BOOTSTRAP_CHECKPOINT,
    METADATA_VERSION,
    StorageError,
    ensure_formatted,
    format_storage,
    read_bootstrap,
    read_meta_properties,
)
from broker.protocol.kafka_uuid import kafka_to_uuid, random_kafka_uuid, uuid_to_kafka

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"  # the example id from Kafka's quickstart


def skiff(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    e = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    e = {k: v for k, v in e.items() if not k.startswith("SKIFF_") or (env and k in env)}
    return subprocess.run([sys.executable, "-m", "broker.cli.main", *args], capture_output=True,
                          text=True, timeout=60, env=e, cwd=ROOT)


def write_config(tmp_path: Path, **extra: str) -> Path:
    props = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": "1@127.0.0.1:9093",
        "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
        "controller.listener.names": "CONTROLLER",
        "log.dirs": f"{tmp_path / 'logs-a'},{tmp_path / 'logs-b'}",
        "metadata.log.dir": str(tmp_path / "meta"),
        **extra,
    }
    p = tmp_path / "server.properties"
    p.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return p


def test_kafka_uuid_form():
    u = uuid.UUID("12345678-1234-5678-1234-567812345678")
    s = uuid_to_kafka(u)
    assert len(s) == 22 and "=" not in s and kafka_to_uuid(s) == u
    assert kafka_to_uuid(CLUSTER)
    for bad in ("", "short", "x" * 23, "!!!!!!!!!!!!!!!!!!!!!!", "MkU3OEVBNTcwNTJENDM2Qh"):
        with pytest.raises(ValueError):
            kafka_to_uuid(bad)
    ids = {random_kafka_uuid() for _ in range(500)}
    assert len(ids) == 500 and all(len(i) == 22 and not i.startswith("-") for i in ids)


def test_random_uuid_command():
    out = skiff("storage", "random-uuid")
    assert out.returncode == 0, out.stderr
    s = out.stdout.strip()
    assert len(s) == 22 and kafka_to_uuid(s)


def test_format_writes_meta_properties_everywhere_then_refuses(tmp_path: Path):
    cfgfile = write_config(tmp_path)
    out = skiff("storage", "format", "--config", str(cfgfile), "--cluster-id", CLUSTER)
    assert out.returncode == 0, out.stderr
    assert "Formatting metadata directory" in out.stdout
    dir_ids = set()
    for d in ("logs-a", "logs-b", "meta"):
        props = parse_properties((tmp_path / d / "meta.properties").read_text())
        assert props["version"] == "1" and props["cluster.id"] == CLUSTER
        assert props["node.id"] == "1"
        kafka_to_uuid(props["directory.id"])
        dir_ids.add(props["directory.id"])
    assert len(dir_ids) == 3
    assert (tmp_path / "meta" / BOOTSTRAP_CHECKPOINT).exists()
    assert not (tmp_path / "logs-a" / BOOTSTRAP_CHECKPOINT).exists()
    before = (tmp_path / "logs-a" / "meta.properties").read_text()
    again = skiff("storage", "format", "-c", str(cfgfile), "-t", CLUSTER)
    assert again.returncode == 1 and "already formatted" in again.stderr
    assert "--ignore-formatted" in again.stderr
    ok = skiff("storage", "format", "-c", str(cfgfile), "-t", CLUSTER, "--ignore-formatted")
    assert ok.returncode == 0 and "already formatted" in ok.stdout
    assert (tmp_path / "logs-a" / "meta.properties").read_text() == before


def test_ignore_formatted_formats_only_the_new_dirs(tmp_path: Path):
    cfgfile = write_config(tmp_path)
    assert skiff("storage", "format", "-c", str(cfgfile), "-t", CLUSTER).returncode == 0
    cfgfile = write_config(tmp_path, **{"log.dirs": f"{tmp_path / 'logs-a'},{tmp_path / 'new'}"})
    assert skiff("storage", "format", "-c", str(cfgfile), "-t", CLUSTER).returncode == 1
    assert not (tmp_path / "new" / "meta.properties").exists()
    out = skiff("storage", "format", "-c", str(cfgfile), "-t", CLUSTER, "-g")
    assert out.returncode == 0, out.stderr
    assert read_meta_properties(tmp_path / "new").cluster_id == CLUSTER


def test_format_rejects_bad_cluster_id_and_bad_config(tmp_path: Path):
    cfgfile = write_config(tmp_path)
    out = skiff("storage", "format", "-c", str(cfgfile), "-t", "not-a-uuid")
    assert out.returncode == 1 and "does not appear to be a valid UUID" in out.stderr
    assert not (tmp_path / "logs-a").exists()
    bad = write_config(tmp_path, **{"node.id": "x"})
    out = skiff("storage", "format", "-c", str(bad), "-t", CLUSTER)
    assert out.returncode == 1
    assert "Invalid value x for configuration node.id: Not a number of type INT" in out.stderr
    out = skiff("storage", "format", "-t", CLUSTER)
    assert out.returncode == 2 and "--config" in out.stderr


def test_format_honours_env_overrides(tmp_path: Path):
    cfgfile = write_config(tmp_path)
    out = skiff("storage", "format", "-c", str(cfgfile), "-t", CLUSTER,
                env={"SKIFF_LOG_DIRS": str(tmp_path / "from-env")})
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "from-env" / "meta.properties").exists()
    assert not (tmp_path / "logs-a").exists()


def test_ensure_formatted(tmp_path: Path):
    cfg = load_config(write_config(tmp_path), env={})
    with pytest.raises(StorageError, match="skiff storage format"):
        ensure_formatted(cfg)
    assert format_storage(cfg, CLUSTER) == cfg.all_directories()
    assert ensure_formatted(cfg) == CLUSTER
    # node id mismatch
    other = load_config(write_config(tmp_path, **{"node.id": "2",
                                                   "controller.quorum.voters": "2@h:9093"}),
                        env={})
    with pytest.raises(StorageError, match="node id 1"):
        ensure_formatted(other)
    # cluster id mismatch between dirs
    mp = tmp_path / "logs-b" / "meta.properties"
    mp.write_text(mp.read_text().replace(CLUSTER, "AAAAAAAAAAAAAAAAAAAAAg"))
    with pytest.raises(StorageError, match=r"Inconsistent cluster\.id"):
        ensure_formatted(cfg)
    mp.write_text("version=0\ncluster.id=x\n")
    with pytest.raises(StorageError, match="version"):
        ensure_formatted(cfg)


def test_bootstrap_records_round_trip(tmp_path: Path):
    cfg = load_config(write_config(tmp_path), env={})
    format_storage(cfg, CLUSTER)
    recs = read_bootstrap(cfg.metadata_log_dir)
    # the latest release's levels, metadata.version first (as Kafka's bootstrap.checkpoint)
    assert [(r.feature_level.name, r.feature_level.feature_level) for r in recs] == [
        ("metadata.version", METADATA_VERSION), ("group.version", 1),
        ("share.version", 2), ("streams.version", 1), ("transaction.version", 2)]
    # a missing file gives the defaults, a corrupt one an error
    assert read_bootstrap(tmp_path / "nowhere") == recs
    (cfg.metadata_log_dir / BOOTSTRAP_CHECKPOINT).write_bytes(b"\x00\x00\x00\x05junk")
    with pytest.raises(StorageError, match="corrupt"):
        read_bootstrap(cfg.metadata_log_dir)


def test_ensure_formatted_with_a_replaced_or_lost_log_dir(tmp_path: Path):
    """KIP-858 at start: an empty log dir (a new disk) is formatted with a new directory id;
    an unreadable one (here a file where the dir was) is left to the log manager, which
    takes it offline; the metadata log's dir must stay readable."""
    cfg = load_config(write_config(tmp_path), env={})
    format_storage(cfg, CLUSTER)
    a, b = cfg.log_dirs
    old_id = read_meta_properties(b).directory_id
    shutil.rmtree(b)
    b.mkdir()
    assert ensure_formatted(cfg) == CLUSTER
    new = read_meta_properties(b)
    assert new.cluster_id == CLUSTER and new.node_id == 1
    assert new.directory_id not in (None, old_id, read_meta_properties(a).directory_id)
    shutil.rmtree(b)
    b.write_text("not a directory")
    assert ensure_formatted(cfg) == CLUSTER
    meta = cfg.metadata_log_dir
    shutil.rmtree(meta)
    meta.write_text("not a directory")
    with pytest.raises(StorageError):
        ensure_formatted(cfg)
def test_format_with_release_version_and_features(tmp_path: Path):
    cfg = load_config(write_config(tmp_path), env={})
    format_storage(cfg, CLUSTER, release_version="3.9")
    recs = read_bootstrap(cfg.metadata_log_dir)
    assert [(r.feature_level.name, r.feature_level.feature_level) for r in recs] == [
        ("metadata.version", 21)]
    other = tmp_path / "other"
    other.mkdir()
    cfg2 = load_config(write_config(other), env={})
    format_storage(cfg2, CLUSTER, release_version="4.0", feature=["transaction.version=1"])
    assert {(r.feature_level.name, r.feature_level.feature_level)
            for r in read_bootstrap(cfg2.metadata_log_dir)} == {
        ("metadata.version", 25), ("group.version", 1), ("transaction.version", 1)}


@pytest.mark.parametrize(("kw", "message"), [
    ({"release_version": "3.7"}, "Unknown release version"),
    ({"feature": ["group.version"]}, "expected name=level"),
    ({"feature": ["kraft.version=1"]}, "does not match the voter configuration"),
    ({"release_version": "3.9", "feature": ["group.version=1"]}, "requires metadata.version"),
])
def test_format_refuses_bad_feature_choices(tmp_path: Path, kw: dict, message: str):
    cfg = load_config(write_config(tmp_path), env={})
    with pytest.raises(StorageError, match=message):
        format_storage(cfg, CLUSTER, **kw)
    assert not (cfg.metadata_log_dir / "meta.properties").exists()
