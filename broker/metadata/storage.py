"""A node's storage directories: format them (as kafka-storage.sh does), and the startup check.

`format` writes Kafka's KRaft `meta.properties` (version=1, cluster.id, node.id,
directory.id) into every log dir and the metadata log dir, and a
`bootstrap.checkpoint` into the metadata log dir holding the records the first
active controller writes to an empty metadata log (the finalized
metadata.version). With --standalone or --initial-controllers (KIP-853) a controller's
metadata log dir also gets `bootstrap-voters.checkpoint`: the KRaftVersion (1) and Voters
control records, as Kafka's bootstrap checkpoint holds them, from which the quorum starts
with dynamic voters. A directory that already has meta.properties is refused
unless --ignore-formatted, which skips it. `ensure_formatted(config)` is what a
starting node calls: it fails clearly on an unformatted directory, a cluster-id
mismatch between directories, or a node-id mismatch.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from broker.config import NodeConfig, parse_properties
from broker.metadata import features
from broker.protocol.kafka_uuid import kafka_to_uuid, random_kafka_uuid
from broker.util.files import atomic_write

META_PROPERTIES = "meta.properties"
BOOTSTRAP_CHECKPOINT = "bootstrap.checkpoint"
BOOTSTRAP_VOTERS = "bootstrap-voters.checkpoint"
# The metadata.version a format without --release-version writes (Kafka's levels,
# broker/metadata/features.py: the default release's; a node supports up to the latest).
METADATA_VERSION_FEATURE = features.METADATA_VERSION
METADATA_VERSION = features.metadata_version_of(features.LATEST_RELEASE)


class StorageError(Exception):
    """A storage directory is missing, unformatted, or inconsistent with the config."""


# -- meta.properties -----------------------------------------------------------------


@dataclass(frozen=True)
class MetaProperties:
    version: int
    cluster_id: str
    node_id: int
    directory_id: str | None = None

    def render(self) -> str:
        lines = ["#", "#" + time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime())]
        lines += [f"node.id={self.node_id}"]
        if self.directory_id is not None:
            lines += [f"directory.id={self.directory_id}"]
        lines += [f"version={self.version}", f"cluster.id={self.cluster_id}"]
        return "\n".join(lines) + "\n"


def read_meta_properties(directory: Path) -> MetaProperties | None:
    """The directory's meta.properties, None when absent; StorageError when unreadable."""
    path = directory / META_PROPERTIES
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StorageError(f"Unable to read {path}: {exc.strerror}") from None
    props = parse_properties(text)
    try:
        version = int(props.get("version", ""))
    except ValueError:
        raise StorageError(f"{path}: version is missing or not a number") from None
    if version != 1:
        raise StorageError(f"{path}: version={version}, but only version 1 (KRaft) is supported")
    cluster_id = props.get("cluster.id", "")
    if not cluster_id:
        raise StorageError(f"{path}: cluster.id is missing")
    try:
        node_id = int(props.get("node.id", ""))
    except ValueError:
        raise StorageError(f"{path}: node.id is missing or not a number") from None
    return MetaProperties(version, cluster_id, node_id, props.get("directory.id"))


# -- bootstrap ------------------------------------------------------------------------


def bootstrap_records(levels: dict[str, int] | None = None) -> list[Any]:
    """What the first active controller writes to an empty metadata log: the finalized
    feature levels (FeatureLevel records, metadata.version first), by default the latest
    release's with static voters."""
    from broker.metadata import records as rec

    if levels is None:
        levels = features.bootstrap_levels()
    order = sorted(levels, key=lambda n: (n != METADATA_VERSION_FEATURE, n))
    return [rec.feature_level_record(n, levels[n]) for n in order]


def write_bootstrap(metadata_dir: Path, cluster_id: str, extra: Sequence[Any] = (),
                    levels: dict[str, int] | None = None) -> Path:
    """`extra`: records added at format time (--add-scram credentials); `levels`: the
    finalized feature levels (features.bootstrap_levels)."""
    from broker.metadata.snapshot import encode_snapshot, image_from_records

    image = image_from_records([*bootstrap_records(levels), *extra], cluster_id=cluster_id)
    path = metadata_dir / BOOTSTRAP_CHECKPOINT
    atomic_write(path, encode_snapshot(image))
    return path


