"""Helpers shared by the data-path handler tests (Produce, Fetch, ListOffsets, ...)."""

from __future__ import annotations

import datetime
import importlib
from typing import Any

from kio.serial import entity_reader

from broker.controller.requests import CreatableTopic
from broker.handlers import produce
from broker.handlers._build import build
from broker.protocol.api import response_schema
from broker.protocol.records import Record, build_batch
from tests.unit.handlers.conftest import TestNode, make_ctx

BASE_TS = 1_700_000_000_000


def schema_module(api: str, version: int, kind: str = "request") -> Any:
    """kio's module for the version, or kio 0.5.0's (broker/protocol/_kio_legacy) for the
    versions Kafka 4 removed."""
    try:
        return importlib.import_module(f"kio.schema.{api}.v{version}.{kind}")
    except ModuleNotFoundError:
        return importlib.import_module(f"broker.protocol._kio_legacy.{api}.v{version}.{kind}")


def records(*values: bytes, ts: int = BASE_TS) -> bytes:
    return build_batch([Record(timestamp=ts + i, key=b"k%d" % i, value=v,
                               headers=(("h", b"v"),)) for i, v in enumerate(values)])


async def create(node: TestNode, name: str, partitions: int = 1, **configs: str) -> None:
    [res] = await node.controller.create_topics(
        [CreatableTopic(name, partitions, 1, configs=configs)])
    assert res.error.name == "none", res


def produce_request(version: int, topic: str, partition: int, data: bytes | None,
                    acks: int = -1) -> Any:
    m = schema_module("produce", version)
    return build(
        m.ProduceRequest, transactional_id=None, acks=acks,
        timeout=datetime.timedelta(seconds=5),
        topic_data=(build(m.TopicProduceData, name=topic, partition_data=(
            build(m.PartitionProduceData, index=partition, records=data),)),),
    )


async def produce_answer(node: TestNode, version: int, request: Any) -> Any:
    """produce.handle's answer (written by the narrow encoder) read back by kio: None for
    acks=0, else the ProduceResponse of `version`, every byte consumed."""
    chunks = await produce.handle(node, make_ctx(0, version), request)
    if chunks is None:
        return None
    body = chunks.to_bytes()
    decoded, used = entity_reader(response_schema(0, version))(body, 0)
    assert used == len(body)
    return decoded


async def produce_ok(node: TestNode, topic: str, data: bytes, partition: int = 0) -> int:
    resp = await produce_answer(node, 9, produce_request(9, topic, partition, data))
    part = resp.responses[0].partition_responses[0]
    assert part.error_code.name == "none", part
    return int(part.base_offset)
