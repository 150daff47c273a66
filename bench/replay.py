"""A cheap load generator for any Kafka broker: pre-encoded Produce and Fetch requests.

On a 2-core machine a client library competes with the broker for the cores, so a
broker-bound figure needs a load that costs little CPU per byte. This replayer encodes one
Produce request with kio (one record batch per partition, `records_per_batch` records of
`size` random bytes, no producer id, so a broker appends the same batch again and again),
then sends the same bytes over raw sockets, patching only the correlation id, with
`inflight` requests outstanding per connection (Kafka answers a connection's requests in
order). Its CPU per request is a few system calls, whatever the request's size. Fetch is
the same: one Fetch request encoded once, whose fetch offsets are patched from the batches
of each answer (found by walking the batch headers, not the records).

A sample of the Produce answers (the first, then every `check_every`-th) is decoded with kio
and must carry no error; callers that need every record accounted for compare the
partitions' end offsets before and after (bench/vs_kafka.py does).

    PYTHONPATH=. python bench/replay.py produce --bootstrap 127.0.0.1:9092 --topic t \
        --partitions 6 --seconds 20 --size 1000 --broker-pid PID
    PYTHONPATH=. python bench/replay.py fetch --bootstrap 127.0.0.1:9092 --topic t \
        --partitions 6 --records 1000000
"""

from __future__ import annotations

