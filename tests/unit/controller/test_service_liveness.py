"""ControllerService and broker liveness: a heartbeat that waits behind a long operation
(a big CreateTopics being committed) still renews its broker's session from its arrival,
so the tick queued ahead of it does not fence the broker (issue 17)."""

from __future__ import annotations

import asyncio

from kio.schema.errors import ErrorCode

from broker.controller.requests import BrokerHeartbeatRequest, CreatableTopic
from broker.errors import KafkaError
from tests.unit.controller.rpc.rpc_support import ControllerNode, run


def test_a_heartbeat_queued_behind_a_slow_commit_is_not_fenced_by_the_tick() -> None:
    async def go() -> None:
        now = [0]
        node = ControllerNode()
        service = node.controller_service
        assert service is not None
        service.clock = lambda: now[0]
        session_ms = service.controller.settings.broker_session_timeout_ms  # the default
        for b in (1, 2):
            await node.add_broker(b)
        assert all(not r.fenced for r in node.metadata.brokers.values())
        fenced_seen: set[int] = set()
        node.publisher.subscribe(lambda old, new, delta: fenced_seen.update(
            b for b, r in new.brokers.items() if r.fenced))

        release = asyncio.Event()
        commit = node.quorum.append

        async def slow_append(records: list[bytes]) -> int:
            await release.wait()
            return await commit(records)

        node.quorum.append = slow_append  # type: ignore[method-assign]
        create = asyncio.create_task(service.create_topics([CreatableTopic("big", 8, 1)]))
        await asyncio.sleep(0)  # the CreateTopics holds the controller, waiting to commit
        tick = asyncio.create_task(service.tick())
        await asyncio.sleep(0)
        now[0] = session_ms + 1000  # both brokers heartbeat while the commit is slow
        beats = [asyncio.create_task(service.broker_heartbeat(BrokerHeartbeatRequest(
            b, node.epochs[b], node.metadata.offset))) for b in (1, 2)]
        await asyncio.sleep(0.01)
        now[0] = session_ms + 1500  # the commit ends; the tick (queued first) runs now
        release.set()
        await asyncio.gather(create, tick, *beats)
        assert [b.is_fenced for b in (t.result() for t in beats)] == [False, False]
        assert fenced_seen == set()  # not even for a moment

    run(go())


def test_a_batch_lost_in_an_earlier_term_does_not_stall_the_next_one() -> None:
    """This node appended a batch as leader that never committed (it was isolated; another
    leader truncated it). Active again, its operations must not wait for that batch's
    offset: heartbeats are answered and a fenced broker is unfenced at once."""
    async def go() -> None:
        node = ControllerNode()
        service = node.controller_service
        assert service is not None
        service.commit_timeout_s = 0.2
        await node.add_broker(1)
        commit = node.quorum.append

        async def lost_append(records: list[bytes]) -> int:
            return node.quorum.next_offset + 50  # appended, never committed

        node.quorum.append = lost_append  # type: ignore[method-assign]
        try:
            await service.broker_heartbeat(BrokerHeartbeatRequest(
                1, node.epochs[1], node.metadata.offset, want_fence=True))
        except KafkaError as exc:
            assert exc.error_code is ErrorCode.request_timed_out
        else:
            raise AssertionError("the fence was never committed")
        # leadership lost and regained; the new term's log does not reach that offset
        node.quorum.append = commit  # type: ignore[method-assign]
        service.activate()
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        beat = await service.broker_heartbeat(BrokerHeartbeatRequest(
            1, node.epochs[1], node.metadata.offset))
        assert not beat.is_fenced and beat.error is ErrorCode.none
        assert loop.time() - t0 < 0.1

    run(go())
