"""A produce-then-read-back round trip with aiokafka, for tests that vary only the settings
(security protocols, SASL mechanisms, TLS contexts)."""

from __future__ import annotations

import asyncio
from typing import Any


def aiokafka_roundtrip(topic: str, values: list[bytes], producer: dict[str, Any],
                       consumer: dict[str, Any], timeout_s: float = 30.0) -> list[bytes]:
    """Send `values` to `topic` with AIOKafkaProducer(**producer), then read partition 0 from
    the beginning with AIOKafkaConsumer(**consumer) until as many values came back (bounded
    by `timeout_s`); returns what was read."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    async def run() -> list[bytes]:
        p = AIOKafkaProducer(**producer)
        await p.start()
        try:
            for v in values:
                await p.send(topic, v)
            await p.flush()
        finally:
            await p.stop()
        c = AIOKafkaConsumer(enable_auto_commit=False, **consumer)
        await c.start()
        try:
            tp = TopicPartition(topic, 0)
            c.assign([tp])
            await c.seek_to_beginning(tp)
            out: list[bytes] = []
            async with asyncio.timeout(timeout_s):
                while len(out) < len(values):
                    batch = await c.getmany(tp, timeout_ms=1000)
                    out += [m.value for m in batch.get(tp, []) if m.value is not None]
            return out
        finally:
            await c.stop()

    return asyncio.run(run())
