"""The native sender threads (broker/protocol/_sendpool.c) on real sockets and files: parts
in order, file slices from their offsets, a full socket given back with how far the job got,
errors reported by errno, descriptors the caller closes meanwhile, and the pool's shutdown."""

from __future__ import annotations

import errno
import os
import select
import socket
import tempfile
import time
from collections.abc import Iterator

import pytest

from broker.protocol.frames import native_senders_missing

missing = native_senders_missing()
if missing is not None and os.environ.get("EXPECT_COMPILED_MODULES") != "1":
    pytest.skip(f"no native sender threads: {missing}", allow_module_level=True)

from broker.protocol._sendpool import Pool  # noqa: E402


def wait_ended(pool: Pool, count: int = 1, timeout: float = 10.0) -> list[tuple[int, int, int]]:
    ended: list[tuple[int, int, int]] = []
    deadline = time.monotonic() + timeout
    while len(ended) < count:
        left = deadline - time.monotonic()
        assert left > 0, f"only {len(ended)} of {count} jobs ended"
        select.select([pool.fileno()], [], [], left)
        ended += pool.collect()
    return ended


def read_exactly(sock: socket.socket, size: int) -> bytes:
    out = bytearray()
    sock.settimeout(10)
    while len(out) < size:
        piece = sock.recv(min(1 << 20, size - len(out)))
        if not piece:
            break
        out += piece
    return bytes(out)


@pytest.fixture
def pool() -> Iterator[Pool]:
    p = Pool(2)
    yield p
    p.close()


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    server = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(server.getsockname())
    sender, _ = server.accept()
    server.close()
    sender.setblocking(False)  # as an event loop's socket is
    yield sender, client
    sender.close()
    client.close()


def test_bytes_and_file_slices_go_out_in_order(pool: Pool, pair: tuple[socket.socket,
                                                                         socket.socket]) -> None:
    sender, client = pair
    content = os.urandom(3 * 1024 * 1024)
    with tempfile.TemporaryFile() as f:
        f.write(content)
        f.flush()
        parts = [b"head", bytearray(b"-ba-"), (f.fileno(), 10, 1000), memoryview(b"mv"),
                 (f.fileno(), 100_000, 2 * 1024 * 1024), b"", (f.fileno(), 0, 0), b"tail"]
        expected = (b"head-ba-" + content[10:1010] + b"mv"
                    + content[100_000:100_000 + 2 * 1024 * 1024] + b"tail")
        pool.submit(7, sender.fileno(), parts)
        got = read_exactly(client, len(expected))
        assert wait_ended(pool) == [(7, 0, len(expected))]
    assert got == expected


def test_many_jobs_on_many_sockets_each_whole(pool: Pool) -> None:
    content = os.urandom(1 << 20)
    pairs = []
    server = socket.create_server(("127.0.0.1", 0))
    for _ in range(4):
        client = socket.create_connection(server.getsockname())
        sender, _ = server.accept()
        sender.setblocking(False)
        pairs.append((sender, client))
    server.close()
    with tempfile.TemporaryFile() as f:
        f.write(content)
        f.flush()
        for token, (sender, _) in enumerate(pairs):
            pool.submit(token, sender.fileno(), [token.to_bytes(4, "big"),
                                                  (f.fileno(), token, len(content) - token)])
        for token, (_, client) in enumerate(pairs):
            assert read_exactly(client, 4 + len(content) - token) \
                == token.to_bytes(4, "big") + content[token:]
        ended = wait_ended(pool, 4)
    assert sorted(ended) == [(t, 0, 4 + len(content) - t) for t in range(4)]
    for sender, client in pairs:
        sender.close()
        client.close()


