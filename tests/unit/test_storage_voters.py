"""`skiff storage format --standalone | --initial-controllers | --no-initial-controllers`
(KIP-853, as kafka-storage.sh): the bootstrap voter set and the metadata dir's directory
id; and what is refused."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from broker.config import load_config
from broker.metadata.storage import (
    BOOTSTRAP_VOTERS,
    StorageError,
    format_storage,
    metadata_directory_id,
    read_bootstrap_voters,
    read_meta_properties,
)
from broker.protocol.kafka_uuid import kafka_to_uuid, random_kafka_uuid
from raft.control import Endpoint

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"


def write_config(tmp_path: Path, node_id: int = 1, roles: str = "controller",
                 quorum: str = "controller.quorum.bootstrap.servers=127.0.0.1:9093") -> Path:
    listeners = f"CONTROLLER://127.0.0.1:{9092 + node_id}"
    if roles == "broker":
        listeners = f"PLAINTEXT://127.0.0.1:{19092 + node_id}"
    text = (f"process.roles={roles}\nnode.id={node_id}\n{quorum}\n"
            f"listeners={listeners}\ncontroller.listener.names=CONTROLLER\n"
            f"log.dirs={tmp_path / 'logs'}\nmetadata.log.dir={tmp_path / 'meta'}\n")
    p = tmp_path / "server.properties"
    p.write_text(text)
    return p


def test_standalone_writes_this_controller_as_the_only_voter(tmp_path: Path) -> None:
    cfg = load_config(str(write_config(tmp_path)), [], {})
    format_storage(cfg, CLUSTER, standalone=True)
    voters = read_bootstrap_voters(tmp_path / "meta")
    meta = read_meta_properties(tmp_path / "meta")
    assert meta is not None and meta.directory_id is not None
    assert metadata_directory_id(cfg) == kafka_to_uuid(meta.directory_id)
    assert [(v.node_id, v.directory_id, v.endpoints) for v in voters] == [
        (1, kafka_to_uuid(meta.directory_id), (Endpoint("CONTROLLER", "127.0.0.1", 9093),))]
    # the data dir has its own directory id
    data = read_meta_properties(tmp_path / "logs")
    assert data is not None and data.directory_id != meta.directory_id


def test_initial_controllers_and_this_nodes_directory_id(tmp_path: Path) -> None:
    ids = {i: random_kafka_uuid() for i in (1, 2, 3)}
    arg = ",".join(f"{i}@127.0.0.1:{9092 + i}:{d}" for i, d in ids.items())
    cfg = load_config(str(write_config(tmp_path, node_id=2)), [], {})
    format_storage(cfg, CLUSTER, initial_controllers=arg)
    voters = read_bootstrap_voters(tmp_path / "meta")
    assert [(v.node_id, v.directory_id) for v in voters] == [
        (i, kafka_to_uuid(d)) for i, d in ids.items()]
    meta = read_meta_properties(tmp_path / "meta")
    assert meta is not None and meta.directory_id == ids[2]


def test_no_initial_controllers_writes_no_voter_set(tmp_path: Path) -> None:
    cfg = load_config(str(write_config(tmp_path)), [], {})
    format_storage(cfg, CLUSTER, no_initial_controllers=True)
    assert not (tmp_path / "meta" / BOOTSTRAP_VOTERS).exists()
    assert read_bootstrap_voters(tmp_path / "meta") is None


@pytest.mark.parametrize("case", ["static", "broker", "two", "unlisted", "bad"])
def test_refusals(tmp_path: Path, case: str) -> None:
    kw: dict[str, object] = {"standalone": True}
    if case == "static":
        cfg = load_config(str(write_config(
            tmp_path, quorum="controller.quorum.voters=1@127.0.0.1:9093")), [], {})
        match = "controller.quorum.voters"
    elif case == "broker":
        cfg = load_config(str(write_config(tmp_path, node_id=4, roles="broker")), [], {})
        match = "for controllers"
    else:
        cfg = load_config(str(write_config(tmp_path)), [], {})
        if case == "two":
            kw["no_initial_controllers"] = True
            match = "cannot be used together"
        elif case == "unlisted":
            kw = {"initial_controllers": f"2@127.0.0.1:9094:{random_kafka_uuid()}"}
            match = "does not list this node"
        else:
            kw = {"initial_controllers": "1@127.0.0.1:9093"}
            match = "bad entry"
    with pytest.raises(StorageError, match=match):
        format_storage(cfg, CLUSTER, **kw)  # type: ignore[arg-type]


def test_cli_standalone(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKIFF_")}
    p = subprocess.run([sys.executable, "-m", "broker.cli.main", "storage", "format", "-c",
                        str(write_config(tmp_path)), "-t", CLUSTER, "--standalone"],
                       capture_output=True, text=True, timeout=60,
                       env={**env, "PYTHONPATH": str(ROOT)}, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert "Bootstrapping the metadata quorum with voters 1@127.0.0.1:9093:" in p.stdout
    assert (tmp_path / "meta" / BOOTSTRAP_VOTERS).is_file()
