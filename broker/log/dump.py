"""`skiff tools dump-log FILE... [--verify] [--print-data]`, like kafka-dump-log.sh.

.log: one line per batch (and per record with --print-data, where a transaction marker
shows as `endTxnMarker: COMMIT|ABORT coordinatorEpoch: N`); --verify checks every CRC
and that the file ends on a batch boundary. .index / .timeindex / .txnindex: one line per
entry; --verify checks each entry against the segment's .log next to it (a .txnindex
entry must name an ABORT marker of its producer at its last offset). leader-epoch-checkpoint
and offset checkpoints are printed as read. Exit status 0 if everything checked is
valid, 1 if not, 2 on usage errors.
"""

from __future__ import annotations

import argparse
import struct
import sys
from pathlib import Path
from typing import TextIO

from crc32c import crc32c

from broker.errors import KafkaError
from broker.log.checkpoints import (
    CheckpointError,
    read_epoch_checkpoint,
    read_offsets_checkpoint,
)
from broker.log.control import ControlType, control_type, read_marker
from broker.log.txn_index import ENTRY_SIZE, TxnIndexCorrupt, decode_entries, format_entries
from broker.protocol.records import (
    _LEN_AND_MAGIC,
    CRC_START,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    BatchHeader,
    decode_records,
)

_CHUNK = 8 * 1024 * 1024


def _fmt_bytes(b: bytes | None) -> str:
    if b is None:
        return "null"
    try:
        return b.decode()
    except UnicodeDecodeError:
        return b.hex()


def _log_batches(path: Path) -> tuple[list[tuple[int, BatchHeader, bytes]], int, str | None]:
    """All batches (position, header, bytes) up to the first unreadable byte."""
    data = path.read_bytes()
    out: list[tuple[int, BatchHeader, bytes]] = []
    pos = 0
    while pos < len(data):
        if len(data) - pos < HEADER_SIZE:
            return out, pos, f"{len(data) - pos} trailing bytes at position {pos}"
        _, length, _, magic = _LEN_AND_MAGIC.unpack_from(data, pos)
        if length < MIN_BATCH_LENGTH or pos + LOG_OVERHEAD + length > len(data):
            return out, pos, f"batch length {length} at position {pos} does not fit the file"
        if magic != 2:
            return out, pos, f"magic {magic} at position {pos}"
        h = BatchHeader(*HEADER.unpack_from(data, pos))
        out.append((pos, h, data[pos : pos + h.size]))
        pos += h.size
    return out, pos, None


def dump_log(path: Path, out: TextIO, *, verify: bool, print_data: bool) -> bool:
    ok = True
    batches, _end, problem = _log_batches(path)
    for pos, h, raw in batches:
        valid = crc32c(raw[CRC_START:]) == h.crc
        last_seq = h.base_sequence + h.last_offset_delta if h.base_sequence >= 0 else -1
        ok &= valid
        horizon = h.base_timestamp if h.has_delete_horizon else None
        out.write(
            f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.records_count}"
            f" baseSequence: {h.base_sequence}"
            f" lastSequence: {last_seq}"
            f" producerId: {h.producer_id} producerEpoch: {h.producer_epoch}"
            f" partitionLeaderEpoch: {h.partition_leader_epoch}"
            f" isTransactional: {str(h.is_transactional).lower()}"
            f" isControl: {str(h.is_control).lower()}"
            f" deleteHorizonMs: {horizon if horizon is not None else 'OptionalLong.empty'}"
            f" position: {pos} {h.timestamp_type.name.title().replace('_', '')}: {h.max_timestamp}"
            f" size: {h.size} magic: {h.magic} compresscodec: {h.compression.name.lower()}"
            f" crc: {h.crc} isvalid: {str(valid).lower()}\n"
        )
        if print_data and valid:
            try:
                records = decode_records(raw)
            except KafkaError as e:
                out.write(f"| undecodable records: {e}\n")
                ok = False
                continue
            marker = read_marker(raw, h) if h.is_control else None
            for r in records:
                seq = h.base_sequence + (r.offset - h.base_offset) if h.base_sequence >= 0 else -1
                out.write(
                    f"| offset: {r.offset} {h.timestamp_type.name.title().replace('_', '')}:"
                    f" {r.timestamp} keySize: {-1 if r.key is None else len(r.key)}"
                    f" valueSize: {-1 if r.value is None else len(r.value)} sequence: {seq}"
                    f" headerKeys: [{','.join(k for k, _ in r.headers)}]"
                )
                if marker is not None:
                    kind = "COMMIT" if marker.committed else "ABORT"
                    out.write(f" endTxnMarker: {kind} coordinatorEpoch:"
                              f" {marker.coordinator_epoch}\n")
                elif h.is_control:
                    t = control_type(r.key)
                    out.write(f" controlType: {'UNKNOWN' if t is None else t}\n")
                else:
                    out.write(f" key: {_fmt_bytes(r.key)} payload: {_fmt_bytes(r.value)}\n")
    if problem is not None:
        out.write(f"Found invalid data: {problem}\n")
        ok = False
    if verify:
        out.write(f"Verification {'passed' if ok else 'FAILED'} for {path}\n")
    return ok


def _segment_log(index_path: Path) -> Path:
    return index_path.with_name(index_path.name.split(".")[0] + ".log")


def _unused(data: bytes, i: int, entry_size: int) -> bool:
    """Whether the all-zero entry `i` of an index file is unused space: after the first entry
    always (offsets and timestamps only grow), and the first entry too when the next is
    zeros as well: the active segment's index Kafka preallocates (10 MiB) before its first
    entry. A lone first entry of zeros (a closed segment's trimmed file) is a real one."""
    if i > 0:
        return True
    nxt = data[entry_size : 2 * entry_size]
    return len(nxt) == entry_size and not any(nxt)