import argparse
import datetime
import os
import socket
import struct
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from kio.schema.errors import ErrorCode  # noqa: E402
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic  # noqa: E402
from kio.schema.produce.v9.request import (  # noqa: E402
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from kio.schema.types import ProducerId, TopicName  # noqa: E402
from kio.serial.errors import BufferUnderflow  # noqa: E402
from kio.serial.readers import read_unsigned_varint  # noqa: E402
from kio.static.primitive import Records, i16, i32, i32Timedelta, i64  # noqa: E402

from broker.protocol.headers import skip_tagged_fields  # noqa: E402
from broker.protocol.records import LOG_OVERHEAD, Record, batch_crc, build_batch  # noqa: E402
from broker.testing.wire import decode_response, encode_request  # noqa: E402

PRODUCE_KEY, PRODUCE_VERSION = 0, 9
FETCH_KEY, FETCH_VERSION = 1, 12
# A frame is size (int32), api key (int16), api version (int16), correlation id (int32), ...
CORRELATION_ID_AT = 8
CLIENT_ID = "skiff-replay"
SIZE = struct.Struct(">i")
OFFSET = struct.Struct(">q")
CRC = struct.Struct(">I")
ERROR = struct.Struct(">h")
# one Fetch answer in this many is decoded with kio too (the first included)
CHECK_EVERY = 64
# Fetch offsets are found in the encoded request by encoding these first, one per partition.
_SENTINEL_BASE = 0x5EED_0000_0000_0000


# ------------------------------------------------------------------------ encoding (pure)

def set_correlation_id(frame: bytearray, correlation_id: int) -> None:
    struct.pack_into(">i", frame, CORRELATION_ID_AT, correlation_id)


def produce_frame(topic: str, partitions: Sequence[int], records_per_batch: int, size: int,
                  *, acks: int = -1, timeout_ms: int = 30_000,
                  timestamp_ms: int | None = None, value: bytes | None = None,
                  producer_id: int = -1, producer_epoch: int = -1) -> bytes:
    """One Produce v9 request (correlation id 0) with the same batch for every partition
    (with a producer id, every batch has base sequence 0: see IdempotentFrame)."""
    now = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    payload = os.urandom(size) if value is None else value
    batch = Records(build_batch([Record(timestamp=now, value=payload)] * records_per_batch,
                                producer_id=producer_id, producer_epoch=producer_epoch,
                                base_sequence=0 if producer_id >= 0 else -1))
    request = ProduceRequest(
        transactional_id=None, acks=i16(acks),
        timeout=i32Timedelta.parse(datetime.timedelta(milliseconds=timeout_ms)),
        topic_data=(TopicProduceData(name=TopicName(topic), partition_data=tuple(
            PartitionProduceData(index=i32(p), records=batch) for p in partitions)),))
    return encode_request(request, 0, client_id=CLIENT_ID)


# In a v2 batch: batchLength at 8, crc at 17, the base sequence at 53.
BATCH_LENGTH_AT, CRC_AT, BASE_SEQUENCE_AT = 8, 17, 53


def stamp_sequence(buf: bytearray | memoryview, start: int, sequence: int) -> None:
    """Give the v2 batch at `start` of `buf` base sequence `sequence`, and its CRC again."""
    (length,) = SIZE.unpack_from(buf, start + BATCH_LENGTH_AT)
    SIZE.pack_into(buf, start + BASE_SEQUENCE_AT, sequence)
    CRC.pack_into(buf, start + CRC_AT, batch_crc(buf, start, LOG_OVERHEAD + length))


class IdempotentFrame:
    """A Produce frame from produce_frame with a producer id, whose batches are given the
    next base sequence of their partition before each send (and their CRC again), as an
    idempotent producer (enable.idempotence=true, the Java client's default) sends them."""

    def __init__(self, frame: bytes, batch: bytes, partitions: int,
                 records_per_batch: int) -> None:
        self.frame = bytearray(frame)
        self.records_per_batch = records_per_batch
        self.batches: list[int] = []  # each batch's start in the frame
        at = self.frame.find(batch)
        while at >= 0:
            self.batches.append(at)
            at = self.frame.find(batch, at + len(batch))
        if len(self.batches) != partitions:
            raise AssertionError(f"{len(self.batches)} batches found for {partitions} partitions")
        self.next_sequence = 0

    def next(self) -> bytearray:
        for start in self.batches:
            stamp_sequence(self.frame, start, self.next_sequence)
        self.next_sequence = (self.next_sequence + self.records_per_batch) & 0x7FFF_FFFF
        return self.frame


def init_producer_id(bootstrap: str) -> tuple[int, int]:
    """(producer id, epoch) of a new idempotent producer (InitProducerId v4, no txn id)."""
    from kio.schema.init_producer_id.v4.request import InitProducerIdRequest

    request = InitProducerIdRequest(
        transactional_id=None, transaction_timeout=i32Timedelta.parse(
            datetime.timedelta(milliseconds=60_000)),
        producer_id=ProducerId(-1), producer_epoch=i16(-1))
    deadline = time.monotonic() + 60
    while True:  # a broker loads its transaction state on first use (Kafka: a new topic)
        with _connect(bootstrap) as sock:
            sock.sendall(encode_request(request, 0, client_id=CLIENT_ID))
            _, response = decode_response(22, 4, bytes(FrameReader(sock).next()))
        if response.error_code is ErrorCode.none:
            break
        if (response.error_code not in (ErrorCode.coordinator_load_in_progress,
                                        ErrorCode.coordinator_not_available,
                                        ErrorCode.not_coordinator)
                or time.monotonic() > deadline):
            raise RuntimeError(f"InitProducerId: {response.error_code.name.upper()}")
        time.sleep(0.2)
    return int(response.producer_id), int(response.producer_epoch)


@dataclass(frozen=True)
class FetchTemplate:
    """An encoded Fetch v12 request and where each partition's fetch offset sits in it."""

    frame: bytes
    offset_at: dict[int, int]


def fetch_template(topic: str, partitions: Sequence[int], *, max_wait_ms: int = 500,
                   partition_max_bytes: int = 1 << 20, max_bytes: int = 50 << 20) -> FetchTemplate:
    """One Fetch v12 request without a session (session_epoch -1), read_uncommitted."""
    def encode(offsets: Sequence[int]) -> bytes:
        request = FetchRequest(
            max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=max_wait_ms)),
            min_bytes=i32(1), max_bytes=i32(max_bytes), session_epoch=i32(-1),
            topics=(FetchTopic(topic=TopicName(topic), partitions=tuple(
                FetchPartition(partition=i32(p), fetch_offset=i64(o),
                               partition_max_bytes=i32(partition_max_bytes))
                for p, o in zip(partitions, offsets, strict=True))),),
            forgotten_topics_data=())
        return encode_request(request, 0, client_id=CLIENT_ID)

    marked = encode([_SENTINEL_BASE + i for i in range(len(partitions))])
    offset_at: dict[int, int] = {}
    for i, p in enumerate(partitions):
        at = marked.find(OFFSET.pack(_SENTINEL_BASE + i))
        if at < 0 or marked.find(OFFSET.pack(_SENTINEL_BASE + i), at + 1) >= 0:
            raise AssertionError(f"fetch offset of partition {p} not found once in the frame")
        offset_at[p] = at
    frame = bytearray(marked)
    for at in offset_at.values():
        OFFSET.pack_into(frame, at, 0)
    return FetchTemplate(bytes(frame), offset_at)


