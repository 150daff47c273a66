from __future__ import annotations

import uuid

import pytest

from broker.controller.pending import PendingWrites
from broker.metadata import MetadataImage
from broker.metadata import records as rec


def topic(n: int):
    return [rec.topic_record(f"t{n}", uuid.UUID(int=n + 10))]


def test_working_sees_appends_committed_follows_high_watermark():
    s = PendingWrites(MetadataImage.empty("c"))
    assert s.append(topic(1), 0, 1, "a") == []
    assert s.append(topic(2), 1, 1, "b") == []
    assert s.working.topic("t2") and s.committed.topic("t1") is None
    assert s.commit(1) == ["a"]
    assert s.committed.topic("t1") and s.committed.topic("t2") is None
    assert s.commit(1) == []
    assert s.commit(5) == ["b"]
    assert s.committed == s.working and s.committed.offset == 1 and s.waiting == 0


def test_waiter_without_records_waits_for_earlier_writes():
    s = PendingWrites(MetadataImage.empty("c"))
    assert s.append([], token="now") == ["now"]
    s.append(topic(1), 0, 1, "write")
    assert s.append([], token="validate") == []
    assert s.commit(1) == ["write", "validate"]


def test_resign_drops_uncommitted_and_returns_waiters():
    s = PendingWrites(MetadataImage.empty("c"))
    s.append(topic(1), 0, 1, "a")
    s.commit(1)
    s.append(topic(2), 1, 1, "b")
    s.append(topic(3), 2, 1, "c")
    assert s.resign() == ["b", "c"]
    assert s.working is s.committed and s.working.topic("t2") is None
    # as a follower, replay what the new leader committed
    s.replay(topic(4), 5, 2)
    assert s.committed.topic("t4") and s.committed.epoch == 2 and s.working is s.committed


def test_offsets_must_increase_and_replay_needs_no_pending():
    s = PendingWrites(MetadataImage.empty("c"))
    s.append(topic(1), 3, 1, "a")
    with pytest.raises(ValueError):
        s.append(topic(2), 3, 1, "b")
    with pytest.raises(RuntimeError):
        s.replay(topic(5), 9, 1)
