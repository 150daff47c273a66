"""DescribeLogDirs v1-4: partitions and their sizes per log directory."""

from __future__ import annotations

from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.handlers import describe_log_dirs
from broker.handlers._build import build
from tests.unit.handlers.conftest import TestNode, make_ctx, roundtrip, run
from tests.unit.handlers.datapath import create, produce_ok, records, schema_module


def request(version: int, topics: dict[str, list[int]] | None) -> Any:
    m = schema_module("describe_log_dirs", version)
    return build(m.DescribeLogDirsRequest, topics=None if topics is None else tuple(
        build(m.DescribableLogDirTopic, topic=t, partitions=tuple(p)) for t, p in topics.items()))


@pytest.mark.parametrize("version", range(0, 5))
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
