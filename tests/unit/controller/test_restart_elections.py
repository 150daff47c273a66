"""A sole replica restarting, cleanly or not, leads its partitions again (KIP-966 order:
ISR, then ELR, then the last known leader)."""

from __future__ import annotations

import pytest
from conftest import Harness
from test_brokers import GRACE, SESSION, empty_harness, hb, reg_req, up

from broker.controller import CreatableTopic
from broker.metadata.records import NO_LEADER


@pytest.mark.parametrize("clean", [True, False])
def test_combined_node_restart_regains_leadership(clean: bool) -> None:
    h = empty_harness()
    up(h, 1)
    [res] = h.commit(h.controller.create_topics(h.image, [CreatableTopic("t", 2, 1)]))
    assert res.error.name == "none"
    old_epoch = h.image.brokers[1].epoch
    before = {i: p.leader_epoch for i, p in h.image.topic("t").partitions.items()}

    if clean:  # SIGTERM: the controlled shutdown ends with the broker fenced
        assert hb(h, 1, 5, want_shut_down=True).should_shut_down is False
        assert hb(h, 1, 6, want_shut_down=True).should_shut_down is True

    # The whole node restarts: a new controller (no sessions) over the committed image, and
    # the broker as a new incarnation; a clean shutdown names its last broker epoch.
    h = Harness(h.image, broker_session_timeout_ms=SESSION)
    h.controller.reset_sessions(10)
    prev = old_epoch if clean else -1
    if not clean:
        # the killed incarnation is still registered unfenced: the new one waits for the
        # activation grace (Kafka: the whole session)
        refused = h.controller.register_broker(h.image, reg_req(1, gen=1, prev=prev), 10)
        assert refused.response.error.name == "duplicate_broker_registration"
    at = 10 if clean else 10 + GRACE
    reply = h.commit(h.controller.register_broker(h.image, reg_req(1, gen=1, prev=prev), at))
    assert reply.error.name == "none"
    for p in h.image.topic("t").partitions.values():
        assert p.leader == NO_LEADER
        # Clean: still eligible through the ELR; unclean: remembered as last known leader.
        assert (p.elr if clean else p.last_known_elr) == (1,)

    assert hb(h, 1, at + 10).is_fenced is False
    for i, p in h.image.topic("t").partitions.items():
        assert (p.leader, p.isr, p.elr, p.last_known_elr) == (1, (1,), (), ())
        assert p.leader_epoch > before[i]


def test_last_known_leader_is_not_replaced_by_a_non_replica() -> None:
    h = empty_harness()
    up(h, 1, 2)
    [res] = h.commit(h.controller.create_topics(
        h.image, [CreatableTopic("t", -1, -1, assignments={0: [2]})]))
    assert res.error.name == "none"
    hb(h, 1, SESSION + 1)
    h.commit(type("R", (), {"records": h.controller.tick(h.image, SESSION + 1),
                            "response": None})())
    assert h.image.brokers[2].fenced
    p = h.image.topic("t").partitions[0]
    assert (p.leader, p.elr) == (NO_LEADER, (2,))  # fenced cleanly: still eligible
    hb(h, 1, SESSION + 2)
    assert h.image.topic("t").partitions[0].leader == NO_LEADER
