"""Kafka's on-disk format both ways (issue 30): Kafka 4.4's kafka-dump-log reads the files
Skiff writes, and `skiff tools dump-log --verify` reads the files the reference Kafka 4.4
node writes.

The same records go to both: 40 records under each codec (none, gzip, snappy, lz4, zstd), an
aborted transaction and a committed one, in a topic that rolls its segment after that
(segment.ms), so there is a closed segment (trimmed indexes, a .txnindex) and an active one
(Kafka preallocates its indexes). Then the metadata log: Skiff's metadata records are
protobuf (proto/skiff/metadata/v1), not Kafka's metadata record schemas, so
kafka-dump-log --cluster-metadata-decoder reads their batches (framing, offsets, CRCs) and
Kafka's own control records (LeaderChange, KRaftVersion, Voters) but not Skiff's payloads:
the test asserts exactly that, a known design difference (docs/compatibility.md).
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.compat.kafka.tools_support import ok
from tests.support.kafka_ref import KafkaNode
from tests.support.node import REPO_ROOT, SkiffNode

pytestmark = pytest.mark.timeout(900)
TOPIC = "tools-dump-log"
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
PER_CODEC = 40
TXN_RECORDS = 5
# segment.ms, against record timestamps (Kafka's rule): every record of the closed segment
# carries the same CreateTime; one record segment.ms later rolls the segment, whatever the
# wall clock does on a loaded machine
SEGMENT_MS = 600_000
READY_S = 120.0  # generous: CI machines here are shared
# per codec, one aborted transaction (5 records + marker), one committed (5 + marker)
CLOSED_RECORDS = len(CODECS) * PER_CODEC + 2 * (TXN_RECORDS + 1)
BATCH = re.compile(r"^baseOffset: (\d+) lastOffset: (\d+) count: (\d+) .*isTransactional: "
                   r"(\w+) isControl: (\w+) .*compresscodec: (\w+) crc: (\d+) isvalid: (\w+)")
RECORD = re.compile(r"^\| offset: (\d+) ")


def produce_mixed(bootstrap: str) -> None:
    """The closed segment's records: every codec, then an aborted and a committed transaction,
    all with one CreateTime; then one record 2 x segment.ms later rolls the segment."""
    t0 = int(time.time() * 1000)
    for codec in CODECS:
        p = Producer({"bootstrap.servers": bootstrap, "compression.type": codec,
                      "linger.ms": 50, "acks": "all"})
        for i in range(PER_CODEC):
            p.produce(TOPIC, key=f"{codec}-{i}".encode(), timestamp=t0,
                      value=(f"{codec} value {i} " * 12).encode(), partition=0,
                      headers=[("codec", codec.encode())])
        assert p.flush(30) == 0
    t = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"dump-{time.time_ns()}"})
    t.init_transactions(30)
    for commit in (False, True):
        t.begin_transaction()
        for i in range(TXN_RECORDS):
            t.produce(TOPIC, value=f"txn {'commit' if commit else 'abort'} {i}".encode(),
                      partition=0, timestamp=t0)
        t.flush(30)
        if commit:
            t.commit_transaction(30)
        else:
            t.abort_transaction(30)
    # commit_transaction returns once the coordinator has logged the commit; Kafka writes the
    # partition's marker after that, so the roll record must wait for the marker's offset
    watch = Consumer({"bootstrap.servers": bootstrap, "group.id": "dump-log-unused",
                      "isolation.level": "read_uncommitted"})
    try:
        deadline = time.monotonic() + READY_S
        while watch.get_watermark_offsets(TopicPartition(TOPIC, 0),
                                          timeout=10)[1] < CLOSED_RECORDS:
            assert time.monotonic() < deadline, "the commit marker was never written"
            time.sleep(0.05)
    finally:
        watch.close()
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    p.produce(TOPIC, value=b"rolls the segment", partition=0, timestamp=t0 + 2 * SEGMENT_MS)
    assert p.flush(30) == 0


def make_topic(bootstrap: str) -> None:
    ok("kafka-topics", "--bootstrap-server", bootstrap, "--create", "--topic", TOPIC,
       "--partitions", "1", "--replication-factor", "1", "--config", f"segment.ms={SEGMENT_MS}",
       "--config", "index.interval.bytes=512")


def segments(partition_dir: Path, within_s: float = 30.0) -> list[Path]:
    """The partition's .log files once the roll has happened (two segments)."""
    deadline = time.monotonic() + within_s
    while True:
        logs = sorted(partition_dir.glob("*.log"))
        if len(logs) >= 2 or time.monotonic() > deadline:
            assert len(logs) >= 2, f"no roll in {partition_dir}: {logs}"
            return logs
        time.sleep(0.2)


