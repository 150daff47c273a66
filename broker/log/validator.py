"""Kafka's LogValidator for one partition's config: what a leader checks in a producer's
batches before they are appended, and how it assigns their offsets.

`validate` runs outside the log's lock: framing, CRC and size checks on the raw headers
(broker/protocol/records.py's scan_batches, one pass), the segment size, timestamps against
message.timestamp.{before,after}.max.ms, keys on a compacted topic, conversion of magic 0/1
message sets, and recompression to the topic's compression.type. `assign_offsets` runs
under the lock with the log end offset: it stamps base offset, leader epoch and (with
LogAppendTime) the append time into each batch and builds the index entries.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.log.config import LONG_MAX, LogConfig
from broker.log.segment import BatchEntry
from broker.protocol.compression import Compression, codec_by_name
from broker.protocol.records import (
    _U32,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    HeaderFields,
    RawHeader,
    build_batch,
    decode_records,
    patch_log_append_time,
    patch_log_append_time_split,
    patch_offset_and_epoch,
    scan_batches,
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

    # written out: mypyc compiles it, where dataclass's own runs interpreted (broker/native.py)
    def __init__(
        self, log_append: bool, check_after: bool, check_before: bool, need_decode: bool,
        target: Compression | None,
    ) -> None:
        object.__setattr__(self, "log_append", log_append)
        object.__setattr__(self, "check_after", check_after)
        object.__setattr__(self, "check_before", check_before)
        object.__setattr__(self, "need_decode", need_decode)
        object.__setattr__(self, "target", target)

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
_new_header: Final = tuple.__new__
# baseOffset, batchLength (rewritten unchanged), partitionLeaderEpoch: one pack per batch.
_PATCH: Final = struct.Struct(">qii")


class LogValidator:
    """The append checks and offset assignment of one partition's current config."""

    __slots__ = ("_after_max_ms", "_rewrite_always", "config", "flags", "log_append")

    def __init__(self, config: LogConfig) -> None:
        self.config = config
        flags = self.flags = _AppendFlags.of(config)
        self.log_append = flags.log_append
        # Read on every append: a timestamp limit of None skips the check.
        self._after_max_ms = config.message_timestamp_after_max_ms if flags.check_after else None
        self._rewrite_always = flags.need_decode

    def validate(self, records: bytes | bytearray | memoryview, now_ms: int,
                 allow_control: bool = False
                 ) -> tuple[memoryview, list[tuple[int, HeaderFields]], bool]:
        """The producer's batches, checked (and converted from magic 0/1 or recompressed
        when the topic says so), with their headers and whether any is a control batch;
        raises KafkaError for the first check that fails, in Kafka's order: every batch's
        framing, size and CRC, then the append as a whole against segment.bytes, then
        timestamps, then the checks that read records, then control batches, which only
        the broker itself may write (`allow_control`: transaction markers)."""
        mv = memoryview(records)
        if type(records) is not bytes and (mv.ndim != 1 or mv.itemsize != 1):
            mv = mv.cast("B")
        end = len(mv)
        if end > MAGIC_OFFSET and mv[MAGIC_OFFSET] in (0, 1):
            from broker.protocol.legacy import convert_to_v2

            mv = memoryview(convert_to_v2(mv, now_ms=now_ms))
            end = len(mv)
        cfg = self.config
        after_max_ms = self._after_max_ms
        raw, has_control, late_timestamp, rewrite = scan_batches(
            mv, cfg.max_message_bytes,
            LONG_MAX if after_max_ms is None else now_ms + after_max_ms, self.flags.target)
        if end > cfg.segment_bytes:
            raise KafkaError(
                ErrorCode.record_list_too_large,
                f"{end} bytes exceed segment.bytes {cfg.segment_bytes}",
            )
        if late_timestamp is not None:
            raise KafkaError(
                ErrorCode.invalid_timestamp,
                f"timestamp {late_timestamp} is more than "
                f"{cfg.message_timestamp_after_max_ms} ms after {now_ms}",
            )
        if rewrite or self._rewrite_always:
            mv, raw = self._decode_checks_and_rewrites(mv, raw, now_ms)
        if has_control and not allow_control:
            raise KafkaError(ErrorCode.invalid_record, "clients may not write control batches")
        return mv, raw, has_control

    def assign_offsets(
        self, mv: memoryview, raw: list[tuple[int, HeaderFields]], next_offset: int,
        leader_epoch: int, now_ms: int,
    ) -> tuple[memoryview | list[bytes | bytearray | memoryview], int, list[BatchEntry],
               list[RawHeader], int, int, int]:
        """Offsets from `next_offset` (the log end, read under the log's lock), `leader_epoch`
        and, with LogAppendTime, the append time, stamped into each batch: in place in a
        writable buffer, else into private copies of the stamped bytes (the first 16, or
        the 61-byte header with LogAppendTime) beside the caller's other bytes. Returns
        (what to write, its end in `mv`, the index entries, the headers as written of the
        batches that carry a producer id (what producer state tracks; plain producers'
        appends build none), the max timestamp, the record count, the next offset)."""
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
            elif log_append:
                head = bytearray(mv[pos : pos + HEADER_SIZE])
                body = mv[pos + HEADER_SIZE : pos + size]
                _PATCH.pack_into(head, 0, next_offset, batch_length, leader_epoch)
                patch_log_append_time_split(head, body, now_ms)
                buffers.append(head)
                buffers.append(body)
            else:
                # The three patched fields are the batch's first 16 bytes: written from a
                # fresh 16, followed by the caller's bytes from the magic on.
                buffers.append(_PATCH.pack(next_offset, batch_length, leader_epoch))
                buffers.append(mv[pos + _PATCH.size : pos + size])
            bmax = now_ms if log_append else max_timestamp
            last = next_offset + last_offset_delta
            entries.append((pos, size, next_offset, last, bmax))
            if log_append:
                crc = _U32.unpack_from(
                    mv if writable else buffers[-2], (pos if writable else 0) + 17
                )[0]
                attributes |= TIMESTAMP_TYPE_MASK
            if producer_id >= 0:
                written.append(new_header(RawHeader, (
                    next_offset, batch_length, leader_epoch, 2, crc, attributes,
                    last_offset_delta, base_timestamp, bmax, producer_id, producer_epoch,
                    base_sequence, records_count)))
            if bmax > max_ts:
                max_ts = bmax
            count += records_count
            next_offset = last + 1
            end = pos + size
        return (mv if writable else buffers, end, entries, written, max_ts, count, next_offset)

    def _decode_checks_and_rewrites(
        self, mv: memoryview, raw: list[tuple[int, HeaderFields]], now_ms: int
    ) -> tuple[memoryview, list[tuple[int, HeaderFields]]]:
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