def set_fetch_offset(frame: bytearray, template: FetchTemplate, partition: int,
                     offset: int) -> None:
    OFFSET.pack_into(frame, template.offset_at[partition], offset)


def next_offset_after(records: bytes | memoryview, fetch_offset: int) -> tuple[int, int]:
    """(the offset after the last whole batch in `records`, records in those batches past
    `fetch_offset`), from the batch headers: baseOffset int64, batchLength int32, ...,
    lastOffsetDelta int32 at byte 23. A partial batch at the end is left for the next fetch."""
    pos, nxt, count = 0, fetch_offset, 0
    view = memoryview(records)
    while pos + 27 <= len(view):
        (base,) = OFFSET.unpack_from(view, pos)
        (length,) = SIZE.unpack_from(view, pos + 8)
        if pos + 12 + length > len(view):
            break
        (last_delta,) = SIZE.unpack_from(view, pos + 23)
        end = base + last_delta + 1
        if end > nxt:
            count += end - max(base, nxt)
            nxt = end
        pos += 12 + length
    return nxt, count


@dataclass(frozen=True)
class FetchedPartition:
    topic: str
    partition: int
    error_code: int
    records: memoryview  # a view of the answer: valid until the connection reads the next


def _uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    """(value, position after it); kio reads it (and refuses one longer than 5 bytes)."""
    try:
        value, used = read_unsigned_varint(buf, pos)
    except BufferUnderflow as e:
        raise ValueError("answer ends inside a varint") from e
    return value, pos + used


def _take(buf: memoryview, pos: int, n: int) -> int:
    if pos + n > len(buf):
        raise ValueError(f"answer ends {pos + n - len(buf)} bytes early")
    return pos + n


