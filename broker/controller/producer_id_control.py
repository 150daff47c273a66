"""ProducerIdControlManager: blocks of producer ids for brokers (AllocateProducerIds)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.controller.control_base import ControlManagerBase
from broker.controller.requests import (
    AllocateProducerIdsReply,
    ControllerResult,
)
from broker.metadata import records as rec
from broker.metadata.image import (
    MetadataImage,
)

PRODUCER_ID_BLOCK_SIZE = 1000


class ProducerIdControlManager(ControlManagerBase):
    # -- producer ids ------------------------------------------------------------------

    def allocate_producer_ids(self, image: MetadataImage, broker_id: int,
                              broker_epoch: int) -> ControllerResult[AllocateProducerIdsReply]:
        reg = image.brokers.get(broker_id)
        if reg is None:
            return ControllerResult(
                [], AllocateProducerIdsReply(ErrorCode.broker_id_not_registered))
        if reg.epoch != broker_epoch:
            return ControllerResult([], AllocateProducerIdsReply(ErrorCode.stale_broker_epoch))
        start = image.next_producer_id
        if start > 2**63 - 1 - PRODUCER_ID_BLOCK_SIZE:
            return ControllerResult([], AllocateProducerIdsReply(ErrorCode.unknown_server_error))
        return ControllerResult(
            [rec.producer_ids_record(broker_id, broker_epoch, start + PRODUCER_ID_BLOCK_SIZE)],
            AllocateProducerIdsReply(producer_id_start=start,
                                     producer_id_len=PRODUCER_ID_BLOCK_SIZE))
