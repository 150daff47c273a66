"""The node's socket directory for its workers: named after the node's PID, and those of
nodes that ended without removing theirs (kill -9) are removed by the next node."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from broker.node.workers import remove_stale_socket_directories, socket_directory


def _ended_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_a_new_directory_is_private_and_named_after_this_process(tmp_path: Path) -> None:
    directory = Path(socket_directory(str(tmp_path)))
    assert directory.parent == tmp_path
    assert directory.name.startswith(f"skiff-workers-{os.getpid()}-")
    assert directory.stat().st_mode & 0o777 == 0o700


def test_directories_of_ended_nodes_are_removed_and_running_ones_kept(tmp_path: Path) -> None:
    stale = tmp_path / f"skiff-workers-{_ended_pid()}-abc"
    stale.mkdir()
    (stale / "w1.sock").write_bytes(b"")
    running = tmp_path / f"skiff-workers-{os.getpid()}-def"
    running.mkdir()
    unnamed = tmp_path / "skiff-workers-x1ab2"  # the old naming, without a PID: not ours to judge
    unnamed.mkdir()
    other = tmp_path / "unrelated-1-x"
    other.mkdir()
    link = tmp_path / f"skiff-workers-{_ended_pid()}-lnk"
    link.symlink_to(other)

    assert remove_stale_socket_directories(str(tmp_path)) == [str(stale)]
    assert not stale.exists()
    assert running.is_dir() and unnamed.is_dir() and other.is_dir() and link.is_symlink()


def test_making_a_directory_sweeps_first(tmp_path: Path) -> None:
    stale = tmp_path / f"skiff-workers-{_ended_pid()}-abc"
    stale.mkdir()
    fresh = Path(socket_directory(str(tmp_path)))
    assert not stale.exists() and fresh.is_dir()


def test_a_directory_whose_node_still_accepts_is_kept(tmp_path: Path) -> None:
    """A node in another PID namespace sharing /tmp: its PID is not seen here, but its
    socket still accepts."""
    served = tmp_path / f"skiff-workers-{_ended_pid()}-srv"
    served.mkdir()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(served / "w0.sock"))
        server.listen()
        assert remove_stale_socket_directories(str(tmp_path)) == []
    assert served.is_dir()
    assert remove_stale_socket_directories(str(tmp_path)) == [str(served)]  # closed now
