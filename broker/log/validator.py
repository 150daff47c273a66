"""Kafka's LogValidator for one partition's config: what a leader checks in a producer's
batches before they are appended, and how it assigns their offsets.

`validate` runs outside the log's lock: framing, CRC and size checks on the raw headers
(broker/protocol/records.py's validate_raw), the segment size, timestamps against
message.timestamp.{before,after}.max.ms, keys on a compacted topic, conversion of magic 0/1
message sets, and recompression to the topic's compression.type. `assign_offsets` runs
under the lock with the log end offset: it stamps base offset, leader epoch and (with
LogAppendTime) the append time into each batch and builds the index entries.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.log.config import LONG_MAX, LogConfig
from broker.log.segment import BatchEntry
from broker.protocol.compression import Compression, codec_by_name
from broker.protocol.records import (
    _U32,
    COMPRESSION_MASK,
    CONTROL_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    RawHeader,
    build_batch,
    decode_records,
    patch_log_append_time,
    patch_log_append_time_split,
    patch_offset_and_epoch,
    validate_raw,
)


@dataclass(frozen=True, slots=True)
class _AppendFlags:
    """What the append path must do beyond header checks, derived once per config."""

    log_append: bool
    check_after: bool
    check_before: bool
    need_decode: bool
    target: Compression | None

    @staticmethod
    def of(cfg: LogConfig) -> _AppendFlags:
        check_before = not cfg.log_append_time and cfg.message_timestamp_before_max_ms < LONG_MAX
        return _AppendFlags(
            log_append=cfg.log_append_time,
            check_after=not cfg.log_append_time and cfg.message_timestamp_after_max_ms < LONG_MAX,
            check_before=check_before,
            need_decode=cfg.compact or check_before,
            target=codec_by_name(cfg.compression_type),
        )


# A RawHeader from a tuple of its 13 fields without NamedTuple's argument handling.
_new_header = tuple.__new__
# baseOffset, batchLength (rewritten unchanged), partitionLeaderEpoch: one pack per batch.
_PATCH = struct.Struct(">qii")


class LogValidator:
    """The append checks and offset assignment of one partition's current config."""

    __slots__ = ("config", "flags", "log_append")

    def __init__(self, config: LogConfig) -> None:
        self.config = config
        self.flags = _AppendFlags.of(config)
        self.log_append = self.flags.log_append

    def validate(self, records: bytes | bytearray | memoryview, now_ms: int
                 ) -> tuple[memoryview, list[tuple[int, RawHeader]]]:
        """The producer's batches, checked (and converted from magic 0/1 or recompressed
        when the topic says so), with their headers; raises KafkaError for the first
        batch that fails."""
        mv = memoryview(records)
        if mv.ndim != 1 or mv.itemsize != 1:
            mv = mv.cast("B")
        if len(mv) > MAGIC_OFFSET and mv[MAGIC_OFFSET] in (0, 1):
            from broker.protocol.legacy import convert_to_v2

            mv = memoryview(convert_to_v2(mv, now_ms=now_ms))
        cfg = self.config
        raw = validate_raw(mv, cfg.max_message_bytes)
        if len(mv) > cfg.segment_bytes:
            raise KafkaError(
                ErrorCode.record_list_too_large,
                f"{len(mv)} bytes exceed segment.bytes {cfg.segment_bytes}",
            )
        flags = self.flags
        if flags.check_after:
            limit = now_ms + cfg.message_timestamp_after_max_ms
            for _, t in raw:
                if t.max_timestamp > limit and not t.attributes & CONTROL_MASK:
                    raise KafkaError(
                        ErrorCode.invalid_timestamp,
                        f"timestamp {t.max_timestamp} is more than "
                        f"{cfg.message_timestamp_after_max_ms} ms after {now_ms}",
                    )
        if flags.need_decode or (
            flags.target is not None
            and any(t.attributes & COMPRESSION_MASK != flags.target for _, t in raw)
        ):
            mv, raw = self._decode_checks_and_rewrites(mv, raw, now_ms)
        return mv, raw

    def assign_offsets(
        self, mv: memoryview, raw: list[tuple[int, RawHeader]], next_offset: int,
        leader_epoch: int, now_ms: int,
    ) -> tuple[memoryview | list[bytes | bytearray | memoryview], int, list[BatchEntry],
               list[RawHeader], int, int, int]:
        """Offsets from `next_offset` (the log end, read under the log's lock), `leader_epoch`
        and, with LogAppendTime, the append time, stamped into each batch: in place in a
        writable buffer, else into private copies of the 61-byte headers beside the caller's
        record bytes. Returns (what to write, its end in `mv`, the index entries, the headers
        as written, the max timestamp, the record count, the next offset)."""
        log_append = self.log_append
        writable = not mv.readonly
        entries: list[BatchEntry] = []
        buffers: list[bytes | bytearray | memoryview] = []
        written: list[RawHeader] = []
        max_ts = -1
        count = 0
        end = 0
        new_header = _new_header
        for pos, t in raw:
            # the header's fields by name, read once (cheaper than attribute reads)
            (_base, batch_length, _epoch, _magic, crc, attributes, last_offset_delta,
             base_timestamp, max_timestamp, producer_id, producer_epoch, base_sequence,
             records_count) = t
            size = batch_length + LOG_OVERHEAD
            if writable:
                patch_offset_and_epoch(mv, pos, next_offset, leader_epoch)
                if log_append:
                    patch_log_append_time(mv, pos, size, now_ms)
            else:
                head = bytearray(mv[pos : pos + HEADER_SIZE])
                body = mv[pos + HEADER_SIZE : pos + size]
                _PATCH.pack_into(head, 0, next_offset, batch_length, leader_epoch)
                if log_append:
                    patch_log_append_time_split(head, body, now_ms)
                buffers.append(head)
                buffers.append(body)
            bmax = now_ms if log_append else max_timestamp
            last = next_offset + last_offset_delta
            entries.append((pos, size, next_offset, last, bmax))
            if log_append:
                crc = _U32.unpack_from(
                    mv if writable else buffers[-2], (pos if writable else 0) + 17
                )[0]
                attributes |= TIMESTAMP_TYPE_MASK
            written.append(new_header(RawHeader, (
                next_offset, batch_length, leader_epoch, 2, crc, attributes, last_offset_delta,
                base_timestamp, bmax, producer_id, producer_epoch, base_sequence,
                records_count)))
            if bmax > max_ts:
                max_ts = bmax
            count += records_count
            next_offset = last + 1
            end = pos + size
        return (mv if writable else buffers, end, entries, written, max_ts, count, next_offset)

    def _decode_checks_and_rewrites(
        self, mv: memoryview, raw: list[tuple[int, RawHeader]], now_ms: int
    ) -> tuple[memoryview, list[tuple[int, RawHeader]]]:
        """Checks that must look at records (compacted keys, old timestamps) and the
        topic's compression.type when it differs from the producer's."""
        cfg = self.config
        target = self.flags.target
        check_before = self.flags.check_before
        out = bytearray()
        recompressed = False
        for pos, t in raw:
            h = BatchHeader(*t)
            batch = mv[pos : pos + h.size]
            if h.is_control:
                out += batch
                continue
            recs = decode_records(batch)
            if len(recs) != h.records_count:
                raise KafkaError(ErrorCode.invalid_record, "record count mismatch")
            for r in recs:
                if cfg.compact and r.key is None:
                    raise KafkaError(
                        ErrorCode.invalid_record, "compacted topic requires keys on every record"
                    )
                if check_before and now_ms - r.timestamp > cfg.message_timestamp_before_max_ms:
                    raise KafkaError(
                        ErrorCode.invalid_timestamp,
                        f"timestamp {r.timestamp} is more than "
                        f"{cfg.message_timestamp_before_max_ms} ms before {now_ms}",
                    )
            if target is not None and h.compression != target:
                recompressed = True
                out += build_batch(
                    recs,
                    base_offset=h.base_offset,
                    compression=target,
                    timestamp_type=h.timestamp_type,
                    producer_id=h.producer_id,
                    producer_epoch=h.producer_epoch,
                    base_sequence=h.base_sequence,
                    partition_leader_epoch=h.partition_leader_epoch,
                    is_transactional=h.is_transactional,
                    last_offset_delta=h.last_offset_delta,
                    base_timestamp=h.base_timestamp,
                    max_timestamp=h.max_timestamp,
                )
            else:
                out += batch
        if not recompressed:
            return mv, raw
        new = memoryview(out)
        return new, validate_raw(new, 1 << 31)
