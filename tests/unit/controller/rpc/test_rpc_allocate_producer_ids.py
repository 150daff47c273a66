from kio.schema.errors import ErrorCode

from broker.controller import PRODUCER_ID_BLOCK_SIZE
from broker.controller.rpc import allocate_producer_ids as rpc
from tests.unit.controller.rpc.rpc_support import ControllerNode, call, run


def test_consecutive_blocks_do_not_overlap() -> None:
    async def go() -> None:
        node = ControllerNode()
        epoch = await node.add_broker(3)
        a = rpc.reply_of(await call(rpc, node, rpc.request(3, epoch)))
        b = rpc.reply_of(await call(rpc, node, rpc.request(3, epoch)))
        assert a.error is ErrorCode.none and b.error is ErrorCode.none
        assert a.producer_id_len == PRODUCER_ID_BLOCK_SIZE
        assert b.producer_id_start == a.producer_id_start + a.producer_id_len
        assert node.metadata.next_producer_id == b.producer_id_start + b.producer_id_len
    run(go())


def test_stale_epoch_and_not_controller() -> None:
    async def go() -> None:
        node = ControllerNode()
        epoch = await node.add_broker(3)
        stale = rpc.reply_of(await call(rpc, node, rpc.request(3, epoch + 5)))
        assert stale.error is ErrorCode.stale_broker_epoch
        node.quorum.is_leader = False
        resp = await call(rpc, node, rpc.request(3, epoch))
        assert rpc.error_code_of(resp) is ErrorCode.not_controller
    run(go())