def read_fetch_answer(frame: memoryview) -> tuple[int, list[FetchedPartition]]:
    """(the answer's error code, its partitions) of a Fetch v12 answer (frame without its
    size), read in place: each partition's records stay a view of `frame`. kio's decoder
    copies every partition's records into new bytes and builds an object per field: the
    replayer then spent more CPU per GB fetched than the broker it measured, and on two
    cores a load generator's CPU is taken from the broker (docs/benchmarks.md). Every
    CHECK_EVERY-th answer is decoded with kio as well and must read the same."""
    buf = frame.toreadonly()  # kio's readers take read-only buffers (no copy)
    # response header v1: correlation id, tagged fields
    pos = skip_tagged_fields(buf, _take(buf, 0, 4))
    # throttle_time_ms int32, error_code int16, session_id int32
    _take(buf, pos, 10)
    (error_code,) = ERROR.unpack_from(buf, pos + 4)
    pos += 10
    topics, pos = _uvarint(buf, pos)
    out: list[FetchedPartition] = []
    for _ in range(max(0, topics - 1)):
        name_len, pos = _uvarint(buf, pos)
        end = _take(buf, pos, max(0, name_len - 1))
        topic = bytes(buf[pos:end]).decode()
        pos = end
        partitions, pos = _uvarint(buf, pos)
        for _ in range(max(0, partitions - 1)):
            # partition_index int32, error_code int16, high_watermark, last_stable_offset,
            # log_start_offset int64
            _take(buf, pos, 30)
            (index,) = SIZE.unpack_from(buf, pos)
            (code,) = ERROR.unpack_from(buf, pos + 4)
            pos += 30
            aborted, pos = _uvarint(buf, pos)  # nullable compact array of (int64, int64, tags)
            for _ in range(max(0, aborted - 1)):
                pos = skip_tagged_fields(buf, _take(buf, pos, 16))
            pos = _take(buf, pos, 4)  # preferred_read_replica
            size, pos = _uvarint(buf, pos)  # nullable compact records
            end = _take(buf, pos, max(0, size - 1))
            out.append(FetchedPartition(topic, index, code, buf[pos:end]))
            pos = skip_tagged_fields(buf, end)
        pos = skip_tagged_fields(buf, pos)
    skip_tagged_fields(buf, pos)
    return error_code, out


def fetch_answer_with_kio(frame: bytes) -> tuple[int, list[tuple[str, int, int, int]]]:
    """What read_fetch_answer reads, decoded by kio: (error code, [(topic, partition, error
    code, records' length)])."""
    _, response = decode_response(FETCH_KEY, FETCH_VERSION, frame)
    return response.error_code.value, [
        (str(t.topic), int(p.partition_index), p.error_code.value, len(p.records or b""))
        for t in response.responses for p in t.partitions]


def produce_errors(response_frame: bytes) -> list[str]:
    """The errors of one Produce v9 answer (frame without its size), as `topic-p: CODE`."""
    _, response = decode_response(PRODUCE_KEY, PRODUCE_VERSION, response_frame)
    return [f"{t.name}-{p.index}: {p.error_code.name.upper()}"
            for t in response.responses for p in t.partition_responses
            if p.error_code is not ErrorCode.none]


# ------------------------------------------------------------------------ sockets (IO)

class FrameReader:
    """Reads a connection's answers into one reused buffer (a bigger one when needed)."""

    def __init__(self, sock: socket.socket, size: int = 1 << 16) -> None:
        self.sock = sock
        self.head = bytearray(4)
        self.buf = bytearray(size)

    def _fill(self, view: memoryview) -> None:
        got = 0
        while got < len(view):
            n = self.sock.recv_into(view[got:], len(view) - got)
            if n == 0:
                raise ConnectionError("broker closed the connection")
            got += n

    def next(self) -> memoryview:
        """The next answer without its size; valid until the next call."""
        self._fill(memoryview(self.head))
        (size,) = SIZE.unpack_from(self.head, 0)
        if size > len(self.buf):
            self.buf = bytearray(max(size, 2 * len(self.buf)))
        view = memoryview(self.buf)[:size]
        self._fill(view)
        return view


def _connect(bootstrap: str) -> socket.socket:
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=60)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


@dataclass
class ReplayResult:
    requests: int = 0
    records: int = 0
    bytes: int = 0  # record value bytes
    wall_s: float = 0.0
    client_cpu_s: float = 0.0  # this process's CPU (every thread) during the replay
    errors: list[str] = field(default_factory=list)

    @property
    def mb_s(self) -> float:
        return self.bytes / self.wall_s / 1e6 if self.wall_s else 0.0

    @property
    def records_s(self) -> float:
        return self.records / self.wall_s if self.wall_s else 0.0


