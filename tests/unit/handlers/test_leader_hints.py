"""KIP-951: Produce v10+ and Fetch v16+ sent to a broker that does not lead the partition
name the current leader and its endpoint; older versions carry no hint. KIP-392: fetch
from a follower in the consumer's rack."""

from __future__ import annotations

import datetime
import importlib
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from broker.handlers import fetch
from broker.protocol.kio_build import build
from broker.protocol.records import decode_records
from broker.testing.inprocess_cluster import Cluster, batch, eventually, run
from tests.unit.handlers.conftest import make_ctx, roundtrip
from tests.unit.handlers.datapath import produce_answer, produce_request, records


def fetch_v(version: int, topic_id: Any, *, leader_epoch: int = -1) -> Any:
    m = importlib.import_module(f"kio.schema.fetch.v{version}.request")
    return build(
        m.FetchRequest, replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=1,
        max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
        topics=(build(m.FetchTopic, topic="t", topic_id=topic_id, partitions=(
            build(m.FetchPartition, partition=0, fetch_offset=0, partition_max_bytes=1 << 20,
                  current_leader_epoch=leader_epoch, log_start_offset=-1),)),),
        forgotten_topics_data=(), rack_id="",
    )


def decode_fetch(version: int, body: bytes) -> Any:
    m = importlib.import_module(f"kio.schema.fetch.v{version}.response")
    decoded, used = entity_reader(m.FetchResponse)(body, 0)
    assert used == len(body)
    return decoded


def test_produce_and_fetch_name_the_leader(tmp_path: Path) -> None:
    async def main() -> None:
        c = Cluster(tmp_path)
        await c.start()
        try:
            await c.create_topic("t", [1, 2])
            outsider = c.brokers[3]  # has no replica: the client's metadata is stale
            leader = c.brokers[1]
            reg = c.metadata.partition("t", 0)
            assert reg is not None and reg.leader == 1

            topic_id = c.metadata.topic("t").topic_id
            for version in (10, 11, 12, 13):  # v13 names the topic by id
                resp = await produce_answer(outsider, version, produce_request(
                    version, "t", 0, records(b"x"), topic_id=topic_id))
                roundtrip(resp)
                part = resp.responses[0].partition_responses[0]
                assert part.error_code is ErrorCode.not_leader_or_follower
                assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (
                    1, reg.leader_epoch)
                [ep] = resp.node_endpoints
                assert (ep.node_id, ep.host, ep.port, ep.rack) == (1, "127.0.0.1", leader.port,
                                                                   "rack1")
            # The follower refuses produce with the same hint.
            resp = await produce_answer(c.brokers[2], 10,
                                        produce_request(10, "t", 0, records(b"x")))
            assert resp.responses[0].partition_responses[0].current_leader.leader_id == 1
            # v9 has no such fields; the answer is the bare error.
            old = await produce_answer(outsider, 9,
                                       produce_request(9, "t", 0, records(b"x")))
            roundtrip(old)
            assert old.responses[0].partition_responses[0].error_code is (
                ErrorCode.not_leader_or_follower)

            body = (await fetch.handle(outsider, make_ctx(1, 16), fetch_v(16, topic_id))).to_bytes()
            got = decode_fetch(16, body)
            p = got.responses[0].partitions[0]
            assert p.error_code is ErrorCode.not_leader_or_follower
            assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (
                1, reg.leader_epoch)
            assert [(e.node_id, e.port, e.rack) for e in got.node_endpoints] == [
                (1, leader.port, "rack1")]
            # Fetch v15 carries the hint in the partition, without endpoints.
            body = (await fetch.handle(outsider, make_ctx(1, 15), fetch_v(15, topic_id))).to_bytes()
            got = decode_fetch(15, body)
            assert got.responses[0].partitions[0].current_leader.leader_id == 1
            # Leadership moves to broker 2: a fetch naming the old epoch is fenced there,
            # and the hint names broker 2 at the new epoch.
            await c.heartbeat(1, want_fence=True)
            reg2 = c.metadata.partition("t", 0)
            assert reg2 is not None and reg2.leader == 2 and reg2.leader_epoch > reg.leader_epoch
            body = (await fetch.handle(c.brokers[2], make_ctx(1, 16), fetch_v(
                16, topic_id, leader_epoch=reg.leader_epoch))).to_bytes()
            got = decode_fetch(16, body)
            p = got.responses[0].partitions[0]
            assert p.error_code is ErrorCode.fenced_leader_epoch
            assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (
                2, reg2.leader_epoch)
            assert [e.node_id for e in got.node_endpoints] == [2]
        finally:
            await c.stop()

    run(main)


def fetch_rack(version: int, topic_id: Any, rack: str, offset: int = 0) -> Any:
    m = importlib.import_module(f"kio.schema.fetch.v{version}.request")
    return build(
        m.FetchRequest, replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=1,
        max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
        topics=(build(m.FetchTopic, topic="t", topic_id=topic_id, partitions=(
            build(m.FetchPartition, partition=0, fetch_offset=offset,
                  partition_max_bytes=1 << 20, log_start_offset=-1),)),),
        forgotten_topics_data=(), rack_id=rack,
    )


def test_fetch_from_follower_in_the_consumers_rack(tmp_path: Path) -> None:
    async def main() -> None:
        c = Cluster(tmp_path)
        await c.start()
        try:
            await c.create_topic("t", [1, 2, 3])
            leader, f2 = c.brokers[1], c.brokers[2]
            await leader.replicas.append({("t", 0): batch(b"a", b"b")}, required_acks=-1,
                                         timeout_ms=5000)
            topic_id = c.metadata.topic("t").topic_id

            async def ask(node: Any, version: int, rack: str) -> Any:
                body = (await fetch.handle(node, make_ctx(1, version),
                                           fetch_rack(version, topic_id, rack))).to_bytes()
                return decode_fetch(version, body).responses[0].partitions[0]

            # The leader points a consumer in rack2 at broker 2, with no records.
            p = await ask(leader, 16, "rack2")
            assert (p.error_code, p.preferred_read_replica) == (ErrorCode.none, 2)
            assert not p.records
            # Same rack as the leader, no rack, or an unknown rack: the leader serves it.
            for rack in ("rack1", "", "elsewhere"):
                p = await ask(leader, 11, rack)
                assert p.preferred_read_replica == -1 and p.records, rack
            # The follower serves v11+ consumers up to its own high watermark.
            await eventually(lambda: f2.replicas.get("t", 0).high_watermark == 2,
                             what="follower high watermark")
            p = await ask(f2, 11, "rack2")
            assert p.error_code is ErrorCode.none and p.high_watermark == 2
            assert [r.value for r in decode_records(p.records)] == [b"a", b"b"]
            # Before v11 a consumer must read from the leader.
            p = await ask(f2, 10, "")
            assert p.error_code is ErrorCode.not_leader_or_follower
            # A follower that falls out of the ISR is no longer preferred.
            await f2.fetchers.stop()
            await eventually(lambda: leader.replicas.get("t", 0).isr == (1, 3), what="shrink")
            p = await ask(leader, 16, "rack2")
            assert p.preferred_read_replica == -1 and p.records
        finally:
            await c.stop()

    run(main)
