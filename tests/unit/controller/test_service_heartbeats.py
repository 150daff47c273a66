"""ControllerService.broker_heartbeat: a heartbeat waiting for the controller's lock (behind
operations that wait for their records to commit) keeps its broker from being fenced."""

import asyncio
import time

from broker.controller.requests import BrokerHeartbeatRequest
from broker.metadata.records import kind
from tests.unit.controller.rpc.rpc_support import ControllerNode, run


def test_a_queued_heartbeat_counts_as_contact_until_it_is_processed() -> None:
    async def go() -> None:
        node = ControllerNode()
        for b in (1, 2):
            await node.add_broker(b)
        service = node.controller_service
        assert service is not None
        session = service.controller.settings.broker_session_timeout_ms
        async with service._lock:  # an earlier operation, waiting for its commit
            beat = asyncio.ensure_future(service.broker_heartbeat(BrokerHeartbeatRequest(
                1, node.epochs[1], node.metadata.offset)))
            await asyncio.sleep(0)
            later = int(time.time() * 1000) + session + 1000
            records = service.controller.tick(node.metadata, later)
            fenced = [r.fence_broker.broker_id for r in records if kind(r) == "fence_broker"]
            assert fenced == [2]  # 1's heartbeat is waiting: alive
            assert not beat.done()
        reply = await beat
        assert not reply.is_fenced
        records = service.controller.tick(node.metadata, later + session + 1000)
        assert [r.fence_broker.broker_id for r in records if kind(r) == "fence_broker"] == [1]
    run(go())