def _produce_connection(bootstrap: str, frame: bytes | IdempotentFrame, requests: int,
                        seconds: float, inflight: int, check_every: int,
                        start: threading.Barrier, out: dict[str, Any]) -> None:
    idempotent = frame if isinstance(frame, IdempotentFrame) else None
    buf = frame.frame if isinstance(frame, IdempotentFrame) else bytearray(frame)
    sent = received = 0
    errors: list[str] = []
    sock = _connect(bootstrap)
    answers = FrameReader(sock)
    try:
        start.wait()
        deadline = time.monotonic() + seconds
        while sent < min(inflight, requests):
            if idempotent is not None:
                idempotent.next()
            set_correlation_id(buf, sent)
            sock.sendall(buf)
            sent += 1
        while received < sent:
            view = answers.next()
            (cid,) = SIZE.unpack_from(view, 0)
            if cid != received:
                raise AssertionError(f"answer {cid} where {received} was due")
            if received % check_every == 0:
                errors += produce_errors(bytes(view))
            received += 1
            if sent < requests and time.monotonic() < deadline:
                if idempotent is not None:
                    idempotent.next()
                set_correlation_id(buf, sent)
                sock.sendall(buf)
                sent += 1
    except Exception as exc:  # reported by the caller
        errors.append(repr(exc))
    finally:
        sock.close()
    out["requests"], out["errors"] = received, errors


