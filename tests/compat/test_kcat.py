"""kcat 1.7.1 (Debian; bundles librdkafka 2.0.2, older than confluent-kafka's).

kcat has no topic admin (create/delete/describe configs): those go through librdkafka's
AdminClient (broker/testing/admin.py); everything else is kcat as a user would run it.
Producer limits: one header set per invocation (-H), no explicit timestamps, messages split
on a delimiter (so values avoid the delimiter bytes), an empty key is sent as NULL.
"""

from __future__ import annotations

import json
import queue
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence

import pytest

from broker.testing import admin as adm
from tests.support.records import CODECS, Rec, assert_same_records, assign_expected_offsets
from tests.support.requires import tool_mark

pytestmark = [
    pytest.mark.timeout(120),
    tool_mark("kcat", "kcat is not installed (tests/run.sh installs it)"),
]
KCAT = shutil.which("kcat") or "kcat"
MSG_DELIM = b"\x1e"
KEY_DELIM = b"\x1f"
FORMAT = "%p,%o,%T,%K,%S|%k%s|%h\\n"
WAIT_S = 30


def kcat(args: Sequence[str], bootstrap: str, stdin: bytes | None = None,
         timeout: float = WAIT_S) -> bytes:
    out = subprocess.run([KCAT, "-b", bootstrap, "-m", "15", *args], input=stdin,
                         capture_output=True, timeout=timeout, check=False)
    assert out.returncode == 0, (
        f"kcat {' '.join(args)} exited {out.returncode}: {out.stderr.decode(errors='replace')}")
    return out.stdout


def kcat_records(tag: str, count: int, partition: int = 0) -> list[Rec]:
    """Records kcat can express: UTF-8/binary values without the delimiter bytes,
    NULL keys, NULL values (-Z), keys and values of varied size."""
    binary = bytes(b for b in range(256) if b not in (MSG_DELIM[0], KEY_DELIM[0]))
    out: list[Rec] = []
    for i in range(count):
        key: bytes | None = f"key-{tag}-{i:04d}".encode()
        value: bytes | None = f"value-{tag}-{i:04d}|".encode() * (1 + i % 5)
        kind = i % 6
        if kind == 1:
            key = None
        elif kind == 2:
            value = binary
        elif kind == 3:
            key = "ключ-🔑".encode() + str(i).encode()
            value = "значение-✓".encode() * 4
        elif kind == 4:
            value = f"{tag}-{i}-compressible-".encode() * 1000
        elif kind == 5:
            value = None
        out.append(Rec(key=key, value=value, partition=partition))
    return out


HEADERS: list[tuple[str, bytes | None]] = [
    ("codec", None), ("dup", b"first"), ("dup", b"second"), ("empty", b""), ("nullval", None)]


def headers_for(codec: str) -> list[tuple[str, bytes | None]]:
    return [(k, codec.encode() if k == "codec" else v) for k, v in HEADERS]


def produce(bootstrap: str, topic: str, recs: list[Rec], codec: str) -> None:
    body = MSG_DELIM.join((r.key or b"") + KEY_DELIM + (r.value or b"") for r in recs)
    hargs: list[str] = []
    for k, v in headers_for(codec):
        hargs += ["-H", k if v is None else f"{k}={v.decode()}"]
    partition = {r.partition for r in recs}
    assert len(partition) == 1
    kcat(["-P", "-t", topic, "-p", str(partition.pop()), "-D", "\\x1e", "-K", "\\x1f", "-Z",
          "-X", f"compression.codec={codec}", "-X", "acks=all", *hargs],
         bootstrap, stdin=body)
    for r in recs:
        r.headers = headers_for(codec)


def parse_headers(text: bytes) -> list[tuple[str, bytes | None]]:
    if not text:
        return []
    out: list[tuple[str, bytes | None]] = []
    for item in text.split(b","):
        k, _, v = item.partition(b"=")
        out.append((k.decode(), None if v == b"NULL" else v))
    return out


def parse(stdout: bytes) -> list[Rec]:
    """Parse FORMAT output by the printed key/value lengths, so any byte may appear."""
    recs: list[Rec] = []
    pos = 0
    while pos < len(stdout):
        bar = stdout.index(b"|", pos)
        p, o, ts, klen, vlen = (int(x) for x in stdout[pos:bar].split(b","))
        pos = bar + 1
        key = stdout[pos:pos + klen] if klen >= 0 else None
        pos += max(klen, 0)
        value = stdout[pos:pos + vlen] if vlen >= 0 else None
        pos += max(vlen, 0)
        assert stdout[pos:pos + 1] == b"|", f"format out of step at byte {pos}"
        nl = stdout.index(b"\n", pos)
        recs.append(Rec(key=key, value=value, headers=parse_headers(stdout[pos + 1:nl]),
                        timestamp_ms=ts, partition=p, offset=o))
        pos = nl + 1
    return recs


def consume(bootstrap: str, topic: str, partition: int, offset: str, count: int) -> list[Rec]:
    out = kcat(["-C", "-t", topic, "-p", str(partition), "-o", offset, "-c", str(count),
                "-f", FORMAT], bootstrap)
    return parse(out)


