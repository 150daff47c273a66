"""Bad input against a live server process: random and mutated frames, oversized frames.

Each bad connection must be closed by the server (this test half-closes its side so that a
frame waiting for more bytes ends too), the process must stay up, and a second client on its
own long-lived connection must keep getting answers. A frame announcing 2 GiB is refused from
its size alone: the server's peak RSS does not move while the client pushes data behind it,
while a legitimate 60 MiB frame visibly does (so the measurement can see an allocation).
"""

from __future__ import annotations

import contextlib
import io
import socket
import struct
import time
from collections.abc import Iterator
from datetime import timedelta

import psutil
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.serial import entity_writer
from kio.static.primitive import Records, i16, i32, i32Timedelta

from broker.testing.wire import api_versions_request, decode_response, encode_request, recv_frame
from tests.support.node import SkiffNode

pytestmark = pytest.mark.timeout(120)


class DebugNode(SkiffNode):
    """The real `skiff dev` node, logging at debug so every closed connection is visible."""

    def command(self) -> list[str]:
        return [*super().command(), "--override", "log.level=DEBUG"]

    def alive(self) -> bool:
        return self.running

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DebugNode]:
    s = DebugNode(tmp_path_factory.mktemp("node"))
    s.start()
    try:
        s.wait_ready()
        yield s
        assert s.alive(), "the node process died"
    finally:
        s.close()
    log = s.log_text()
    # Bad input is handled, never an unexpected exception inside the server.
    assert "Traceback" not in log, log[-3000:]
    assert "bad request, closing connection" in log