def replay_produce(bootstrap: str, topic: str, partitions: Sequence[int], *,
                   connections: int = 3, inflight: int = 5, records_per_batch: int = 16,
                   size: int = 1000, acks: int = -1, requests: int | None = None,
                   seconds: float | None = None, check_every: int = 64,
                   idempotent: bool = False) -> ReplayResult:
    """Produce until `requests` requests were answered (spread over the connections) or
    `seconds` passed. Connection c carries partitions p with p % connections == c.
    `idempotent`: each connection is a producer of its own (InitProducerId), whose batches
    carry its id and consecutive sequences; the replayer then computes each batch's CRC
    per request (crc32c, about a microsecond per 16 KB)."""
    if requests is None and seconds is None:
        raise ValueError("give requests or seconds")
    shares = [[p for i, p in enumerate(partitions) if i % connections == c]
              for c in range(connections)]
    shares = [s for s in shares if s]
    value = os.urandom(size)
    frames: list[bytes | IdempotentFrame] = []
    for s_ in shares:
        if idempotent:
            pid, epoch = init_producer_id(bootstrap)
            now = int(time.time() * 1000)
            batch = build_batch([Record(timestamp=now, value=value)] * records_per_batch,
                                producer_id=pid, producer_epoch=epoch, base_sequence=0)
            frames.append(IdempotentFrame(
                produce_frame(topic, s_, records_per_batch, size, acks=acks, value=value,
                              producer_id=pid, producer_epoch=epoch, timestamp_ms=now),
                batch, len(s_), records_per_batch))
        else:
            frames.append(produce_frame(topic, s_, records_per_batch, size, acks=acks,
                                        value=value))
    per_conn = ([(requests + len(shares) - 1 - c) // len(shares) for c in range(len(shares))]
                if requests is not None else [1 << 62] * len(shares))
    start = threading.Barrier(len(shares) + 1)
    outs: list[dict[str, Any]] = [{} for _ in shares]
    threads = [threading.Thread(target=_produce_connection, daemon=True, args=(
        bootstrap, frames[c], per_conn[c], seconds if seconds is not None else 1e9, inflight,
        check_every, start, outs[c]))
        for c in range(len(shares))]
    for t in threads:
        t.start()
    start.wait()
    cpu0, t0 = time.process_time(), time.monotonic()
    for t in threads:
        t.join()
    result = ReplayResult(wall_s=time.monotonic() - t0, client_cpu_s=time.process_time() - cpu0)
    for c, out in enumerate(outs):
        n = out.get("requests", 0)
        result.requests += n
        result.records += n * records_per_batch * len(shares[c])
        result.bytes += n * records_per_batch * len(shares[c]) * size
        result.errors += out.get("errors", [])
    return result


def _fetch_connection(bootstrap: str, topic: str, ends: dict[int, int], deadline: float,
                      start: threading.Barrier, out: dict[str, Any],
                      check_every: int = CHECK_EVERY) -> None:
    template = fetch_template(topic, list(ends))
    frame = bytearray(template.frame)
    offsets = dict.fromkeys(ends, 0)
    got = nbytes = requests = 0
    errors: list[str] = []
    sock = _connect(bootstrap)
    answers = FrameReader(sock, 1 << 20)
    cpu0 = 0.0
    try:
        start.wait()
        cpu0 = time.process_time()
        while (any(offsets[p] < e for p, e in ends.items())
               and time.monotonic() < deadline):
            for p, o in offsets.items():
                set_fetch_offset(frame, template, p, o)
            set_correlation_id(frame, requests)
            sock.sendall(frame)
            answer = answers.next()
            error_code, partitions = read_fetch_answer(answer)
            if requests % check_every == 0:
                read = (error_code, [(p.topic, p.partition, p.error_code, len(p.records))
                                     for p in partitions])
                with_kio = fetch_answer_with_kio(bytes(answer))
                if read != with_kio:
                    errors.append(f"fetch answer {requests} read as {read}, kio reads "
                                  f"{with_kio}")
                    break
            requests += 1
            if error_code:
                errors.append(f"fetch: {ErrorCode(error_code).name.upper()}")
                break
            for pr in partitions:
                if pr.error_code:
                    errors.append(f"{pr.topic}-{pr.partition}: "
                                  f"{ErrorCode(pr.error_code).name.upper()}")
                    continue
                nxt, n = next_offset_after(pr.records, offsets[pr.partition])
                offsets[pr.partition] = nxt
                got += n
                nbytes += len(pr.records)
            if errors:
                break
    except Exception as exc:
        errors.append(repr(exc))
    finally:
        sock.close()
    out.update(records=got, bytes=nbytes, requests=requests, errors=errors,
               cpu_s=time.process_time() - cpu0, end=time.monotonic())


def _fetch_process(bootstrap: str, topic: str, ends: dict[int, int], deadline: float,
                   start: Any, results: Any, index: int, check_every: int) -> None:
    out: dict[str, Any] = {}
    _fetch_connection(bootstrap, topic, ends, deadline, start, out, check_every)
    results.put((index, out))


def replay_fetch(bootstrap: str, topic: str, ends: dict[int, int], *,
                 connections: int = 1, timeout_s: float = 600.0,
                 check_every: int = CHECK_EVERY) -> ReplayResult:
    """Read every partition of `ends` from offset 0 up to its end offset (partitions split
    over the connections); `bytes` counts the record batches' bytes as fetched (headers
    included). `check_every`: one answer in this many (the first included) is decoded
    with kio as well, and must read as it was read in place.

    Each connection reads in a process of its own: as threads of one process they took
    turns on its GIL (decoding each answer with kio), and both brokers fetched slower for it
    (docs/benchmarks.md, "Against Kafka 4.4 with 23 modules compiled"). `client_cpu_s` adds
    up the processes' CPU while they fetched."""
    import multiprocessing

    partitions = sorted(ends)
    shares = [[p for i, p in enumerate(partitions) if i % connections == c]
              for c in range(connections)]
    shares = [s for s in shares if s]
    deadline = time.monotonic() + timeout_s
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(len(shares) + 1)
    results = ctx.Queue()
    procs = [ctx.Process(target=_fetch_process, daemon=True, args=(
        bootstrap, topic, {p: ends[p] for p in shares[c]}, deadline, start, results, c,
        check_every))
        for c in range(len(shares))]
    for proc in procs:
        proc.start()
    outs: list[dict[str, Any]] = [{} for _ in shares]
    try:
        start.wait(timeout=120)
        t0 = time.monotonic()
        for _ in shares:
            index, out = results.get(timeout=max(1.0, deadline - time.monotonic() + 30))
            outs[index] = out
    finally:
        for proc in procs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.kill()
    ends_at = [out["end"] for out in outs if "end" in out]
    result = ReplayResult(wall_s=(max(ends_at) - t0) if ends_at else 0.0,
                          client_cpu_s=sum(out.get("cpu_s", 0.0) for out in outs))
    for out in outs:
        result.requests += out.get("requests", 0)
        result.records += out.get("records", 0)
        result.bytes += out.get("bytes", 0)
        result.errors += out.get("errors", [])
    return result


def end_offsets(bootstrap: str, topic: str, partitions: Sequence[int]) -> dict[int, int]:
    """Each partition's high watermark, as librdkafka reads it."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "skiff-replay-unused",
                  "enable.auto.commit": False, "log_level": 3})
    try:
        return {p: int(c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1])
                for p in partitions}
    finally:
        c.close()


def wait_writable(bootstrap: str, topic: str, partitions: Sequence[int],
                  timeout_s: float = 60.0) -> int:
    """Until one Produce of one record to every partition is answered without error (a
    broker may list a new partition's leader in Metadata a moment before that leader
    takes writes: Kafka answered NOT_LEADER_OR_FOLLOWER right after creation); returns the
    records this wrote."""
    frame = bytearray(produce_frame(topic, partitions, 1, 1, acks=-1))
    written = 0
    deadline = time.monotonic() + timeout_s
    with _connect(bootstrap) as sock:
        answers = FrameReader(sock)
        while True:
            sock.sendall(frame)
            errors = produce_errors(bytes(answers.next()))
            written += len(partitions) - len(errors)
            if not errors:
                return written
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic} not writable after {timeout_s:.0f} s: {errors}")
            time.sleep(0.1)


def _cpu_s(pid: int | None) -> float | None:
    if pid is None:
        return None
    from bench.perf import broker_cpu_s
    return broker_cpu_s(pid)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["produce", "fetch"])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--connections", type=int, default=3)
    ap.add_argument("--inflight", type=int, default=5)
    ap.add_argument("--size", type=int, default=1000)
    ap.add_argument("--batch-records", type=int, default=16)
    ap.add_argument("--acks", type=int, default=-1)
    ap.add_argument("--seconds", type=float, default=20.0, help="produce for this long")
    ap.add_argument("--broker-pid", type=int, help="for the broker's CPU figures")
    ap.add_argument("--idempotent", action="store_true",
                    help="batches with a producer id and sequences, as the Java client sends")
    args = ap.parse_args(argv)
    parts = list(range(args.partitions))
    cpu0 = _cpu_s(args.broker_pid)
    if args.mode == "produce":
        r = replay_produce(args.bootstrap, args.topic, parts, connections=args.connections,
                           inflight=args.inflight, records_per_batch=args.batch_records,
                           size=args.size, acks=args.acks, seconds=args.seconds,
                           idempotent=args.idempotent)
    else:
        r = replay_fetch(args.bootstrap, args.topic, end_offsets(args.bootstrap, args.topic, parts),
                         connections=args.connections)
    cpu1 = _cpu_s(args.broker_pid)
    print(f"{args.mode}: {r.records:,} records in {r.requests:,} requests, {r.wall_s:.2f} s: "
          f"{r.records_s:,.0f} records/s, {r.mb_s:.1f} MB/s; replayer CPU {r.client_cpu_s:.2f} s")
    if cpu0 is not None and cpu1 is not None:
        print(f"broker: {cpu1 - cpu0:.2f} CPU-s, {(cpu1 - cpu0) / r.wall_s:.2f} cores, "
              f"{(cpu1 - cpu0) / (r.bytes / 1e9):.2f} CPU-s per GB")
    for e in r.errors[:10]:
        print(f"error: {e}")
    return 1 if r.errors else 0


if __name__ == "__main__":
    sys.exit(main())