def read_bootstrap(metadata_dir: Path) -> list[Any]:
    """The bootstrap records written by format; the defaults when the file is absent."""
    from broker.metadata.records import InvalidRecordError
    from broker.metadata.snapshot import decode_snapshot, image_to_records

    path = metadata_dir / BOOTSTRAP_CHECKPOINT
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return bootstrap_records()
    try:
        return image_to_records(decode_snapshot(data))
    except InvalidRecordError as exc:
        raise StorageError(f"{path} is corrupt: {exc}") from None


# -- the bootstrap voter set (KIP-853) ---------------------------------------------------


def parse_initial_controllers(arg: str) -> list[tuple[int, str, int, str]]:
    """kafka-storage.sh's --initial-controllers: `id@host:port:directoryid,...` (the
    directory id in Kafka's base64 form)."""
    out: list[tuple[int, str, int, str]] = []
    for item in filter(None, (x.strip() for x in arg.split(","))):
        node, at, rest = item.partition("@")
        addr, colon, directory = rest.rpartition(":")
        host, colon2, port = addr.rpartition(":")
        if not at or not colon or not colon2 or not node.isdigit() or not port.isdigit() \
                or not host:
            raise StorageError(f"--initial-controllers: bad entry {item!r} "
                               "(want id@host:port:directoryid)")
        try:
            kafka_to_uuid(directory)
        except ValueError:
            raise StorageError(f"--initial-controllers: {directory!r} in {item!r} is not a "
                               "directory id (a Kafka uuid)") from None
        if any(x[0] == int(node) for x in out):
            raise StorageError(f"--initial-controllers: node {node} listed twice")
        out.append((int(node), host.strip("[]"), int(port), directory))
    if not out:
        raise StorageError("--initial-controllers: no controllers given")
    return out


def write_bootstrap_voters(metadata_dir: Path, voters: Sequence[tuple[int, str, int, str]],
                           listener_name: str) -> Path:
    """The KRaftVersion and Voters control batches of the bootstrap voter set."""
    from raft.control import KRAFT_VERSION_TYPE, VOTERS_TYPE, Endpoint, Voter
    from raft.kafka_messages import VOTER_CODEC, encode_batch
    from raft.messages import Batch

    vs = tuple(sorted((Voter(i, kafka_to_uuid(d), (Endpoint(listener_name, h, p),))
                       for i, h, p, d in voters), key=lambda v: v.node_id))
    data = encode_batch(Batch(0, 0, (VOTER_CODEC.encode_kraft_version(1),), True,
                              control_type=KRAFT_VERSION_TYPE)) + \
        encode_batch(Batch(1, 0, (VOTER_CODEC.encode_voters(vs),), True,
                           control_type=VOTERS_TYPE))
    path = metadata_dir / BOOTSTRAP_VOTERS
    atomic_write(path, data)
    return path


def read_bootstrap_voters(metadata_dir: Path) -> Any:
    """The bootstrap voter set (raft.control.VoterSet) written by format, None when the
    controllers were formatted without one (static voters, or a controller that joins)."""
    from raft.control import VOTERS_TYPE
    from raft.kafka_messages import VOTER_CODEC, CorruptBatch, decode_batches

    path = metadata_dir / BOOTSTRAP_VOTERS
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        for b in decode_batches(data):
            if b.control and b.control_type == VOTERS_TYPE:
                return VOTER_CODEC.decode_voters(b.records[-1])
    except (CorruptBatch, ValueError) as exc:
        raise StorageError(f"{path} is corrupt: {exc}") from None
    raise StorageError(f"{path} holds no Voters record")


def metadata_directory_id(config: NodeConfig) -> Any:
    """The metadata log dir's directory.id (a uuid.UUID), None if it has none."""
    meta = read_meta_properties(config.metadata_log_dir)
    if meta is None or meta.directory_id is None:
        return None
    return kafka_to_uuid(meta.directory_id)


# -- format and the startup check ---------------------------------------------------------