@pytest.fixture(scope="module")
def skiff_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A node of this module's own: its files are read while it runs."""
    node = SkiffNode(tmp_path_factory.mktemp("dump-log-skiff"))
    node.start()
    try:
        node.wait_ready(timeout=READY_S)
        make_topic(node.bootstrap)
        produce_mixed(node.bootstrap)
        yield node.data_dir
    finally:
        node.close()


@pytest.fixture(scope="module")
def kafka_dir(kafka_ref: KafkaNode) -> Iterator[Path]:
    make_topic(kafka_ref.bootstrap)
    produce_mixed(kafka_ref.bootstrap)
    yield kafka_ref.data_dir / "data"


def parse_dump(stdout: str) -> tuple[list[tuple[int, ...]], list[int], list[str]]:
    """(batches (base, last, count, txn, control, codec, valid), record offsets, codecs)."""
    batches, records, codecs = [], [], []
    for line in stdout.splitlines():
        if m := BATCH.match(line):
            batches.append((int(m[1]), int(m[2]), int(m[3]), m[4] == "true", m[5] == "true",
                            m[8] == "true"))
            codecs.append(m[6])
        elif m := RECORD.match(line):
            records.append(int(m[1]))
    return batches, records, codecs


def skiff_tool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "broker.cli.main", "tools", "dump-log", *args],
                          capture_output=True, text=True, timeout=120, cwd=REPO_ROOT)


# ---- Kafka's kafka-dump-log on Skiff's files ----------------------------------------------

def test_kafka_reads_skiffs_segments(skiff_dir: Path) -> None:
    closed, active = segments(skiff_dir / "logs" / f"{TOPIC}-0")[:2]
    out = ok("kafka-dump-log", "--deep-iteration", "--print-data-log", "--files", str(closed))
    text = out.stdout + out.stderr
    assert "Exception" not in text and "isvalid: false" not in text, text[-3000:]
    batches, records, codecs = parse_dump(out.stdout)
    assert records == list(range(CLOSED_RECORDS)), records
    assert sum(b[2] for b in batches) == CLOSED_RECORDS
    assert set(codecs) == set(CODECS)
    assert all(b[5] for b in batches)
    assert out.stdout.count("endTxnMarker: ABORT") == 1
    assert out.stdout.count("endTxnMarker: COMMIT") == 1
    assert out.stdout.count("headerKeys: [codec]") == len(CODECS) * PER_CODEC
    assert f"payload: zstd value {PER_CODEC - 1} " in out.stdout  # decompressed by Kafka
    assert f"Log starting offset: {int(active.stem)}" in ok(
        "kafka-dump-log", "--files", str(active)).stdout
    assert int(active.stem) == CLOSED_RECORDS


