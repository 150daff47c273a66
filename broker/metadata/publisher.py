"""Turns committed metadata-log batches into MetadataImages and tells subscribers.

The Raft driver calls `apply_committed` (in offset order) and `load_snapshot`; handlers
read `image`; the controller service awaits `wait_for_offset` to answer a request only
once its records are committed and applied on this node.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Iterable
from typing import Any

import structlog

from broker.metadata import records as rec
from broker.metadata.delta import MetadataDelta
from broker.metadata.image import MetadataImage

log = structlog.get_logger(__name__)

Subscriber = Callable[[MetadataImage, MetadataImage, MetadataDelta | None], None]


class MetadataPublisher:
    def __init__(self, cluster_id: str) -> None:
        self.image = MetadataImage.empty(cluster_id)
        self._subscribers: list[Subscriber] = []
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        # append time (wall-clock ms) of the last batch applied, 0 before the first: Kafka's
        # last-applied-record-timestamp, from which the metrics derive the lag in ms
        self.last_applied_timestamp = 0
        # what was applied, as it came (a broker of several workers streams it to them:
        # broker/node/workers.py): ("batch", last offset, epoch, payloads, timestamp),
        # ("advance", last offset, epoch, timestamp) or ("snapshot", image)
        self.taps: list[Callable[[tuple[Any, ...]], None]] = []

    def subscribe(self, subscriber: Subscriber) -> None:
        """`subscriber(old, new, delta)` runs after each published image, in order; `delta`
        says what changed, or is None when a snapshot replaced the image wholesale."""
        self._subscribers.append(subscriber)

    def apply_committed(self, last_offset: int, epoch: int, payloads: Iterable[bytes],
                        timestamp: int = 0) -> None:
        """Records of one committed batch ending at `last_offset` (control records excluded);
        `timestamp` is the batch's append time (wall-clock ms), 0 when unknown."""
        if timestamp > 0:
            self.last_applied_timestamp = timestamp
        if self.taps:
            payloads = list(payloads)
            for tap in self.taps:
                tap(("batch", last_offset, epoch, payloads, timestamp))
        delta = MetadataDelta(self.image)
        for payload in payloads:
            try:
                delta.replay(rec.decode(payload), last_offset, epoch)
            except rec.InvalidRecordError as exc:
                # A record this version cannot read must not stop the node from following
                # the log; it is logged loudly so an operator sees the version skew.
                log.error("metadata_record_unreadable", offset=last_offset, error=str(exc))
        self._publish(delta.apply(), last_offset, epoch, delta)

    def load_snapshot(self, image: MetadataImage) -> None:
        for tap in self.taps:
            tap(("snapshot", image))
        self._publish(image, image.offset, image.epoch, None)

    def advance_offset(self, last_offset: int, epoch: int, timestamp: int = 0) -> None:
        """A committed batch with nothing for the image (e.g. a LeaderChange control batch)."""
        if timestamp > 0:
            self.last_applied_timestamp = timestamp
        for tap in self.taps:
            tap(("advance", last_offset, epoch, timestamp))
        if last_offset > self.image.offset:
            self._publish(
                dataclasses.replace(self.image, offset=last_offset, epoch=epoch),
                last_offset, epoch, MetadataDelta(self.image),
            )

    def _publish(
        self, new: MetadataImage, offset: int, epoch: int, delta: MetadataDelta | None,
    ) -> None:
        old, self.image = self.image, new
        for subscriber in self._subscribers:
            try:
                subscriber(old, new, delta)
            except Exception:
                log.exception("metadata_subscriber_failed", offset=offset)
        ready = [w for w in self._waiters if w[0] <= new.offset]
        if ready:
            self._waiters = [w for w in self._waiters if w[0] > new.offset]
            for _, future in ready:
                if not future.done():
                    future.set_result(None)

    async def wait_for_offset(self, offset: int, timeout_s: float | None = None) -> None:
        """Returns once the image includes `offset`; TimeoutError after `timeout_s`."""
        if self.image.offset >= offset:
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (offset, future)
        self._waiters.append(entry)
        try:
            await asyncio.wait_for(future, timeout_s)
        finally:
            if entry in self._waiters:
                self._waiters.remove(entry)