def dump_index(path: Path, out: TextIO, *, verify: bool) -> bool:
    base = int(path.name.split(".")[0])
    data = path.read_bytes()
    ok = True
    batches_by_pos: dict[int, BatchHeader] = {}
    if verify:
        log_path = _segment_log(path)
        if not log_path.exists():
            out.write(f"No log file {log_path.name} to verify against\n")
            return False
        batches_by_pos = {p: h for p, h, _ in _log_batches(log_path)[0]}
    prev = -1
    for i in range(len(data) // 8):
        rel, pos = struct.unpack_from(">ii", data, i * 8)
        if rel == 0 and pos == 0 and _unused(data, i, 8):
            break  # pre-allocated, unused space
        out.write(f"offset: {base + rel} position: {pos}\n")
        if verify:
            h = batches_by_pos.get(pos)
            if h is None or h.last_offset != base + rel or base + rel <= prev:
                out.write(
                    f"Index entry offset: {base + rel} position: {pos} does not match the log\n"
                )
                ok = False
            prev = base + rel
    if len(data) % 8:
        out.write(f"Index file size {len(data)} is not a multiple of 8\n")
        ok = False
    if verify:
        out.write(f"Verification {'passed' if ok else 'FAILED'} for {path}\n")
    return ok


def dump_time_index(path: Path, out: TextIO, *, verify: bool) -> bool:
    base = int(path.name.split(".")[0])
    data = path.read_bytes()
    ok = True
    headers: list[BatchHeader] = []
    if verify:
        log_path = _segment_log(path)
        if not log_path.exists():
            out.write(f"No log file {log_path.name} to verify against\n")
            return False
        headers = [h for _, h, _ in _log_batches(log_path)[0]]
    prev_ts = -1
    for i in range(len(data) // 12):
        ts, rel = struct.unpack_from(">qi", data, i * 12)
        if ts == 0 and rel == 0 and _unused(data, i, 12):
            break  # pre-allocated, unused space
        out.write(f"timestamp: {ts} offset: {base + rel}\n")
        if verify:
            upto = [h.max_timestamp for h in headers if h.base_offset <= base + rel]
            if not upto or max(upto) != ts or ts <= prev_ts:
                out.write(
                    f"Time index entry timestamp: {ts} offset: {base + rel}"
                    " does not match the log\n"
                )
                ok = False
            prev_ts = ts
    if len(data) % 12:
        out.write(f"Time index file size {len(data)} is not a multiple of 12\n")
        ok = False
    if verify:
        out.write(f"Verification {'passed' if ok else 'FAILED'} for {path}\n")
    return ok


def dump_txn_index(path: Path, out: TextIO, *, verify: bool) -> bool:
    """Kafka's lines for a .txnindex; --verify finds each entry's ABORT marker."""
    data = path.read_bytes()
    ok = True
    try:
        entries = decode_entries(data)
    except TxnIndexCorrupt as exc:
        out.write(f"Found invalid data: {exc}\n")
        return False
    markers: dict[int, tuple[int, bool]] = {}
    if verify:
        log_path = _segment_log(path)
        if not log_path.exists():
            out.write(f"No log file {log_path.name} to verify against\n")
            return False
        for _, h, raw in _log_batches(log_path)[0]:
            m = read_marker(raw, h) if h.is_control else None
            if m is not None:
                markers[h.base_offset] = (h.producer_id, m.committed)
    for e, line in zip(entries, format_entries(entries), strict=True):
        out.write(line + "\n")
        if verify and (markers.get(e.last_offset) != (e.producer_id, False)
                       or e.first_offset > e.last_offset):
            out.write(f"Transaction index entry of producer {e.producer_id} at last offset"
                      f" {e.last_offset} names no {ControlType.ABORT.name} marker of it\n")
            ok = False
    if len(data) % ENTRY_SIZE:
        out.write(f"Transaction index file size {len(data)} is not a multiple of {ENTRY_SIZE}\n")
        ok = False
    if verify:
        out.write(f"Verification {'passed' if ok else 'FAILED'} for {path}\n")
    return ok


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="skiff tools dump-log", description="Print the contents of Kafka log files."
    )
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--verify", action="store_true", help="check CRCs and index entries")
    parser.add_argument("--print-data", action="store_true", help="print every record")
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return 2 if e.code else 0
    out = sys.stdout
    ok = True
    for path in args.files:
        out.write(f"Dumping {path}\n")
        if not path.is_file():
            out.write(f"No such file {path}\n")
            ok = False
            continue
        name = path.name
        try:
            if name.endswith(".log") or name.endswith(".log.deleted"):
                ok &= dump_log(path, out, verify=args.verify, print_data=args.print_data)
            elif name.endswith(".index"):
                ok &= dump_index(path, out, verify=args.verify)
            elif name.endswith(".timeindex"):
                ok &= dump_time_index(path, out, verify=args.verify)
            elif name.endswith(".txnindex"):
                ok &= dump_txn_index(path, out, verify=args.verify)
            elif name == "leader-epoch-checkpoint":
                for epoch, start in read_epoch_checkpoint(path):
                    out.write(f"epoch: {epoch} startOffset: {start}\n")
            elif name.endswith("-checkpoint"):
                for (topic, part), off in sorted(read_offsets_checkpoint(path).items()):
                    out.write(f"{topic}-{part}: {off}\n")
            else:
                out.write(f"Ignoring unknown file {path}\n")
        except (CheckpointError, OSError) as e:
            out.write(f"Could not read {path}: {e}\n")
            ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