def parse_add_scram(arg: str) -> Any:
    """kafka-storage.sh's --add-scram: 'SCRAM-SHA-512=[name=alice,password=secret]' (also
    iterations=, and salt= with saltedpassword= in base64 instead of password=): a
    UserScramCredential record."""
    import base64
    import binascii

    from broker.metadata import records as rec
    from broker.security import scram

    mechanism, sep, body = arg.partition("=")
    mechanism = mechanism.strip().upper()
    if not sep or mechanism not in scram.MECHANISMS or not (
            body.startswith("[") and body.endswith("]")):
        raise StorageError(f"--add-scram {arg!r}: expected MECHANISM=[name=...,password=...] "
                           f"with MECHANISM one of {', '.join(scram.MECHANISMS)}")
    fields: dict[str, str] = {}
    for part in body[1:-1].split(","):
        key, eq, value = part.partition("=")
        if not eq:
            raise StorageError(f"--add-scram {arg!r}: {part!r} is not key=value")
        fields[key.strip().lower()] = value.strip().strip('"')
    name = fields.get("name")
    if not name:
        raise StorageError(f"--add-scram {arg!r}: name= is required")
    try:
        iterations = int(fields.get("iterations", scram.DEFAULT_ITERATIONS))
        salt = base64.b64decode(fields["salt"], validate=True) if "salt" in fields else None
        if "saltedpassword" in fields:
            if salt is None:
                raise StorageError(f"--add-scram {arg!r}: saltedpassword= needs salt=")
            cred = scram.credential_from_salted(
                mechanism, base64.b64decode(fields["saltedpassword"], validate=True), salt,
                iterations)
        elif "password" in fields:
            cred = scram.credential(mechanism, fields["password"], salt, iterations)
        else:
            raise StorageError(f"--add-scram {arg!r}: password= (or salt= and "
                               "saltedpassword=) is required")
    except (ValueError, binascii.Error, scram.ScramError) as exc:
        raise StorageError(f"--add-scram {arg!r}: {exc}") from None
    return rec.user_scram_credential_record(name, mechanism, cred.salt, cred.stored_key,
                                            cred.server_key, cred.iterations)


def format_storage(config: NodeConfig, cluster_id: str, ignore_formatted: bool = False,
                   out: Any = None, add_scram: Sequence[str] = (), standalone: bool = False,
                   initial_controllers: str | None = None,
                   no_initial_controllers: bool = False, release_version: str | None = None,
                   feature: Sequence[str] = ()) -> list[Path]:
    """Format every directory of the node; returns the directories written.

    `standalone`: this controller alone is the initial voter set; `initial_controllers`:
    the initial voters (`id@host:port:directoryid,...`, this node's directory id among
    them); `no_initial_controllers`: a controller that will join an existing dynamic
    quorum (AddRaftVoter).  As Kafka, these need controller.quorum.bootstrap.servers (not
    controller.quorum.voters) and the controller role.

    `release_version` (kafka-storage.sh's --release-version: "3.9", "4.0", "4.1" or a
    level name such as "4.0-IV1"; default the latest) and `feature` (--feature
    name=level, repeatable) pick the finalized feature levels of the bootstrap records."""
    try:
        kafka_to_uuid(cluster_id)
    except ValueError as exc:
        raise StorageError(f"Cluster ID string {cluster_id} does not appear to be a valid UUID: "
                           f"{exc}") from None
    extra = [parse_add_scram(a) for a in add_scram]
    overrides: dict[str, int] = {}
    for item in feature:
        name, eq, level = item.partition("=")
        if not eq or not level.strip().lstrip("-").isdigit() or not name.strip():
            raise StorageError(f"--feature {item!r}: expected name=level")
        overrides[name.strip()] = int(level)
    dynamic = standalone or initial_controllers is not None or no_initial_controllers
    try:
        levels = features.bootstrap_levels(release_version, overrides,
                                           kraft_version=1 if dynamic else 0)
    except features.FeatureError as exc:
        raise StorageError(str(exc)) from None
    mv_name = features.metadata_version_name(levels[METADATA_VERSION_FEATURE])
    chosen = [n for n, on in (("--standalone", standalone),
                              ("--initial-controllers", initial_controllers is not None),
                              ("--no-initial-controllers", no_initial_controllers)) if on]
    if len(chosen) > 1:
        raise StorageError(f"{' and '.join(chosen)} cannot be used together")
    initial: list[tuple[int, str, int, str]] | None = None
    meta_dir_id: str | None = None
    if chosen:
        if not config.is_controller:
            raise StorageError(f"{chosen[0]} is for controllers: process.roles has no "
                               "controller")
        if config.voters:
            raise StorageError(f"{chosen[0]} cannot be used with controller.quorum.voters "
                               "(static voters); set controller.quorum.bootstrap.servers")
        lst = config.controller_listeners[0] if config.controller_listeners else None
        if lst is None:
            raise StorageError("no controller listener in listeners")
        if standalone:
            meta_dir_id = random_kafka_uuid()
            initial = [(config.node_id, lst.host or "localhost", lst.port, meta_dir_id)]
        elif initial_controllers is not None:
            initial = parse_initial_controllers(initial_controllers)
            mine = [x for x in initial if x[0] == config.node_id]
            if not mine:
                raise StorageError(f"--initial-controllers does not list this node "
                                   f"({config.node_id})")
            meta_dir_id = mine[0][3]
    dirs = config.all_directories()
    todo: list[Path] = []
    for d in dirs:
        if d.exists() and not d.is_dir():
            raise StorageError(f"{d} exists and is not a directory")
        if d.is_dir() and read_meta_properties(d) is not None:
            if not ignore_formatted:
                raise StorageError(f"Log directory {d} is already formatted. Use "
                                   "--ignore-formatted to ignore this directory and format the "
                                   "others.")
            continue
        todo.append(d)
    if not todo:
        if out is not None:
            print("All of the log directories are already formatted.", file=out)
        return []
    for d in todo:
        try:
            d.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageError(f"Unable to create storage directory {d}: {exc.strerror}") from None
        dir_id = meta_dir_id if d == config.metadata_log_dir and meta_dir_id else \
            random_kafka_uuid()
        meta = MetaProperties(1, cluster_id, config.node_id, dir_id)
        atomic_write(d / META_PROPERTIES, meta.render().encode())
        if d == config.metadata_log_dir:
            write_bootstrap(d, cluster_id, extra, levels)
            if initial is not None:
                write_bootstrap_voters(d, initial, config.controller_listener_names[0])
                if out is not None:
                    print(f"Bootstrapping the metadata quorum with voters "
                          f"{', '.join(f'{i}@{h}:{p}:{x}' for i, h, p, x in initial)} "
                          f"(kraft.version 1).", file=out)
            if out is not None:
                print(f"Formatting metadata directory {d} with {METADATA_VERSION_FEATURE} "
                      f"{mv_name}.", file=out)
        elif out is not None:
            print(f"Formatting data directory {d} with {METADATA_VERSION_FEATURE} "
                  f"{mv_name}.", file=out)
    return todo


