"""broker/log/validator.py: LogValidator's one pass over a producer's batch headers, the
order in which its errors come (Kafka's: every batch's framing and CRC first), and what it
hands the log (headers, control batches, offsets assigned)."""

import pytest
from kio.schema.errors import ErrorCode
from loghelpers import batch

from broker.errors import KafkaError
from broker.log.config import LogConfig
from broker.log.control import encode_marker_batch
from broker.log.validator import LogValidator
from broker.protocol.compression import Compression
from broker.protocol.records import (
    HEADER,
    iter_batch_headers,
    parse_header,
    scan_batches,
)

NOW = 1_700_000_000_000


def _marker(ts: int = NOW) -> bytes:
    return encode_marker_batch(producer_id=7, producer_epoch=0, committed=True,
                               coordinator_epoch=1, timestamp_ms=ts)


def _corrupt_crc(b: bytes) -> bytes:
    c = bytearray(b)
    c[-1] ^= 0xFF
    return bytes(c)


def _error(validator: LogValidator, records: bytes, **kw: bool) -> ErrorCode:
    with pytest.raises(KafkaError) as e:
        validator.validate(records, NOW, **kw)
    return e.value.error_code


def test_scan_reports_headers_control_batches_late_timestamps_and_codecs() -> None:
    plain = batch(2, ts=NOW)
    late = batch(1, ts=NOW + 10_000, compression=Compression.LZ4)
    records = plain + _marker(ts=NOW + 99_999) + late
    raw, has_control, late_timestamp, other_codec = scan_batches(
        memoryview(records), 1 << 20, NOW + 5_000, int(Compression.NONE))
    assert [(pos, tuple(HEADER.unpack_from(records, pos))) for pos, _ in raw] == [
        (pos, tuple(fields)) for pos, fields in raw]
    assert [pos for pos, _ in raw] == [p for p, _ in iter_batch_headers(records,
                                                                         validate_crc=True)]
    # The marker's far timestamp is not a data batch's: the first late one is `late`'s.
    assert has_control and late_timestamp == NOW + 10_000 and other_codec
    _, has_control, late_timestamp, other_codec = scan_batches(
        memoryview(plain), 1 << 20, NOW + 5_000, None)
    assert (has_control, late_timestamp, other_codec) == (False, None, False)


def test_framing_and_crc_of_every_batch_come_before_the_timestamp_check() -> None:
    v = LogValidator(LogConfig(message_timestamp_after_max_ms=1000))
    late_then_corrupt = batch(1, ts=NOW + 5_000) + _corrupt_crc(batch(1, ts=NOW))
    assert _error(v, late_then_corrupt) == ErrorCode.corrupt_message
    assert _error(v, batch(1, ts=NOW) + batch(1, ts=NOW + 5_000)) == ErrorCode.invalid_timestamp


def test_control_batches_are_refused_after_the_other_checks_unless_allowed() -> None:
    v = LogValidator(LogConfig(message_timestamp_after_max_ms=1000))
    assert _error(v, _marker()) == ErrorCode.invalid_record
    assert _error(v, _marker() + batch(1, ts=NOW + 5_000)) == ErrorCode.invalid_timestamp
    mv, raw, has_control = v.validate(_marker(ts=NOW + 5_000) + batch(1, ts=NOW), NOW,
                                      allow_control=True)
    assert has_control and len(raw) == 2 and bytes(mv) == _marker(ts=NOW + 5_000) + batch(
        1, ts=NOW)


def test_a_batch_larger_than_max_message_bytes_is_refused() -> None:
    v = LogValidator(LogConfig(max_message_bytes=100))
    assert _error(v, batch(1, size=200)) == ErrorCode.message_too_large
    assert _error(v, b"") == ErrorCode.corrupt_message


def test_assign_offsets_stamps_copies_of_read_only_headers_and_keeps_producer_headers() -> None:
    v = LogValidator(LogConfig())
    records = batch(2, ts=NOW) + batch(3, ts=NOW, producer_id=9, producer_epoch=1,
                                        base_sequence=0)
    mv, raw, _ = v.validate(records, NOW)
    data, end, entries, with_producer, max_ts, count, next_offset = v.assign_offsets(
        mv, raw, 40, 6, NOW)
    assert bytes(mv) == records  # the caller's read-only bytes are not touched
    assert isinstance(data, list) and end == len(records)
    written = b"".join(bytes(b) for b in data)
    headers = [h for _, h in iter_batch_headers(written, validate_crc=True)]
    assert [(h.base_offset, h.partition_leader_epoch) for h in headers] == [(40, 6), (42, 6)]
    assert [e[2:4] for e in entries] == [(40, 41), (42, 44)]
    assert (count, next_offset, max_ts) == (5, 45, NOW + 2)
    # Only the batch with a producer id carries producer state.
    assert [(h.base_offset, h.producer_id) for h in with_producer] == [(42, 9)]


def test_assign_offsets_patches_a_writable_buffer_in_place_with_log_append_time() -> None:
    v = LogValidator(LogConfig(message_timestamp_type="LogAppendTime"))
    buf = bytearray(batch(2, ts=NOW - 50_000))
    mv, raw, _ = v.validate(buf, NOW)
    data, _, entries, _, max_ts, _, _ = v.assign_offsets(mv, raw, 3, 2, NOW)
    assert data is mv and max_ts == NOW and entries[0][4] == NOW
    h = parse_header(buf)
    assert (h.base_offset, h.partition_leader_epoch, h.max_timestamp) == (3, 2, NOW)
    assert [p for p, _ in iter_batch_headers(buf, validate_crc=True)] == [0]