class Watcher:
    """A well-behaved client on its own connection for the whole module."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.corr = 1000

    def check(self) -> None:
        self.corr += 1
        self.sock.sendall(encode_request(api_versions_request(3), self.corr))
        corr, resp = decode_response(18, 3, recv_frame(self.sock))
        assert corr == self.corr and resp.error_code == 0


@pytest.fixture(scope="module")
def watcher(server: DebugNode) -> Iterator[Watcher]:
    w = Watcher(server.port)
    yield w
    w.sock.close()


def exchange(port: int, data: bytes, wait_s: float = 10) -> bytes:
    """Send `data`, half-close, read until the server closes; fail if it never does."""
    with socket.create_connection(("127.0.0.1", port), timeout=wait_s) as sock:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
        received = bytearray()
        deadline = time.monotonic() + wait_s
        while True:
            assert time.monotonic() < deadline, "server kept the connection open"
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                break
            except TimeoutError:
                pytest.fail("server kept the connection open")
            if not chunk:
                break
            received += chunk
        return bytes(received)


def frames_in(data: bytes) -> list[bytes]:
    """The complete response frames in `data` (every response must be well framed)."""
    out, pos = [], 0
    while pos + 4 <= len(data):
        (size,) = struct.unpack_from(">i", data, pos)
        assert size >= 4
        if pos + 4 + size > len(data):
            break
        out.append(data[pos + 4 : pos + 4 + size])
        pos += 4 + size
    assert pos == len(data), "a response frame was cut short"
    return out


def _produce_v9() -> bytes:
    req = ProduceRequest(
        transactional_id=None, acks=i16(-1), timeout=i32Timedelta.parse(timedelta(seconds=1)),
        topic_data=(TopicProduceData(name="t", partition_data=(
            PartitionProduceData(index=i32(0), records=Records(b"\x00" * 70)),)),))
    return encode_request(req, 2)


def _produce_v1() -> bytes:
    buf = io.BytesIO()
    from kio.schema.produce.v3.request import PartitionProduceData as PD3
    from kio.schema.produce.v3.request import ProduceRequest as P3
    from kio.schema.produce.v3.request import TopicProduceData as TD3

    entity_writer(P3)(buf, P3(transactional_id=None, acks=i16(1),
                              timeout=i32Timedelta.parse(timedelta(seconds=1)),
                              topic_data=(TD3(name="t", partition_data=(
                                  PD3(index=i32(0), records=Records(b"abc")),)),)))
    body = buf.getvalue()[2:]
    header = struct.pack(">hhih", 0, 1, 2, 1) + b"c"
    return struct.pack(">i", len(header) + len(body)) + header + body


BASE_FRAMES = [
    *(encode_request(api_versions_request(v), 2) for v in range(5)),
    encode_request(MetadataRequest(topics=None, allow_auto_topic_creation=True,
                                   include_topic_authorized_operations=False), 2),
    _produce_v9(),
    _produce_v1(),
]
GOOD = encode_request(api_versions_request(2), 1)


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    frame = bytearray(draw(st.sampled_from(BASE_FRAMES)))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "set", "truncate", "insert", "size"]))
        if kind == "flip" and frame:
            i = draw(st.integers(0, len(frame) - 1))
            frame[i] ^= 1 << draw(st.integers(0, 7))
        elif kind == "set" and frame:
            i = draw(st.integers(0, len(frame) - 1))
            frame[i] = draw(st.sampled_from([0x00, 0x7F, 0x80, 0xFF]))
        elif kind == "truncate" and frame:
            del frame[draw(st.integers(0, len(frame) - 1)):]
        elif kind == "insert":
            i = draw(st.integers(0, len(frame)))
            frame[i:i] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "size" and len(frame) >= 4:
            frame[0:4] = struct.pack(">i", draw(st.sampled_from(
                [-1, 0, 3, 8, len(frame) - 5, len(frame) + 10, 2**31 - 1, 104857600])))
    return bytes(frame)


@settings(max_examples=300, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.binary(max_size=600))
def test_random_bytes(server: DebugNode, watcher: Watcher, data: bytes) -> None:
    frames_in(exchange(server.port, data))
    assert server.alive()
    watcher.check()


@settings(max_examples=400, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(mutated())
def test_mutated_frames_after_a_good_one(server: DebugNode, watcher: Watcher,
                                         bad: bytes) -> None:
    responses = frames_in(exchange(server.port, GOOD + bad))
    # The good request that came first is always answered, first.
    assert responses, "the good request before the bad one was not answered"
    assert decode_response(18, 2, responses[0])[0] == 1
    assert server.alive()
    watcher.check()


def _peak_rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def _reset_peak_rss(pid: int) -> int:
    """Make VmHWM start again from the current RSS (Linux: clear_refs 5); returns it."""
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")
    return _peak_rss(pid)


def _push_behind_header(port: int, size_field: bytes, payload_bytes: int) -> bool:
    """Announce a frame and push data behind it; True if the server closed on us."""
    chunk = b"\x00" * (1 << 20)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        try:
            sock.sendall(size_field + struct.pack(">hhih", 18, 0, 1, -1))
            for _ in range(payload_bytes // len(chunk)):
                sock.sendall(chunk)
        except (BrokenPipeError, ConnectionResetError):
            return True
        sock.settimeout(5)
        try:
            return sock.recv(1) == b""
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False


def test_2gib_frame_is_refused_without_allocating(server: DebugNode,
                                                  watcher: Watcher) -> None:
    # every process of the broker (the suite runs `skiff dev` nodes of two workers; a
    # connection is served by whichever the node hands it to)
    procs = [psutil.Process(server.pid), *psutil.Process(server.pid).children()]
    peak_before = {p.pid: _reset_peak_rss(p.pid) for p in procs}
    rss_before = {p.pid: p.memory_info().rss for p in procs}
    for size_field in (struct.pack(">i", 2**31 - 1), struct.pack(">I", 2**31),
                       struct.pack(">i", 104857601)):
        assert _push_behind_header(server.port, size_field, 48 << 20)
    for p in procs:
        rss_after, peak_after = p.memory_info().rss, _peak_rss(p.pid)
        assert peak_after - peak_before[p.pid] < 16 << 20, (p.pid, peak_before, peak_after)
        assert rss_after - rss_before[p.pid] < 16 << 20, (p.pid, rss_before, rss_after)
    watcher.check()

    # Control: a 60 MiB frame under the cap is read whole, and the peak of the process
    # that read it shows it.
    peak_before = {p.pid: _reset_peak_rss(p.pid) for p in procs}
    big = 60 << 20
    header = struct.pack(">hhih", 18, 0, 7, -1)
    with socket.create_connection(("127.0.0.1", server.port), timeout=20) as sock:
        sock.sendall(struct.pack(">i", big) + header + b"\x00" * (big - len(header)))
        corr, resp = decode_response(18, 0, recv_frame(sock))
        assert corr == 7 and resp.error_code == 0
    assert max(_peak_rss(p.pid) - peak_before[p.pid] for p in procs) > 50 << 20
    assert server.alive()
    watcher.check()