def test_a_socket_that_stays_full_gives_the_job_back_with_what_was_sent(
        pool: Pool, pair: tuple[socket.socket, socket.socket]) -> None:
    sender, client = pair
    sender.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    content = os.urandom(8 * 1024 * 1024)
    with tempfile.TemporaryFile() as f:
        f.write(content)
        f.flush()
        pool.submit(1, sender.fileno(), [b"x" * 10, (f.fileno(), 0, len(content))])
        [(token, err, sent)] = wait_ended(pool)  # nobody reads: the socket stays full
        assert (token, err) == (1, errno.EAGAIN)
        assert 10 < sent < 10 + len(content)
        # the rest, submitted again from where it stopped, completes the stream
        got = bytearray()
        pool.submit(2, sender.fileno(), [(f.fileno(), sent - 10, len(content) - (sent - 10))])
        got += read_exactly(client, 10 + len(content))
        assert wait_ended(pool) == [(2, 0, 10 + len(content) - sent)]
    assert bytes(got) == b"x" * 10 + content


def test_a_short_file_ends_the_job_with_enodata(
        pool: Pool, pair: tuple[socket.socket, socket.socket]) -> None:
    sender, client = pair
    with tempfile.TemporaryFile() as f:
        f.write(b"abc")
        f.flush()
        pool.submit(3, sender.fileno(), [(f.fileno(), 0, 10)])
        assert wait_ended(pool) == [(3, errno.ENODATA, 3)]
    assert read_exactly(client, 3) == b"abc"


def test_a_closed_peer_is_an_error_not_a_signal(
        pool: Pool, pair: tuple[socket.socket, socket.socket]) -> None:
    sender, client = pair
    client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    client.close()  # a reset
    time.sleep(0.05)
    with tempfile.TemporaryFile() as f:
        f.write(os.urandom(1 << 20))
        f.flush()
        pool.submit(4, sender.fileno(), [b"x", (f.fileno(), 0, 1 << 20)])
        [(token, err, _)] = wait_ended(pool)
    assert token == 4 and err in (errno.ECONNRESET, errno.EPIPE)


def test_descriptors_closed_by_the_caller_after_submit_do_not_matter(
        pool: Pool, pair: tuple[socket.socket, socket.socket]) -> None:
    """The pool sends on its own duplicates: a segment closed (or a connection's descriptor
    closed) while a job is queued cannot send another file's bytes."""
    sender, client = pair
    content = os.urandom(1 << 20)
    with tempfile.TemporaryFile() as f:
        f.write(content)
        f.flush()
        fd = os.dup(f.fileno())
        sock_fd = os.dup(sender.fileno())
        pool.submit(5, sock_fd, [(fd, 0, len(content))])
        os.close(fd)
        os.close(sock_fd)
        assert read_exactly(client, len(content)) == content
        assert wait_ended(pool) == [(5, 0, len(content))]


def test_bad_submissions_are_refused_and_leak_nothing(
        pool: Pool, pair: tuple[socket.socket, socket.socket]) -> None:
    sender, _ = pair
    before = len(os.listdir("/proc/self/fd"))
    with tempfile.TemporaryFile() as f:
        for parts, error in (
                ([(f.fileno(), -1, 5)], ValueError),
                ([(f.fileno(), 0)], TypeError),
                ([(f.fileno(), 0, 5), "text"], TypeError),
                ([(10_000_000, 0, 5)], OSError),
                (5, TypeError),
                ([b"x"] * 5000, ValueError)):
            with pytest.raises(error):
                pool.submit(9, sender.fileno(), parts)  # type: ignore[arg-type]
        with pytest.raises(OSError):
            pool.submit(9, 10_000_000, [b"x"])
    assert pool.collect() == []
    assert len(os.listdir("/proc/self/fd")) <= before
    with pytest.raises(ValueError, match="threads must be 1 to 64"):
        Pool(0)


def test_close_ends_queued_jobs_and_refuses_new_ones(
        pair: tuple[socket.socket, socket.socket]) -> None:
    sender, _ = pair
    p = Pool(1)
    p.close()
    with pytest.raises(ValueError, match="closed"):
        p.submit(1, sender.fileno(), [b"x"])
    p.close()  # twice is fine