@pytest.fixture
def topic(bootstrap: str, topic_name: str) -> Iterator[str]:
    yield topic_name
    adm.try_delete_topic(bootstrap, topic_name)


def test_metadata_lists_broker_and_topic(bootstrap: str, topic: str) -> None:
    adm.create_topic(bootstrap, topic, 3)
    md = json.loads(kcat(["-L", "-J"], bootstrap))
    assert len(md["brokers"]) == 1
    (broker,) = md["brokers"]
    assert broker["name"] == bootstrap
    assert md["controllerid"] == broker["id"]
    (t,) = [t for t in md["topics"] if t["topic"] == topic]
    assert sorted(p["partition"] for p in t["partitions"]) == [0, 1, 2]
    for p in t["partitions"]:
        assert p["leader"] == broker["id"]
        assert p["replicas"] == [{"id": broker["id"]}] == p["isrs"]
    adm.delete_topic(bootstrap, topic)
    adm.wait_topic_absent(bootstrap, topic)
    md = json.loads(kcat(["-L", "-J"], bootstrap))
    assert topic not in [t["topic"] for t in md["topics"]]


def test_every_codec_then_consume_from_earliest(bootstrap: str, topic: str) -> None:
    adm.create_topic(bootstrap, topic, 2)
    expected: list[Rec] = []
    for n, codec in enumerate(CODECS):
        recs = kcat_records(codec, 18, partition=n % 2)
        produce(bootstrap, topic, recs, codec)
        expected += recs
    assign_expected_offsets(expected)
    got: list[Rec] = []
    for p in (0, 1):
        n = sum(1 for r in expected if r.partition == p)
        got += consume(bootstrap, topic, p, "beginning", n)
        # and nothing after them: -e exits at the end of the partition
        rest = kcat(["-C", "-t", topic, "-p", str(p), "-o", str(n), "-e", "-f", FORMAT],
                    bootstrap)
        assert rest == b"", f"records after the expected end of partition {p}: {rest[:200]!r}"
    assert_same_records(expected, got, check_timestamps=False)
    assert all(r.timestamp_ms > 1_600_000_000_000 for r in got), "CreateTime set by kcat"


def test_consume_from_latest(bootstrap: str, topic: str) -> None:
    adm.create_topic(bootstrap, topic, 1)
    old = kcat_records("old", 7)
    produce(bootstrap, topic, old, "gzip")

    new = kcat_records("new", 9)
    # -d fetch makes librdkafka log each Fetch with its offset: the reset to the end is done
    # once it fetches from offset 7, and only then do we produce.
    proc = subprocess.Popen(
        [KCAT, "-b", bootstrap, "-C", "-t", topic, "-p", "0", "-o", "end", "-c", str(len(new)),
         "-f", FORMAT, "-d", "fetch"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    lines: queue.Queue[bytes] = queue.Queue()
    stderr = proc.stderr
    assert stderr is not None

    def pump() -> None:
        for line in stderr:
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    fetch_at = re.compile(rb"Fetch topic .* \[0\] at offset (\d+)")
    seen: list[bytes] = []
    try:
        deadline = time.monotonic() + WAIT_S
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                tail = b"".join(seen[-20:]).decode(errors="replace")
                raise AssertionError(f"kcat never fetched from the end offset:\n{tail}")
            try:
                line = lines.get(timeout=min(left, 1.0))
            except queue.Empty:
                continue
            seen.append(line)
            m = fetch_at.search(line)
            if m is not None:
                assert int(m.group(1)) == len(old), line
                break
        produce(bootstrap, topic, new, "snappy")
        out, _ = proc.communicate(timeout=WAIT_S)
        assert proc.returncode == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assign_expected_offsets(new, {0: len(old)})
    assert_same_records(new, parse(out), check_timestamps=False)


def test_consume_from_timestamp(bootstrap: str, topic: str) -> None:
    adm.create_topic(bootstrap, topic, 1)
    groups = [kcat_records(t, 6) for t in ("a", "b", "c")]
    for g, codec in zip(groups, ("lz4", "zstd", "none"), strict=True):
        produce(bootstrap, topic, g, codec)
        time.sleep(0.05)  # kcat cannot set timestamps: keep the groups' CreateTimes apart
    everything = [r for g in groups for r in g]
    assign_expected_offsets(everything)
    got = consume(bootstrap, topic, 0, "beginning", len(everything))
    assert_same_records(everything, got, check_timestamps=False)
    ts = [r.timestamp_ms for r in got]
    assert ts == sorted(ts)
    b0, c0 = ts[6], ts[12]
    assert b0 > ts[5] and c0 > ts[11]

    def query(t: int) -> int:
        out = kcat(["-Q", "-t", f"{topic}:0:{t}"], bootstrap).decode()
        m = re.search(r"\[0\] offset (-?\d+)", out)
        assert m is not None, out
        return int(m.group(1))

    assert query(ts[0]) == 0
    assert query(b0) == 6
    assert query(c0) == 12
    assert query(ts[-1] + 60_000) == -1, "no record that late"

    from_b = consume(bootstrap, topic, 0, f"s@{b0}", 12)
    assert_same_records(everything[6:], from_b, check_timestamps=False)
