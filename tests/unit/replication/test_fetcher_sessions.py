"""Followers fetch in incremental fetch sessions (KIP-227) over real loopback sockets: after
one full fetch, each round names only what moved, the leader answers only what changed,
and a full session cache (max.incremental.fetch.session.cache.slots) leaves a follower on
full fetches without losing anything."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

from broker.replication.fetcher import FETCH, FetchConnection
from broker.testing.inprocess_cluster import FAST, Cluster, batch, eventually, run


class Recording:
    """A fetcher's connection that records the size of each Fetch request it writes."""

    def __init__(self, inner: FetchConnection, sizes: list[int]) -> None:
        self.inner = inner
        self.sizes = sizes

    async def request(self, api_key: int, version: int, request: Any, timeout_s: float) -> Any:
        if api_key == FETCH:
            self.sizes.append(len(request))
        return await self.inner.request(api_key, version, request, timeout_s)

    def start_request(self, api_key: int, version: int, request: Any,
                      timeout_s: float) -> asyncio.Future[Any]:
        if api_key == FETCH:
            self.sizes.append(len(request))
        return self.inner.start_request(api_key, version, request, timeout_s)  # type: ignore[attr-defined, no-any-return]

    async def close(self) -> None:
        await self.inner.close()


def record_fetches(cluster: Cluster, node_id: int) -> list[int]:
    sizes: list[int] = []
    manager = cluster.brokers[node_id].fetchers
    connect = manager.connect
    manager.connect = lambda host, port: Recording(connect(host, port), sizes)
    return sizes


def test_a_follower_over_2000_partitions_fetches_incrementally(tmp_path: Path) -> None:
    partitions = 2000

    async def main() -> None:
        # A lag time well above a 2,000-partition round on a loaded machine: the test is
        # about sessions, not ISR churn.
        c = Cluster(tmp_path, ids=(1, 2), settings=dataclasses.replace(
            FAST, lag_time_max_ms=30_000, fetch_wait_max_ms=200))
        sizes = record_fetches(c, 2)
        await c.start()
        try:
            await c.create_topic("t", [1, 2], partitions=partitions)
            leader, follower = c.brokers[1], c.brokers[2]
            await eventually(lambda: sum(
                len(f.partitions) for f in follower.fetchers.fetchers.values()) == partitions,
                timeout_s=90, what="every partition followed")
            # Each broker applies the metadata on its own: under load the leader may still be
            # opening its last partitions when the follower already follows them all.
            await eventually(lambda: all(leader.replicas.get("t", i) is not None
                                         for i in range(partitions)),
                             timeout_s=90, what="every partition led")
            fetcher = follower.fetchers.fetchers[1]
            # Let the session settle (each partition added while a fetch was held in the
            # leader's long poll abandoned that fetch: a full one again), then write to three
            # partitions.
            await eventually(lambda: fetcher.session.incremental_requests >= 3, timeout_s=30,
                             what="incremental fetches")
            full_before, leader_full_before = fetcher.session.full_requests, \
                leader.replicas.fetch_sessions.full
            settled = len(sizes)
            for i in (5, 999, 1999):
                written = await leader.replicas.append(
                    {("t", i): batch(b"x%d" % i)}, required_acks=-1, timeout_ms=10_000)
                assert not isinstance(written[("t", i)], Exception), written
            for i in (5, 999, 1999):
                lp, fp = leader.replicas.get("t", i), follower.replicas.get("t", i)
                assert lp is not None and fp is not None, (i, lp, fp)
                assert fp.log.read(0, 1 << 20, 1).read_bytes() == \
                    lp.log.read(0, 1 << 20, 1).read_bytes()
            incremental_before = fetcher.session.incremental_requests
            await eventually(lambda: fetcher.session.incremental_requests
                             >= incremental_before + 3, timeout_s=10, what="idle rounds")
            cache = leader.replicas.fetch_sessions
            # Every round since was incremental, on both sides.
            assert fetcher.session.full_requests == full_before
            assert cache.full == leader_full_before
            assert cache.incremental >= incremental_before
            assert cache.session_size(fetcher.session.session_id) == partitions
            # Full fetches abandoned in flight (no answer read) may each have opened a
            # session the follower never learned of; those age out as Kafka's do (stale
            # after MIN_EVICTION_MS, evicted first).
            assert len(cache) <= full_before
            # On the wire: every partition went out once (in one full fetch, or, when the
            # follower learned of them in parts, in a full one and incremental ones adding
            # the rest: seen under load), over 20 bytes each; an idle
            # incremental fetch is a few dozen bytes.
            sent, idle = sum(sizes[:settled]), min(sizes[settled:])
            assert sent > partitions * 20, sent
            assert idle < 100, idle
        finally:
            await c.stop()

    run(main, timeout_s=180)


