"""Follower truncation by DivergingEpoch, over random histories: a follower whose log holds
batches from epochs the new leader never had (or more of an old epoch than the leader kept)
truncates exactly to the end of the shared prefix, never below it, then catches up."""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from broker.log import LogConfig, LogManager, PartitionLog
from broker.replication import ReplicaManager
from broker.replication.fetcher import truncation_offset
from broker.replication.replica_manager import FetchPartitionRequest
from broker.testing.inprocess_cluster import batch


def now_ms() -> int:
    return int(time.time() * 1000)


Log = tuple[list[tuple[int, bytes | None]], list[tuple[int, int]], list[int]]


def contents(plog: PartitionLog) -> Log:
    """Records (offset, value), the epoch cache, and every batch's leader epoch. (The
    leader's cache also names its current epoch from the log end, before any batch of it
    exists; a follower learns an epoch from its batches, so that entry is left out.)"""
    records = [(r.offset, r.value) for r in plog.read_records(0)]
    epochs = [h.partition_leader_epoch for seg in plog.segments for _, h in seg.iter_headers(0)]
    cache = [(e, s) for e, s in plog.epoch_cache.entries() if s < plog.log_end_offset]
    return records, cache, epochs


def history(steps: list[int], start_epoch: int, cap: int | None = None) -> list[int]:
    out, epoch = [], start_epoch
    for inc in steps:
        epoch += inc
        if cap is not None:
            epoch = min(epoch, cap)
        out.append(epoch)
    return out


async def reconcile(tmp: Path, common: list[int], follower_extra: list[int],
                    leader_extra: list[int], leader_epoch: int) -> tuple[list[int], Log, Log]:
    managers = []
    ts = now_ms()
    for node in (1, 2):
        logs = LogManager([tmp / f"n{node}"], LogConfig(), now_ms)
        logs.load()
        plog = logs.get_or_create("t", 0, LogConfig())
        for i, epoch in enumerate(common):
            plog.append_as_leader(batch(b"shared-%d" % i, b"x", ts=ts), epoch, ts)
        for i, epoch in enumerate(follower_extra if node == 2 else leader_extra):
            plog.append_as_leader(batch(b"own-%d-%d" % (node, i), ts=ts), epoch, ts)
        rm = ReplicaManager(node, logs, now_ms)
        rm.apply_partition(topic="t", topic_id=None, index=0, leader=1, leader_epoch=leader_epoch,
                           partition_epoch=0, replicas=(1, 2), isr=(1, 2),
                           min_insync_replicas=1, log_config=LogConfig())
        managers.append((logs, rm))
    (_, leader), (_, follower) = managers
    lp, fp = leader.get("t", 0), follower.get("t", 0)
    assert lp is not None and fp is not None
    ends = []
    try:
        for _ in range(100):
            req = FetchPartitionRequest(
                topic="t", partition=0, fetch_offset=fp.log.log_end_offset,
                partition_max_bytes=300, current_leader_epoch=leader_epoch,
                last_fetched_epoch=fp.log.latest_epoch)
            [res] = await leader.fetch([req], replica_id=2, max_wait_ms=0, min_bytes=1,
                                       max_bytes=300)
            assert res.error_code is ErrorCode.none, res
            if res.diverging_epoch is not None:
                target = truncation_offset(fp, *res.diverging_epoch)
                assert target is not None
                fp.truncate_to(target)
                ends.append(fp.log.log_end_offset)
            elif res.size:
                fp.append_as_follower(res.records.read_bytes())
            else:
                break
        return ends, contents(lp.log), contents(fp.log)
    finally:
        for logs, _ in managers:
            logs.shutdown()


@settings(max_examples=30, deadline=None)
@given(
    common_steps=st.lists(st.integers(0, 2), max_size=6),
    follower_steps=st.lists(st.integers(0, 1), max_size=5),
    leader_steps=st.lists(st.integers(0, 2), max_size=5),
)
def test_follower_truncates_to_the_shared_prefix(
    common_steps: list[int], follower_steps: list[int], leader_steps: list[int],
) -> None:
    common = history(common_steps, 0)
    last = common[-1] if common else 0
    # The follower continues the last shared epoch or one the leader never had (last + 1);
    # the leader's own batches are from later epochs still.
    follower_extra = history(follower_steps, last, cap=last + 1)
    leader_extra = history(leader_steps, last + 2)
    leader_epoch = (leader_extra[-1] if leader_extra else last + 1) + 1
    with tempfile.TemporaryDirectory() as tmp:
        ends, leader_bytes, follower_bytes = asyncio.run(
            reconcile(Path(tmp), common, follower_extra, leader_extra, leader_epoch))
    assert follower_bytes == leader_bytes
    shared = 2 * len(common)  # two records per shared batch
    if follower_extra:
        assert ends == [shared]  # one truncation, exactly to the shared prefix
    else:
        assert ends == []


def test_truncation_offset_cases(tmp_path: Path) -> None:
    logs = LogManager([tmp_path], LogConfig(), now_ms)
    logs.load()
    try:
        plog = logs.get_or_create("t", 0, LogConfig())
        ts = now_ms()
        for epoch in (1, 1, 3, 3, 5):  # epochs 1@0, 3@2, 5@4; log end 5
            plog.append_as_leader(batch(b"v", ts=ts), epoch, ts)
        rm = ReplicaManager(2, logs, now_ms)
        rm.apply_partition(topic="t", topic_id=None, index=0, leader=1, leader_epoch=6,
                           partition_epoch=0, replicas=(1, 2), isr=(1, 2),
                           min_insync_replicas=1, log_config=LogConfig())
        part = rm.get("t", 0)
        assert part is not None
        assert truncation_offset(part, 3, -1) is None     # no offset: never guess
        assert truncation_offset(part, -1, 2) == 2        # leader without epochs
        assert truncation_offset(part, 3, 3) == 3         # shared epoch: the smaller end
        assert truncation_offset(part, 3, 9) == 4         # ... which may be this log's
        assert truncation_offset(part, 4, 4) == 4         # epoch 4 unknown here: end of 3
        assert truncation_offset(part, 2, 1) == 2         # epoch 2 unknown: end of 1, ask again
        assert truncation_offset(part, 0, 0) == 0         # below the first epoch: its start
    finally:
        logs.shutdown()
