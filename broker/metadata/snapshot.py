"""Metadata snapshots: the list of records that rebuilds an image, and its file form.

A restart loads the newest snapshot, then replays the metadata log after its
offset. The file is named as Kafka names snapshots, `<end offset:20>-<epoch:10>.checkpoint`
where end offset = last included offset + 1, and holds frames of
`[u32 length][u32 crc32c][payload]`: first a SnapshotHeader, then MetadataRecords.
It is written to a temp file, fsynced and renamed, so a crash leaves either no
snapshot or a whole one; a torn or corrupt file is rejected, never half-loaded.
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import crc32c

from broker.metadata import records as rec
from broker.metadata.delta import MetadataDelta
from broker.metadata.image import MetadataImage
from broker.metadata.records import InvalidRecordError, pb

SNAPSHOT_VERSION = 1
SUFFIX = ".checkpoint"
_FRAME = struct.Struct(">II")
_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")
MAX_FRAME = rec.MAX_RECORD_BYTES


def image_to_records(image: MetadataImage) -> list[Any]:
    """Records that, replayed on an empty image, give `image` back (offsets aside)."""
    out: list[Any] = []
    # metadata.version first, as Kafka's snapshots and bootstrap checkpoints have it
    for name in sorted(image.features, key=lambda n: (n != "metadata.version", n)):
        out.append(rec.feature_level_record(name, image.features[name]))
    for bid in sorted(image.brokers):
        b = image.brokers[bid]
        msg = pb.RegisterBroker(
            broker_id=b.broker_id,
            incarnation_id=b.incarnation_id.bytes,
            broker_epoch=b.epoch,
            endpoints=[
                pb.Endpoint(name=e.name, host=e.host, port=e.port,
                            security_protocol=e.security_protocol)
                for e in b.endpoints
            ],
            features=[
                pb.FeatureRange(name=n, min_supported_version=lo, max_supported_version=hi)
                for n, lo, hi in b.features
            ],
            fenced=b.fenced,
            in_controlled_shutdown=b.in_controlled_shutdown,
            log_dirs=[d.bytes for d in b.log_dirs],
            cordoned_log_dirs=[d.bytes for d in sorted(b.cordoned_log_dirs)],
        )
        if b.rack is not None:
            msg.rack = b.rack
        out.append(rec.wrap(msg))
    for cid in sorted(image.controllers):
        out.append(rec.register_controller_record(image.controllers[cid]))
    for t in sorted(image.topics_by_id.values(), key=lambda t: t.name):
        out.append(rec.topic_record(t.name, t.topic_id))
        for i in sorted(t.partitions):
            p = t.partitions[i]
            out.append(rec.partition_record(
                t.topic_id, i, p.replicas, p.isr, p.leader, p.leader_epoch, p.partition_epoch,
                p.elr, p.last_known_elr, p.removing_replicas, p.adding_replicas,
                p.leader_recovery_state, p.directories))
    for rtype, rname in sorted(image.configs):
        cfg = image.configs[(rtype, rname)]
        for k in sorted(cfg):
            out.append(rec.config_record(rtype, rname, k, cfg[k]))
    if image.next_producer_id:
        out.append(rec.producer_ids_record(-1, -1, image.next_producer_id))
    for mechanism, user in sorted(image.scram_credentials):
        c = image.scram_credentials[(mechanism, user)]
        out.append(rec.user_scram_credential_record(user, mechanism, c.salt, c.stored_key,
                                                    c.server_key, c.iterations))
    for acl_id in sorted(image.acls):
        out.append(rec.access_control_entry_record(acl_id, image.acls[acl_id]))
    for entity in sorted(image.client_quotas, key=_entity_order):
        values = image.client_quotas[entity]
        for key in sorted(values):
            out.append(rec.client_quota_record(entity, key, values[key]))
    for token_id in sorted(image.delegation_tokens):
        out.append(rec.delegation_token_record(image.delegation_tokens[token_id]))
    return out


def _entity_order(entity: Any) -> tuple[tuple[str, str, str], ...]:
    # None (a default entity) sorts before every name
    return tuple((t, "0" if n is None else "1", n or "") for t, n in entity)


def image_from_records(records: list[Any], cluster_id: str = "", offset: int = -1,
                       epoch: int = 0, last_broker_epoch: int = 0) -> MetadataImage:
    base = MetadataImage(cluster_id=cluster_id, last_broker_epoch=last_broker_epoch)
    delta = MetadataDelta(base)
    delta.replay_all(records, offset, epoch)
    return delta.apply()


def _frame(payload: bytes) -> bytes:
    return _FRAME.pack(len(payload), crc32c.crc32c(payload)) + payload


def encode_snapshot(image: MetadataImage, last_contained_log_time_ms: int = 0) -> bytes:
    records = image_to_records(image)
    header = pb.SnapshotHeader(
        version=SNAPSHOT_VERSION,
        cluster_id=image.cluster_id,
        last_offset=image.offset,
        last_epoch=image.epoch,
        record_count=len(records),
        last_contained_log_time_ms=last_contained_log_time_ms,
        last_broker_epoch=image.last_broker_epoch,
    )
    parts = [_frame(header.SerializeToString(deterministic=True))]
    parts.extend(_frame(rec.encode(r)) for r in records)
    return b"".join(parts)


def _frames(data: bytes) -> Iterator[bytes]:
    pos, end = 0, len(data)
    while pos < end:
        if end - pos < _FRAME.size:
            raise InvalidRecordError(f"truncated snapshot frame header at byte {pos}")
        length, crc = _FRAME.unpack_from(data, pos)
        pos += _FRAME.size
        if length > MAX_FRAME or length > end - pos:
            raise InvalidRecordError(
                f"snapshot frame at byte {pos} claims {length} bytes, {end - pos} present")
        payload = data[pos:pos + length]
        if crc32c.crc32c(payload) != crc:
            raise InvalidRecordError(f"snapshot frame at byte {pos} fails its CRC")
        pos += length
        yield payload


def decode_snapshot(data: bytes) -> MetadataImage:
    frames = _frames(data)
    first = next(frames, None)
    if first is None:
        raise InvalidRecordError("empty snapshot")
    header = pb.SnapshotHeader()
    try:
        header.ParseFromString(first)
    except Exception as exc:
        raise InvalidRecordError(f"undecodable snapshot header: {exc}") from exc
    if header.version != SNAPSHOT_VERSION:
        raise InvalidRecordError(f"unknown snapshot version {header.version}")
    records = [rec.decode(f) for f in frames]
    if len(records) != header.record_count:
        raise InvalidRecordError(
            f"snapshot header says {header.record_count} records, found {len(records)}")
    return image_from_records(records, header.cluster_id, header.last_offset, header.last_epoch,
                              header.last_broker_epoch)


def snapshot_name(last_offset: int, epoch: int) -> str:
    return f"{last_offset + 1:020d}-{epoch:010d}{SUFFIX}"


def write_snapshot(directory: Path, image: MetadataImage,
                   last_contained_log_time_ms: int = 0) -> Path:
    """Write the image as a snapshot file atomically; returns its path."""
    directory.mkdir(parents=True, exist_ok=True)
    final = directory / snapshot_name(image.offset, image.epoch)
    tmp = final.with_name(final.name + ".tmp")
    data = encode_snapshot(image, last_contained_log_time_ms)
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, final)
    dfd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
    return final


def list_snapshots(directory: Path) -> list[tuple[int, int, Path]]:
    """(end offset, epoch, path) of every snapshot file, oldest first."""
    if not directory.is_dir():
        return []
    out = []
    for p in directory.iterdir():
        m = _NAME.match(p.name)
        if m:
            out.append((int(m.group(1)), int(m.group(2)), p))
    return sorted(out)


def load_latest_snapshot(directory: Path) -> MetadataImage | None:
    """The newest snapshot that decodes, or None. Corrupt newer files are skipped."""
    for _end, _epoch, path in reversed(list_snapshots(directory)):
        try:
            return decode_snapshot(path.read_bytes())
        except InvalidRecordError:
            continue
    return None


def delete_snapshots_before(directory: Path, end_offset: int) -> list[Path]:
    """Remove snapshots older than `end_offset` (retention); returns what was removed."""
    removed = []
    for end, _epoch, path in list_snapshots(directory):
        if end < end_offset:
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed


class SnapshotPolicy:
    """When to take a metadata snapshot, as Kafka's metadata.log.max.record.bytes.between.
    snapshots and metadata.log.max.snapshot.interval.ms (0 disables the time trigger) say.
    Pure: the caller reports applied bytes and asks with now_ms."""

    def __init__(self, max_bytes_between: int, max_interval_ms: int, now_ms: int) -> None:
        self.max_bytes_between = max_bytes_between
        self.max_interval_ms = max_interval_ms
        self.bytes_since = 0
        self.last_snapshot_ms = now_ms

    @staticmethod
    def from_config(cfg: Any, now_ms: int) -> SnapshotPolicy:
        return SnapshotPolicy(cfg["metadata.log.max.record.bytes.between.snapshots"],
                              cfg["metadata.log.max.snapshot.interval.ms"], now_ms)

    def applied(self, nbytes: int) -> None:
        self.bytes_since += nbytes

    def due(self, now_ms: int) -> bool:
        if self.bytes_since <= 0:
            return False
        if self.bytes_since >= self.max_bytes_between:
            return True
        return self.max_interval_ms > 0 and now_ms - self.last_snapshot_ms >= self.max_interval_ms

    def taken(self, now_ms: int) -> None:
        self.bytes_since = 0
        self.last_snapshot_ms = now_ms
