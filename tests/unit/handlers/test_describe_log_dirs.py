"""DescribeLogDirs v1-5: partitions and their sizes per log directory."""

from __future__ import annotations

from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.handlers import describe_log_dirs
from broker.protocol.kio_build import build
from tests.unit.handlers.conftest import TestNode, make_ctx, roundtrip, run
from tests.unit.handlers.datapath import create, produce_ok, records, schema_module


def request(version: int, topics: dict[str, list[int]] | None) -> Any:
    m = schema_module("describe_log_dirs", version)
    return build(m.DescribeLogDirsRequest, topics=None if topics is None else tuple(
        build(m.DescribableLogDirTopic, topic=t, partitions=tuple(p)) for t, p in topics.items()))


@pytest.mark.parametrize("version", range(0, 6))
def test_sizes_per_dir(node: TestNode, version: int) -> None:
    async def go() -> None:
        await create(node, "t", partitions=2)
        await produce_ok(node, "t", records(b"x" * 100))
        resp = await describe_log_dirs.handle(node, make_ctx(35, version), request(version, None))
        roundtrip(resp)
        [result] = resp.results
        assert result.error_code is ErrorCode.none
        assert result.log_dir == str(node.config.log_dirs[0])
        [topic] = result.topics
        sizes = {p.partition_index: p.partition_size for p in topic.partitions}
        assert sizes[0] == node.replicas.get("t", 0).log.size_in_bytes > 100
        assert sizes[1] == 0
        only = await describe_log_dirs.handle(node, make_ctx(35, version),
                                              request(version, {"t": [1]}))
        assert [p.partition_index for p in only.results[0].topics[0].partitions] == [1]
    run(go())


@pytest.mark.parametrize("version", range(0, 6))
def test_several_dirs_a_future_replica_and_an_offline_dir(node_factory: Any, tmp_path: Any,
                                                          version: int) -> None:
    node: TestNode = node_factory({"log.dirs": f"{tmp_path}/a,{tmp_path}/b,{tmp_path}/c"})
    node.logs.load()
    a, b, c = node.config.log_dirs

    async def go() -> None:
        await create(node, "t", partitions=2)
        await produce_ok(node, "t", records(b"x" * 100))
        fut = node.logs.create_future("t", 0, c)  # a move of t-0 to c, under way
        fut.current_end_offset = 1
        node.logs.fail_dir(b, OSError(5, "Input/output error"))
        resp = await describe_log_dirs.handle(node, make_ctx(35, version), request(version, None))
        roundtrip(resp)
        by_dir = {r.log_dir: r for r in resp.results}
        assert list(by_dir) == [str(a), str(b), str(c)]
        assert by_dir[str(b)].error_code is ErrorCode.kafka_storage_error
        assert by_dir[str(b)].topics == ()
        assert [(p.partition_index, p.is_future_key, p.offset_lag)
                for t in by_dir[str(a)].topics for p in t.partitions] == [(0, False, 0)]
        assert [(p.partition_index, p.is_future_key, p.offset_lag, p.partition_size)
                for t in by_dir[str(c)].topics for p in t.partitions] == [(0, True, 1, 0)]
        if version >= 4:
            assert by_dir[str(a)].total_bytes > 0 and by_dir[str(a)].usable_bytes >= 0
            assert by_dir[str(b)].total_bytes == -1 and by_dir[str(b)].usable_bytes == -1
        fut.copy_pass(1)
        again = await describe_log_dirs.handle(node, make_ctx(35, version),
                                               request(version, {"t": [0]}))
        [future] = [p for r in again.results for t in r.topics for p in t.partitions
                    if p.is_future_key]
        assert future.offset_lag == 0
        assert future.partition_size == node.replicas.get("t", 0).log.size_in_bytes > 100
    run(go())
