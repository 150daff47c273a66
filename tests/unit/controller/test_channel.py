"""ControllerChannel: local calls, remote calls over loopback to real RPC handlers, and the
retry loop (unknown leader, NOT_CONTROLLER, refused connections, silent controllers)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.controller.channel import ControllerChannel
from broker.controller.requests import (
    AlterConfigOp,
    AlterPartitionItem,
    AlterPartitionRequest,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    ConfigResource,
    CreatableTopic,
    CreatePartitionsTopic,
    ElectionType,
    IncrementalAlterConfigsResource,
)
from broker.controller.rpc import CONTROLLER_RPCS
from broker.errors import KafkaError
from broker.metadata.records import RESOURCE_TOPIC
from broker.protocol.transport import serve
from tests.support.timings import note
from tests.unit.controller.rpc.rpc_support import CLUSTER_ID, ControllerNode, run

RPCS = {m.API_KEY: m for m in CONTROLLER_RPCS}


async def controller_server(node: ControllerNode,
                            on_request: Callable[[int], None] | None = None
                            ) -> tuple[asyncio.Server, int]:
    async def handler(api_key: int, version: int, request: Any) -> Any:
        if on_request is not None:
            on_request(api_key)
        return await RPCS[api_key].handle(node, None, request)

    server = await serve(handler, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def registration(broker_id: int) -> BrokerRegistrationRequest:
    return BrokerRegistrationRequest(
        broker_id=broker_id, cluster_id=CLUSTER_ID, incarnation_id=uuid.uuid4(),
        listeners=[("PLAINTEXT", "127.0.0.1", 30000 + broker_id, "PLAINTEXT")])


def test_local_active_controller_is_called_without_a_socket() -> None:
    async def go() -> None:
        node = ControllerNode()
        channel = ControllerChannel(1, {1: ("127.0.0.1", 1)}, lambda: 1,
                                    node.controller_service)
        reply = await channel.register_broker(registration(1))
        assert reply.error is ErrorCode.none
        beat = await channel.broker_heartbeat(BrokerHeartbeatRequest(
            1, reply.broker_epoch, node.metadata.offset))
        assert not beat.is_fenced
        [res] = await channel.create_topics([CreatableTopic("t", 1, 1)])
        assert res.error is ErrorCode.none and node.metadata.topic("t") is not None
        assert channel.remote_calls == 0 and channel.local_active
    run(go())


def test_every_operation_reaches_a_remote_controller() -> None:
    async def go() -> None:
        node = ControllerNode(**{"node.id": "1"})
        server, port = await controller_server(node)
        channel = ControllerChannel(5, {1: ("127.0.0.1", port)}, lambda: 1)
        try:
            epochs = {}
            for b in (5, 6):
                reply = await channel.register_broker(registration(b))
                assert reply.error is ErrorCode.none
                epochs[b] = reply.broker_epoch
                beat = await channel.broker_heartbeat(BrokerHeartbeatRequest(
                    b, reply.broker_epoch, node.metadata.offset))
                assert not beat.is_fenced
            [res] = await channel.create_topics([CreatableTopic("t", 2, 2)])
            assert res.error is ErrorCode.none
            t = node.metadata.topic("t")
            assert t is not None and res.topic_id == t.topic_id
            [grown] = await channel.create_partitions([CreatePartitionsTopic("t", 3)])
            assert grown.error is ErrorCode.none and t is not None
            ids = await channel.allocate_producer_ids(5, epochs[5])
            assert ids.error is ErrorCode.none and ids.producer_id_len > 0
            p = node.metadata.partition("t", 0)
            assert p is not None
            other = next(b for b in p.replicas if b != p.leader)
            ap = await channel.alter_partition(AlterPartitionRequest(
                p.leader, epochs[p.leader], [(t.topic_id, [AlterPartitionItem(
                    0, p.leader_epoch, p.partition_epoch, [(p.leader, epochs[p.leader])])])]))
            assert ap.topics[0][1][0].error is ErrorCode.none
            after = node.metadata.partition("t", 0)
            assert after is not None and other not in after.isr
            elected = await channel.elect_leaders(ElectionType.PREFERRED, [("t", 1)])
            assert elected[0].error in (ErrorCode.none, ErrorCode.election_not_needed)
            started = await channel.alter_partition_reassignments([("t", 2, [5])])
            assert started[0].error is ErrorCode.none
            listed = await channel.list_partition_reassignments()
            assert all(o.topic == "t" for o in listed)
            [deleted] = await channel.delete_topics(["t"])
            assert deleted.error is ErrorCode.none and node.metadata.topic("t") is None
            assert channel.remote_calls >= 12
        finally:
            await channel.close()
            server.close()
    run(go())


def test_not_controller_answer_is_retried_at_the_new_leader() -> None:
    async def go() -> None:
        old = ControllerNode(active=False)
        new = ControllerNode()
        leader = {"id": 1}
        seen: list[int] = []

        def on_old(api_key: int) -> None:
            seen.append(api_key)
            leader["id"] = 2  # the quorum elected node 2 meanwhile

        s1, p1 = await controller_server(old, on_old)
        s2, p2 = await controller_server(new)
        channel = ControllerChannel(9, {1: ("127.0.0.1", p1), 2: ("127.0.0.1", p2)},
                                    lambda: leader["id"], retry_backoff_ms=1)
        try:
            reply = await channel.register_broker(registration(9))
            assert reply.error is ErrorCode.none
            assert seen == [62] and 9 in new.metadata.brokers
            assert 9 not in old.metadata.brokers
        finally:
            await channel.close()
            s1.close()
            s2.close()
    run(go())


async def closed_port() -> int:
    """A port nobody listens on: bind, read the number, close."""
    probe = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = int(probe.sockets[0].getsockname()[1])
    probe.close()
    await probe.wait_closed()
    return port


def test_unknown_or_dead_leader_makes_it_ask_the_other_controllers() -> None:
    async def go() -> None:
        node = ControllerNode(2)
        server, port = await controller_server(node)
        dead = await closed_port()
        leader = {"id": -1}
        channel = ControllerChannel(4, {1: ("127.0.0.1", dead), 2: ("127.0.0.1", port)},
                                    lambda: leader["id"], retry_backoff_ms=1)
        try:
            reply = await channel.register_broker(registration(4))
            assert reply.error is ErrorCode.none and 4 in node.metadata.brokers
            assert channel.remote_calls == 2  # 1 refused, then 2
            leader["id"] = 1  # a stale view: the old, dead leader
            reply = await channel.register_broker(registration(5))
            assert reply.error is ErrorCode.none and 5 in node.metadata.brokers
            assert channel.remote_calls == 3  # 1 refused a moment ago: 2 is asked first
        finally:
            await channel.close()
            server.close()
    run(go())


def test_unreachable_controller_fails_by_the_deadline() -> None:
    async def go() -> None:
        port = await closed_port()
        channel = ControllerChannel(4, {1: ("127.0.0.1", port)}, lambda: 1,
                                    retry_backoff_ms=5, default_timeout_s=0.4)
        start = time.monotonic()
        with pytest.raises(KafkaError) as info:
            await channel.create_topics([CreatableTopic("t")])
        assert info.value.error_code is ErrorCode.not_controller
        assert 0.35 <= time.monotonic() - start < 2.0
        assert channel.remote_calls >= 2  # it did retry
    run(go())


def test_a_silent_controller_is_asked_last_for_a_while() -> None:
    """A paused controller that the stale leader view still names must not hold every
    heartbeat for the attempt timeout: after one timeout the others are asked first."""
    attempt_s = 1.0

    async def go() -> None:
        async def silent(api_key: int, version: int, request: Any) -> Any:
            await asyncio.sleep(30)

        paused = await serve(silent, "127.0.0.1", 0)
        node = ControllerNode(2)
        await node.add_broker(4)
        server, port = await controller_server(node)
        channel = ControllerChannel(
            4, {1: ("127.0.0.1", paused.sockets[0].getsockname()[1]), 2: ("127.0.0.1", port)},
            lambda: 1, attempt_timeout_s=attempt_s)
        try:
            start = time.monotonic()
            beat = await channel.broker_heartbeat(BrokerHeartbeatRequest(4, node.epochs[4], 0))
            first = time.monotonic() - start
            assert beat.error is ErrorCode.none
            # one timeout, then controller 2 (not a second timeout)
            assert attempt_s <= first < 2 * attempt_s, first
            start = time.monotonic()
            beat = await channel.broker_heartbeat(BrokerHeartbeatRequest(4, node.epochs[4], 0))
            second = time.monotonic() - start
            # controller 2 first: no attempt timeout waited out
            assert beat.error is ErrorCode.none and second < attempt_s, second
            note("channel: heartbeat answered after the one attempt timeout", first - attempt_s,
                 0.7)
            note("channel: next heartbeat, silent controller asked last", second, 0.2)
        finally:
            await channel.close()
            server.close()
            paused.close()
    run(go())


def test_silent_controller_times_out_a_heartbeat_attempt() -> None:
    async def go() -> None:
        async def silent(api_key: int, version: int, request: Any) -> Any:
            await asyncio.sleep(30)

        server = await serve(silent, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        channel = ControllerChannel(4, {1: ("127.0.0.1", port)}, lambda: 1,
                                    attempt_timeout_s=0.2)
        start = time.monotonic()
        try:
            with pytest.raises(KafkaError) as info:
                await channel.broker_heartbeat(BrokerHeartbeatRequest(4, 1, 0))
            assert info.value.error_code is ErrorCode.request_timed_out
            assert time.monotonic() - start < 1.5
        finally:
            await channel.close()
            server.close()
    run(go())


def test_combined_node_goes_remote_while_its_own_controller_is_inactive() -> None:
    async def go() -> None:
        mine = ControllerNode(active=False)
        remote = ControllerNode()
        server, port = await controller_server(remote)
        channel = ControllerChannel(1, {1: ("127.0.0.1", 1), 2: ("127.0.0.1", port)},
                                    lambda: 2, mine.controller_service)
        try:
            reply = await channel.register_broker(registration(1))
            assert reply.error is ErrorCode.none and 1 in remote.metadata.brokers
            assert channel.remote_calls == 1 and not channel.local_active
            mine.quorum.is_leader = True  # now this node's controller is active
            reply = await channel.register_broker(registration(3))
            assert 3 in mine.metadata.brokers and channel.remote_calls == 1
        finally:
            await channel.close()
            server.close()
    run(go())


def test_a_remote_write_waits_for_the_local_image_to_catch_up() -> None:
    from kio.schema.describe_quorum.v0 import response as dq

    async def go() -> None:
        node = ControllerNode()
        await node.add_broker(1)

        async def handler(api_key: int, version: int, request: Any) -> Any:
            if api_key == 55:
                p: Any = dq
                return p.DescribeQuorumResponse(error_code=ErrorCode.none, topics=(p.TopicData(
                    topic_name="__cluster_metadata", partitions=(p.PartitionData(
                        partition_index=0, error_code=ErrorCode.none, leader_id=1,
                        leader_epoch=1, high_watermark=node.metadata.offset + 1,
                        current_voters=(), observers=()),)),))
            return await RPCS[api_key].handle(node, None, request)

        server = await serve(handler, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        asked: list[int] = []

        async def wait_applied(offset: int, timeout_s: float) -> None:
            asked.append(offset)

        channel = ControllerChannel(4, {1: ("127.0.0.1", port)}, lambda: 1,
                                    wait_applied=wait_applied)
        try:
            [res] = await channel.create_topics([CreatableTopic("t", 1, 1)])
            assert res.error is ErrorCode.none
            assert asked == [node.metadata.offset]  # the offset that holds the topic
            await channel.broker_heartbeat(BrokerHeartbeatRequest(1, node.epochs[1], 0))
            assert len(asked) == 1  # heartbeats do not wait
        finally:
            await channel.close()
            server.close()
    run(go())


def test_a_failed_catch_up_does_not_fail_the_write() -> None:
    async def go() -> None:
        node = ControllerNode()
        await node.add_broker(1)
        server, port = await controller_server(node)  # no DescribeQuorum: connection drops

        async def wait_applied(offset: int, timeout_s: float) -> None:
            raise AssertionError("not reached: the controller's high watermark is unknown")

        channel = ControllerChannel(4, {1: ("127.0.0.1", port)}, lambda: 1,
                                    wait_applied=wait_applied)
        try:
            [res] = await channel.create_topics([CreatableTopic("t", 1, 1)])
            assert res.error is ErrorCode.none and node.metadata.topic("t") is not None
        finally:
            await channel.close()
            server.close()
    run(go())


def test_a_heartbeat_answer_carries_the_close_of_its_connection() -> None:
    """heartbeat_connection_closed: None for a local answer, else done exactly when the
    connection that carried the latest heartbeat closes (the broker then heartbeats at once,
    before the controller's broker.session.disconnect.timeout.ms fences it)."""
    async def go() -> None:
        local = ControllerNode()
        here = ControllerChannel(1, {1: ("127.0.0.1", 1)}, lambda: 1, local.controller_service)
        reply = await here.register_broker(registration(1))
        await here.broker_heartbeat(BrokerHeartbeatRequest(1, reply.broker_epoch, 0))
        assert here.heartbeat_connection_closed is None

        node = ControllerNode(**{"node.id": "1"})
        server, port = await controller_server(node)
        channel = ControllerChannel(5, {1: ("127.0.0.1", port)}, lambda: 1)
        try:
            reply = await channel.register_broker(registration(5))
            await channel.broker_heartbeat(BrokerHeartbeatRequest(
                5, reply.broker_epoch, node.metadata.offset))
            closed = channel.heartbeat_connection_closed
            assert closed is not None and not closed.done()
            await asyncio.sleep(0.05)
            assert not closed.done()
            await channel._drop(1)  # the connection goes (as when either side closes it)
            await asyncio.wait_for(closed, 2)
            # the next heartbeat, on a new connection, carries a fresh one
            await channel.broker_heartbeat(BrokerHeartbeatRequest(
                5, reply.broker_epoch, node.metadata.offset))
            again = channel.heartbeat_connection_closed
            assert again is not None and again is not closed and not again.done()
        finally:
            await channel.close()
            server.close()
    run(go())


def test_token_writes_reach_a_remote_controller_as_their_clients_principal() -> None:
    """The delegation-token writes go in an Envelope (KIP-590) over a real socket; the
    controller serves them as the principal inside, not the broker's."""
    async def go() -> None:
        node = ControllerNode(**{"node.id": "1", "delegation.token.secret.key": "k"})
        seen: list[int] = []
        server, port = await controller_server(node, seen.append)
        channel = ControllerChannel(5, {1: ("127.0.0.1", port)}, lambda: 1)
        try:
            made = await channel.create_delegation_token("User:alice", None, ["User:bob"], -1)
            assert made.error is ErrorCode.none and made.owner == "User:alice"
            token = node.metadata.delegation_tokens[made.token_id]
            assert (token.requester, token.renewers) == ("User:alice", ("User:bob",))
            renewed = await channel.renew_delegation_token("User:bob", made.hmac, 60_000)
            assert renewed.error is ErrorCode.none and renewed.expiry_ms < made.expiry_ms
            refused = await channel.expire_delegation_token("User:carol", made.hmac, -1)
            assert refused.error is ErrorCode.delegation_token_owner_mismatch
            gone = await channel.expire_delegation_token("User:alice", made.hmac, -1)
            assert gone.error is ErrorCode.none and not node.metadata.delegation_tokens
            assert seen == [58] * 4 and channel.remote_calls == 4
        finally:
            await channel.close()
            server.close()
    run(go())


def _config_changes(value_u: str) -> list[IncrementalAlterConfigsResource]:
    return [IncrementalAlterConfigsResource(ConfigResource(RESOURCE_TOPIC, "t"),
                                            [("retention.ms", AlterConfigOp.SET, "5000")]),
            IncrementalAlterConfigsResource(ConfigResource(RESOURCE_TOPIC, "u"),
                                            [("cleanup.policy", AlterConfigOp.SET, value_u)])]


@pytest.mark.parametrize("where", ["local", "remote"])
def test_all_or_nothing_configs_write_nothing_when_one_resource_is_refused(where: str) -> None:
    """The admin plane's AlterConfigs: in one step on the local active service; at a remote
    controller every resource is validated first. Without all_or_nothing (Kafka's
    IncrementalAlterConfigs) the good resource is written on its own."""
    async def go() -> None:
        node = ControllerNode(**{"node.id": "1"})
        assert node.controller_service is not None
        await node.add_broker(1)
        for name in ("t", "u"):
            [made] = await node.controller_service.create_topics([CreatableTopic(name, 1, 1)])
            assert made.error is ErrorCode.none
        server, port = await controller_server(node)
        channel = (ControllerChannel(1, {1: ("127.0.0.1", port)}, lambda: 1,
                                     node.controller_service) if where == "local"
                   else ControllerChannel(5, {1: ("127.0.0.1", port)}, lambda: 1))
        try:
            refused = await channel.incremental_alter_configs(
                _config_changes("sometimes"), all_or_nothing=True)
            assert [r.error for r in refused] == [ErrorCode.none, ErrorCode.invalid_config]
            assert dict(node.metadata.topic_config("t")) == {}
            assert dict(node.metadata.topic_config("u")) == {}
            applied = await channel.incremental_alter_configs(
                _config_changes("compact"), all_or_nothing=True)
            assert [r.error for r in applied] == [ErrorCode.none, ErrorCode.none]
            assert dict(node.metadata.topic_config("t")) == {"retention.ms": "5000"}
            assert dict(node.metadata.topic_config("u")) == {"cleanup.policy": "compact"}
            per_resource = await channel.incremental_alter_configs(
                [*_config_changes("sometimes")[1:], IncrementalAlterConfigsResource(
                    ConfigResource(RESOURCE_TOPIC, "t"),
                    [("retention.ms", AlterConfigOp.SET, "6000")])])
            assert [r.error for r in per_resource] == [ErrorCode.invalid_config, ErrorCode.none]
            assert dict(node.metadata.topic_config("t")) == {"retention.ms": "6000"}
            # local: no socket; remote: the refused validation, then the validation and the
            # application of the good changes, then the per-resource call
            assert channel.remote_calls == (0 if where == "local" else 4)
        finally:
            await channel.close()
            server.close()
    run(go())


@pytest.mark.parametrize("where", ["local", "remote"])
def test_all_or_nothing_reassignments(where: str) -> None:
    """On the local active service a refused reassignment leaves the others unstarted; a
    remote controller's AlterPartitionReassignments answers per partition."""
    async def go() -> None:
        node = ControllerNode(**{"node.id": "1"})
        assert node.controller_service is not None
        for b in (1, 2):
            await node.add_broker(b)
        [made] = await node.controller_service.create_topics([CreatableTopic(
            "x", -1, -1, assignments={0: [1], 1: [1]})])
        assert made.error is ErrorCode.none
        server, port = await controller_server(node)
        channel = (ControllerChannel(1, {1: ("127.0.0.1", port)}, lambda: 1,
                                     node.controller_service) if where == "local"
                   else ControllerChannel(5, {1: ("127.0.0.1", port)}, lambda: 1))
        try:
            results = await channel.alter_partition_reassignments(
                [("x", 0, [2]), ("x", 1, [9])], all_or_nothing=True)
            assert [r.error for r in results][1] is not ErrorCode.none
            started = [o.partition for o in await channel.list_partition_reassignments()]
            moved = node.metadata.partition("x", 0)
            assert moved is not None
            if where == "local":
                assert results[0].error is ErrorCode.none and started == []
                assert tuple(moved.replicas) == (1,)
            else:
                assert results[0].error is ErrorCode.none
                assert 2 in moved.replicas and started == [0]
        finally:
            await channel.close()
            server.close()
    run(go())
