"""Helpers shared by the data-path handler tests (Produce, Fetch, ListOffsets, ...)."""

from __future__ import annotations

import datetime
import importlib
from typing import Any

from kio.serial import entity_reader

from broker.controller.requests import CreatableTopic
from broker.handlers import produce
from broker.protocol.api import response_schema
from broker.protocol.kio_build import build
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
                    acks: int = -1, topic_id: Any = None) -> Any:
    """v13+ names the topic by `topic_id` (the name is not on the wire there)."""
    m = schema_module("produce", version)
    return build(
        m.ProduceRequest, transactional_id=None, acks=acks,
        timeout=datetime.timedelta(seconds=5),
        topic_data=(build(m.TopicProduceData, name=topic, topic_id=topic_id, partition_data=(
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


def txn_records(producer_id: int, epoch: int, seq: int, *values: bytes,
                ts: int = BASE_TS) -> bytes:
    """A transactional batch of `values` from producer (id, epoch) at sequence `seq`."""
    return build_batch([Record(timestamp=ts + i, key=b"k%d" % i, value=v)
                        for i, v in enumerate(values)],
                       producer_id=producer_id, producer_epoch=epoch, base_sequence=seq,
                       is_transactional=True)


async def produce_txn(node: TestNode, topic: str, data: bytes, transactional_id: str = "tx",
                      partition: int = 0, version: int = 9) -> Any:
    """Produce with a transactional_id; the partition's answer."""
    m = schema_module("produce", version)
    request = build(
        m.ProduceRequest, transactional_id=transactional_id, acks=-1,
        timeout=datetime.timedelta(seconds=5),
        topic_data=(build(m.TopicProduceData, name=topic, partition_data=(
            build(m.PartitionProduceData, index=partition, records=data),)),),
    )
    resp = await produce_answer(node, version, request)
    return resp.responses[0].partition_responses[0]


def txn_markers_request(version: int, *markers: tuple[int, int, bool, int,
                                                      list[tuple[str, list[int]]]]) -> Any:
    """markers: (producer id, producer epoch, committed, coordinator epoch, topics)."""
    m = schema_module("write_txn_markers", version)
    return build(m.WriteTxnMarkersRequest, markers=tuple(
        build(m.WritableTxnMarker, producer_id=pid, producer_epoch=epoch,
              transaction_result=committed, coordinator_epoch=coord, topics=tuple(
                  build(m.WritableTxnMarkerTopic, name=t, partition_indexes=tuple(ps))
                  for t, ps in topics))
        for pid, epoch, committed, coord, topics in markers))
