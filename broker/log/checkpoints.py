"""Kafka's checkpoint files and per-directory metadata files.

- `leader-epoch-checkpoint`: "0\\n<n>\\n<epoch> <start offset>\\n..."
- `recovery-point-offset-checkpoint`, `log-start-offset-checkpoint`,
  `cleaner-offset-checkpoint`: "0\\n<n>\\n<topic> <partition> <offset>\\n..."
- `partition.metadata`: "version: 0\\ntopic_id: <base64url uuid>\\n"
- `meta.properties`: java properties (version, cluster.id, node.id, directory.id)
"""

from __future__ import annotations

import uuid
from pathlib import Path

from broker.protocol.kafka_uuid import kafka_to_uuid, uuid_to_kafka
from broker.util.files import atomic_write

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"
META_PROPERTIES = "meta.properties"
CLEAN_SHUTDOWN_MARKER = ".kafka_cleanshutdown"

_MAX_CHECKPOINT_ENTRIES = 10_000_000


class CheckpointError(Exception):
    pass


def _parse_lines(text: str, fields_per_line: int) -> list[list[str]]:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) < 2 or lines[0].strip() != "0":
        raise CheckpointError(f"bad checkpoint header {lines[:2]!r}")
    try:
        n = int(lines[1])
    except ValueError:
        raise CheckpointError(f"bad entry count {lines[1]!r}") from None
    if n < 0 or n > _MAX_CHECKPOINT_ENTRIES or n != len(lines) - 2:
        raise CheckpointError(f"entry count {n} with {len(lines) - 2} lines")
    out = []
    for line in lines[2:]:
        parts = line.split()
        if len(parts) != fields_per_line:
            raise CheckpointError(f"malformed line {line!r}")
        out.append(parts)
    return out


def read_offsets_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """Topic-partition -> offset; a missing file is empty, a malformed one raises."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    out: dict[tuple[str, int], int] = {}
    for topic, part, off in _parse_lines(text, 3):
        try:
            out[(topic, int(part))] = int(off)
        except ValueError:
            raise CheckpointError(f"bad numbers in {path}") from None
    return out


def write_offsets_checkpoint(path: Path, offsets: dict[tuple[str, int], int]) -> None:
    lines = ["0", str(len(offsets))]
    lines += [f"{t} {p} {o}" for (t, p), o in sorted(offsets.items())]
    atomic_write(path, ("\n".join(lines) + "\n").encode())


def read_epoch_checkpoint(path: Path) -> list[tuple[int, int]]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    out = []
    for epoch, off in _parse_lines(text, 2):
        try:
            out.append((int(epoch), int(off)))
        except ValueError:
            raise CheckpointError(f"bad numbers in {path}") from None
    return out


def write_epoch_checkpoint(
    path: Path, entries: list[tuple[int, int]], *, fsync: bool = True
) -> None:
    lines = ["0", str(len(entries))] + [f"{e} {o}" for e, o in entries]
    atomic_write(path, ("\n".join(lines) + "\n").encode(), fsync=fsync)


def write_partition_metadata(directory: Path, topic_id: uuid.UUID, *, fsync: bool = True
                             ) -> None:
    atomic_write(
        directory / PARTITION_METADATA,
        f"version: 0\ntopic_id: {uuid_to_kafka(topic_id)}\n".encode(),
        fsync=fsync,
    )


def read_partition_metadata(directory: Path) -> uuid.UUID | None:
    try:
        text = (directory / PARTITION_METADATA).read_text()
    except FileNotFoundError:
        return None
    fields = dict(
        (k.strip(), v.strip())
        for k, _, v in (line.partition(":") for line in text.splitlines())
        if k
    )
    if fields.get("version") != "0" or "topic_id" not in fields:
        raise CheckpointError(f"bad partition.metadata in {directory}")
    try:
        return kafka_to_uuid(fields["topic_id"])
    except ValueError as exc:
        raise CheckpointError(f"bad topic id in {directory}/{PARTITION_METADATA}: {exc}") from None


def read_properties(path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        k, sep, v = line.partition("=")
        if not sep:
            k, _, v = line.partition(":")
        out[k.strip()] = v.strip()
    return out


def write_properties(path: Path, props: dict[str, str]) -> None:
    text = "".join(f"{k}={v}\n" for k, v in props.items())
    atomic_write(path, text.encode())


def read_meta_properties(log_dir: Path) -> dict[str, str] | None:
    """meta.properties of a log dir, or None if the directory is not formatted."""
    path = log_dir / META_PROPERTIES
    if not path.exists():
        return None
    return read_properties(path)


def verify_meta_properties(
    log_dirs: list[Path], *, node_id: int | None = None, cluster_id: str | None = None
) -> dict[str, str]:
    """Check every log dir is formatted for the same cluster and node; return one's props.

    Raises CheckpointError naming the first directory that disagrees.
    """
    seen: dict[str, str] | None = None
    for d in log_dirs:
        props = read_meta_properties(d)
        if props is None:
            raise CheckpointError(f"{d} is not formatted (no meta.properties)")
        if props.get("version") not in ("0", "1"):
            raise CheckpointError(f"{d}: meta.properties version {props.get('version')}")
        if cluster_id is not None and props.get("cluster.id") != cluster_id:
            raise CheckpointError(f"{d}: cluster.id {props.get('cluster.id')} != {cluster_id}")
        if node_id is not None and props.get("node.id") != str(node_id):
            raise CheckpointError(f"{d}: node.id {props.get('node.id')} != {node_id}")
        if seen is not None and (
            seen.get("cluster.id") != props.get("cluster.id")
            or seen.get("node.id") != props.get("node.id")
        ):
            raise CheckpointError(f"{d}: meta.properties disagrees with the other log dirs")
        seen = props
    if seen is None:
        raise CheckpointError("no log dirs")
    return seen