def ensure_formatted(config: NodeConfig) -> str:
    """Check every directory is formatted for this node and cluster; return the cluster id.

    As Kafka's broker starts (KIP-858): a log dir that cannot be read (an I/O error, or its
    path is no directory) is left for the log manager to take offline, and an empty or
    missing log dir (a replaced disk) is formatted with this node's cluster and node id and
    a new directory id, as long as another directory is formatted. The metadata log's dir
    must always be readable and formatted."""
    cluster_id: str | None = None
    first: Path | None = None
    unreadable: list[Path] = []
    empty: list[Path] = []
    dirs = config.all_directories()
    for d in dirs:
        log_only = d != config.metadata_log_dir
        if log_only and not _readable(d):
            unreadable.append(d)
            continue
        meta = read_meta_properties(d) if d.is_dir() else None
        if meta is None and log_only and _empty(d):
            empty.append(d)
            continue
        if meta is None:
            raise StorageError(
                f"No {META_PROPERTIES} found in {d}. Format the node's storage first: "
                "skiff storage format --config <file> --cluster-id $(skiff storage random-uuid)")
        if meta.node_id != config.node_id:
            raise StorageError(
                f"Stored node id {meta.node_id} in {d} doesn't match node.id {config.node_id} "
                "from the configuration. If you moved your data, make sure your configured "
                "node id matches; otherwise format this directory again.")
        if cluster_id is None:
            cluster_id, first = meta.cluster_id, d
        elif meta.cluster_id != cluster_id:
            raise StorageError(
                f"Inconsistent cluster.id: {first} has {cluster_id} but {d} has "
                f"{meta.cluster_id}. Every directory of a node must belong to one cluster.")
    if cluster_id is None:
        d = (empty or unreadable or dirs)[0]
        raise StorageError(
            f"No {META_PROPERTIES} found in {d}. Format the node's storage first: "
            "skiff storage format --config <file> --cluster-id $(skiff storage random-uuid)")
    for d in empty:
        try:
            d.mkdir(parents=True, exist_ok=True)
            meta = MetaProperties(1, cluster_id, config.node_id, random_kafka_uuid())
            atomic_write(d / META_PROPERTIES, meta.render().encode())
        except OSError:
            continue  # the log manager finds it unusable and takes it offline
    return cluster_id


def _readable(d: Path) -> bool:
    try:
        if d.exists() and not d.is_dir():
            return False
        if d.is_dir():
            os.listdir(d)
            with contextlib.suppress(FileNotFoundError):
                (d / META_PROPERTIES).read_bytes()
        return True
    except OSError:
        return False


def _empty(d: Path) -> bool:
    try:
        return not d.exists() or not any(d.iterdir())
    except OSError:
        return False