def test_a_full_session_cache_leaves_a_follower_on_full_fetches(tmp_path: Path) -> None:
    async def main() -> None:
        c = Cluster(tmp_path, settings=dataclasses.replace(FAST, fetch_session_cache_slots=1))
        await c.start()
        try:
            await c.create_topic("t", [1, 2, 3], partitions=20)
            leader = c.brokers[1]
            for round_ in range(5):
                for i in range(20):
                    await leader.replicas.append(
                        {("t", i): batch(b"r%d-%d" % (round_, i))}, required_acks=-1,
                        timeout_ms=10_000)
            # Both followers hold every record, byte for byte.
            for b in (2, 3):
                for i in range(20):
                    fp, lp = c.brokers[b].replicas.get("t", i), leader.replicas.get("t", i)
                    await eventually(lambda fp=fp: fp.log.log_end_offset == 5,
                                     what=f"broker {b} t-{i}")
                    assert fp.log.read(0, 1 << 20, 5).read_bytes() == \
                        lp.log.read(0, 1 << 20, 5).read_bytes()
            cache = leader.replicas.fetch_sessions
            sessions = {b: c.brokers[b].fetchers.fetchers[1].session for b in (2, 3)}
            # One follower holds the only slot; the other (a follower's young session cannot
            # be evicted by another follower) goes on with full fetches, every one answered.
            assert len(cache) == 1
            with_session = [b for b, s in sessions.items() if s.session_id != 0]
            assert len(with_session) == 1
            without = sessions[({2, 3} - set(with_session)).pop()]
            # Fetches go on after the appends (long polls), so both followers reach five
            # requests of their kind; a follower that catches up several appends in one
            # fetch may have made fewer while the appends ran (seen: 2 under load).
            await eventually(lambda: without.full_requests >= 5, what="5 full fetches")
            await eventually(lambda: sessions[with_session[0]].incremental_requests >= 5,
                             what="5 incremental fetches")
            assert without.incremental_requests == 0
            assert cache.evictions == 0
        finally:
            await c.stop()

    run(main, timeout_s=60)


def test_idle_followers_in_a_session_stay_in_the_isr(tmp_path: Path) -> None:
    """Incremental fetches over partitions with nothing new are answered without reading
    (ReplicaManager.session_loud), and still count as the follower being caught up: with
    replica.lag.time.max.ms at 1 s, three seconds of idle rounds shrink no ISR. (At
    400 ms, one CI run under load saw every ISR shrink: a stall longer than the lag time
    shrinks any ISR, idle or not.)"""

    async def main() -> None:
        c = Cluster(tmp_path, settings=dataclasses.replace(FAST, lag_time_max_ms=1000))
        await c.start()
        try:
            await c.create_topic("t", [1, 2, 3], partitions=10)
            leader = c.brokers[1]
            for i in range(10):
                await leader.replicas.append({("t", i): batch(b"v")}, required_acks=-1,
                                             timeout_ms=10_000)
            await eventually(lambda: all(
                sorted(leader.replicas.get("t", i).isr) == [1, 2, 3] for i in range(10)),
                timeout_s=20, what="full ISRs")
            sessions = [c.brokers[b].fetchers.fetchers[1].session for b in (2, 3)]
            before = [s.incremental_requests for s in sessions]
            calls = len(c.alter_calls)
            await asyncio.sleep(3.0)
            assert all(s.incremental_requests >= n + 5
                       for s, n in zip(sessions, before, strict=True))
            for i in range(10):
                assert sorted(leader.replicas.get("t", i).isr) == [1, 2, 3], i
            shrinks = [item for r in c.alter_calls[calls:] for _, items in r.topics
                       for item in items if len(item.new_isr) < 3]
            assert not shrinks
        finally:
            await c.stop()

    run(main, timeout_s=60)
