"""Drop-behind (broker/log/drop_behind.py): which ranges a log asks the kernel to forget,
and that the pages really leave the page cache, on the leader's and the follower's path."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from loghelpers import FakeClock

from broker.log import LogConfig, PartitionLog, TopicPartition
from broker.log.drop_behind import DROP_STEP_BYTES, DROPPER, next_drop
from broker.protocol.records import Record, build_batch

MIB = 1024 * 1024
STEP = DROP_STEP_BYTES


def test_nothing_until_the_window_end_has_moved_a_step() -> None:
    window = 64 * MIB
    assert next_drop(window + STEP - 1, 0, window) is None
    assert next_drop(window + STEP, 0, window) == (0, STEP)


def test_each_range_reaches_one_step_behind_the_last() -> None:
    # pages still dirty at the previous request (written back since) are dropped now
    window = 8 * MIB
    assert next_drop(window + 2 * STEP + 5, STEP, window) == (0, 2 * STEP + 5)
    assert next_drop(window + 5 * STEP, 3 * STEP, window) == (2 * STEP, 5 * STEP)
    assert next_drop(window + 5 * STEP, 4 * STEP + 1, window) is None


def test_a_negative_window_leaves_the_cache_to_the_kernel() -> None:
    assert next_drop(1 << 40, 0, -1) is None


def _resident(fd: int, position: int) -> bool:
    """Whether the page at `position` is in the page cache: a RWF_NOWAIT read of a page
    that is not fails with EAGAIN instead of going to the disk."""
    try:
        os.preadv(fd, [bytearray(1)], position, os.RWF_NOWAIT)
    except BlockingIOError:
        return False
    return True


def _batches(first_offset: int, total_bytes: int) -> tuple[bytes, int]:
    """Batches of about `total_bytes` from `first_offset` on, and the next offset."""
    out = []
    offset = first_offset
    size = 0
    while size < total_bytes:
        b = build_batch([Record(timestamp=FakeClock().now, key=None, value=os.urandom(1000))] * 256,
                        base_offset=offset, partition_leader_epoch=1)
        out.append(b)
        size += len(b)
        offset += 256
    return b"".join(out), offset


def _this_filesystem_drops(directory: Path) -> bool:
    path = directory / "probe"
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    try:
        os.write(fd, b"x" * 8192)
        os.fdatasync(fd)
        os.posix_fadvise(fd, 0, 8192, os.POSIX_FADV_DONTNEED)
        return not _resident(fd, 0)
    finally:
        os.close(fd)
        path.unlink()


@pytest.mark.parametrize("as_leader", [False, True])
@pytest.mark.parametrize("window", [512 * 1024, -1])
def test_a_segment_leaves_the_page_cache_behind_its_window(
    tmp_path: Path, window: int, as_leader: bool,
) -> None:
    if not _this_filesystem_drops(tmp_path):
        pytest.skip("this filesystem keeps pages after POSIX_FADV_DONTNEED (tmpfs?)")
    clock = FakeClock()
    plog = PartitionLog(tmp_path / "t-0", TopicPartition("t", 0),
                        LogConfig(drop_behind_bytes=window), clock=clock)

    def append(data: bytes) -> None:
        if as_leader:
            plog.append_as_leader(data, leader_epoch=1, now_ms=clock.now)
        else:
            plog.append_as_follower(data)

    try:
        data, next_offset = _batches(0, STEP + max(window, 0) - 64 * 1024)
        append(data)
        seg = plog.segments[-1]
        os.fdatasync(seg.fd)  # clean pages: the next request drops them at once
        more, _ = _batches(next_offset, 128 * 1024)
        append(more)
        assert DROPPER.join(), "the drop-behind thread did not reach the request in 30 s"
        assert _resident(seg.fd, 0) is (window < 0)
        assert _resident(seg.fd, seg.size - 1)  # within the window
    finally:
        plog.close()