def test_kafka_reads_skiffs_indexes(skiff_dir: Path) -> None:
    part = skiff_dir / "logs" / f"{TOPIC}-0"
    closed = segments(part)[0]
    files = [closed.with_suffix(s) for s in (".index", ".timeindex", ".txnindex")]
    for f in files:
        assert f.exists(), f
    out = ok("kafka-dump-log", "--files", ",".join(str(f) for f in files))
    text = out.stdout + out.stderr
    assert "Exception" not in text and "ismatch" not in text, text[-3000:]
    index = [int(m[1]) for m in re.finditer(r"^offset: (\d+) position: (\d+)$", out.stdout, re.M)]
    times = [int(m[2]) for m in re.finditer(r"^timestamp: (\d+) offset: (\d+)$", out.stdout,
                                            re.M)]
    assert len(index) >= 3 and index == sorted(index) and index[-1] < CLOSED_RECORDS
    assert len(times) >= 1 and times == sorted(times)
    # the same entries as Skiff's own reader of them
    mine = skiff_tool("--verify", *(str(f) for f in files))
    assert mine.returncode == 0, mine.stdout[-2000:]
    assert index == [int(m[1]) for m in re.finditer(r"^offset: (\d+) position", mine.stdout,
                                                     re.M)]
    # one aborted transaction: its first record and its ABORT marker; after the first
    # 200 records (the codecs), so offsets 200-205
    abort_first = len(CODECS) * PER_CODEC
    assert re.search(rf"producerId: \d+ firstOffset: {abort_first} lastOffset: "
                     rf"{abort_first + TXN_RECORDS}", out.stdout), out.stdout[-1500:]


def test_kafka_reads_skiffs_metadata_log(skiff_dir: Path) -> None:
    meta = sorted((skiff_dir / "metadata" / "__cluster_metadata-0").glob("*.log"))[0]
    out = ok("kafka-dump-log", "--cluster-metadata-decoder", "--files", str(meta))
    batches, records, _ = parse_dump(out.stdout)
    assert batches and all(b[5] for b in batches), "every CRC read as valid by Kafka's tool"
    assert records == list(range(records[0], records[0] + len(records)))
    assert len(records) == sum(b[2] for b in batches)
    # Kafka's own control records (Raft's, written in Kafka's schemas) are decoded
    assert "LeaderChange: {" in out.stdout
    # Skiff's metadata records are protobuf: Kafka's decoder names the first byte it took for
    # its frame version and skips the record (a known design difference, not corruption)
    skipped = re.findall(r"payload: Error at (\d+), skipping. Could not deserialize metadata "
                         r"record due to unknown frame version (\d+)\(only frame version 1 is "
                         r"supported\)", out.stdout)
    data_records = sum(b[2] for b in batches if not b[4])
    assert len(skipped) == data_records > 0
    # Skiff's reader agrees on every batch
    mine = skiff_tool("--verify", str(meta))
    assert mine.returncode == 0, mine.stdout[-2000:]
    # the node runs on and appends: Kafka's read is a prefix of Skiff's later one
    assert [b[:3] for b in parse_dump(mine.stdout)[0]][:len(batches)] == \
        [b[:3] for b in batches]


# ---- skiff tools dump-log --verify on the reference's files -------------------------------

def test_skiff_reads_kafkas_closed_segment(kafka_dir: Path) -> None:
    closed = segments(kafka_dir / f"{TOPIC}-0")[0]
    files = [closed] + [closed.with_suffix(s) for s in (".index", ".timeindex", ".txnindex")]
    proc = skiff_tool("--verify", "--print-data", *(str(f) for f in files))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:] + \
        str(sorted(p.name for p in closed.parent.iterdir()))
    for f in files:
        assert f"Verification passed for {f}" in proc.stdout, f
    batches, records, codecs = parse_dump(proc.stdout)
    assert set(codecs) == set(CODECS)
    assert sum(b[2] for b in batches) == CLOSED_RECORDS
    assert records == list(range(CLOSED_RECORDS))
    assert "endTxnMarker: ABORT" in proc.stdout and "endTxnMarker: COMMIT" in proc.stdout
    # Kafka's reader and Skiff's print the same batches of Kafka's file
    ref = ok("kafka-dump-log", "--files", str(closed))
    assert [b for b in parse_dump(ref.stdout)[0]] == batches


def test_skiff_reads_kafkas_active_segment(kafka_dir: Path) -> None:
    """Kafka preallocates the active segment's indexes (10 MiB of zeros after the entries)."""
    active = segments(kafka_dir / f"{TOPIC}-0")[-1]
    files = [active] + [active.with_suffix(s) for s in (".index", ".timeindex")]
    assert active.with_suffix(".index").stat().st_size > 1024 * 1024
    proc = skiff_tool("--verify", *(str(f) for f in files))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    batches, _, _ = parse_dump(proc.stdout)
    assert batches and batches[0][0] == CLOSED_RECORDS
