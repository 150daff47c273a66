"""The controller listener advertises the controller APIs at the version the channel sends."""

from broker.controller.rpc import CONTROLLER_RPCS
from broker.node.quorum import controller_api_table
from raft.kafka_messages import RAFT_APIS


def test_every_controller_rpc_is_advertised_at_its_version() -> None:
    table = controller_api_table()
    keys = [m.API_KEY for m in CONTROLLER_RPCS]
    assert sorted(keys) == [19, 20, 30, 31, 33, 37, 43, 44, 45, 46, 49, 51, 56, 57, 58, 62, 63,
                            64, 67, 70, 73]  # 73: AssignReplicasToDirs (KIP-858)
    # 58: Envelope, the delegation-token writes as their client's principal (KIP-590)
    for m in CONTROLLER_RPCS:
        assert table.supports(m.API_KEY, m.VERSION), m.__name__
        for attr in ("handle", "error_response", "error_code_of", "request"):
            assert callable(getattr(m, attr)), (m.__name__, attr)
    for key in RAFT_APIS:
        assert key in table
    assert 0 not in table and 3 not in table  # no Produce or Metadata on this listener
