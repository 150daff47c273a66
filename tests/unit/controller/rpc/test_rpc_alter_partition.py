from kio.schema.errors import ErrorCode

from broker.controller.requests import AlterPartitionItem, AlterPartitionRequest, CreatableTopic
from broker.controller.rpc import alter_partition as rpc
from tests.unit.controller.rpc.rpc_support import ControllerNode, call, run


async def _cluster() -> ControllerNode:
    node = ControllerNode()
    for b in (1, 2, 3):
        await node.add_broker(b)
    assert node.controller_service is not None
    [res] = await node.controller_service.create_topics([CreatableTopic("t", 1, 3)])
    assert res.error is ErrorCode.none
    return node


def test_leader_shrinks_the_isr_and_gets_the_new_partition_epoch() -> None:
    async def go() -> None:
        node = await _cluster()
        t = node.metadata.topic("t")
        assert t is not None
        p = t.partitions[0]
        keep = [b for b in p.isr if b != p.leader][:1]
        new_isr = [(p.leader, node.epochs[p.leader]), (keep[0], -1)]
        req = AlterPartitionRequest(p.leader, node.epochs[p.leader], [(t.topic_id, [
            AlterPartitionItem(0, p.leader_epoch, p.partition_epoch, new_isr)])])
        reply = rpc.reply_of(await call(rpc, node, rpc.request(req)))
        assert reply.error is ErrorCode.none
        [(tid, [item])] = reply.topics
        assert tid == t.topic_id and item.error is ErrorCode.none
        assert item.partition_epoch == p.partition_epoch + 1
        assert set(item.isr) == {p.leader, keep[0]}
        after = node.metadata.partition("t", 0)
        assert after is not None and set(after.isr) == {p.leader, keep[0]}
        # the same request again carries an old partition epoch
        again = rpc.reply_of(await call(rpc, node, rpc.request(req)))
        assert again.topics[0][1][0].error is ErrorCode.invalid_update_version
    run(go())


def test_parse_inverts_request() -> None:
    import uuid
    req = AlterPartitionRequest(2, 7, [(uuid.UUID(int=5), [
        AlterPartitionItem(3, 4, 9, [(2, 7), (1, -1)], 1)])])
    parsed = rpc.parse(rpc.request(req))
    assert parsed.broker_id == 2 and parsed.broker_epoch == 7
    [(tid, [item])] = parsed.topics
    assert tid == uuid.UUID(int=5)
    assert (item.partition_index, item.leader_epoch, item.partition_epoch,
            list(item.new_isr), item.leader_recovery_state) == (3, 4, 9, [(2, 7), (1, -1)], 1)


def test_stale_sender_epoch_and_not_controller() -> None:
    async def go() -> None:
        node = await _cluster()
        t = node.metadata.topic("t")
        assert t is not None
        req = AlterPartitionRequest(1, node.epochs[1] + 10, [(t.topic_id, [])])
        assert rpc.reply_of(await call(rpc, node, rpc.request(req))).error \
            is ErrorCode.stale_broker_epoch
        node.quorum.is_leader = False
        resp = await call(rpc, node, rpc.request(req))
        assert rpc.error_code_of(resp) is ErrorCode.not_controller
    run(go())
