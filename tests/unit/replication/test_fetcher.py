"""Replication between real ReplicaManagers over loopback: follower fetch, high watermark,
acks=all, ISR changes through the controller, leader changes."""

from __future__ import annotations

from pathlib import Path

from broker.replication import Role
from tests.unit.replication.cluster import Cluster, batch, eventually, run


def test_followers_catch_up_and_the_high_watermark_follows(tmp_path: Path) -> None:
    async def main() -> None:
        c = Cluster(tmp_path)
        await c.start()
        try:
            await c.create_topic("t", [1, 2, 3], min_isr=2)
            leader = c.leader("t")
            assert leader.node_id == 1
            lp = leader.replicas.get("t", 0)
            res = await leader.replicas.append({("t", 0): batch(b"a", b"b", b"c")},
                                               required_acks=-1, timeout_ms=5000)
            assert res[("t", 0)].base_offset == 0
            # acks=all answered only once the ISR holds the batch.
            assert lp.high_watermark == 3
            for b in (2, 3):
                fp = c.brokers[b].replicas.get("t", 0)
                assert fp.role is Role.FOLLOWER
                assert fp.log.log_end_offset >= 3
                assert c.brokers[b].fetchers.source_of("t", 0) == 1
            # Followers learn the high watermark on their next fetch.
            await eventually(lambda: all(
                c.brokers[b].replicas.get("t", 0).high_watermark == 3 for b in (2, 3)),
                what="follower high watermarks")
            follower_bytes = c.brokers[2].replicas.get("t", 0).log.read(0, 1 << 20, 3).read_bytes()
            assert follower_bytes == lp.log.read(0, 1 << 20, 3).read_bytes()
        finally:
            await c.stop()

    run(main)
