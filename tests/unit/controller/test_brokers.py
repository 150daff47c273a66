from __future__ import annotations

import dataclasses
import uuid

from conftest import Harness
from kio.schema.errors import ErrorCode

from broker.controller import (
    PRODUCER_ID_BLOCK_SIZE,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    CreatableTopic,
    CreatePartitionsTopic,
)
from broker.metadata import MetadataImage, apply_records
from broker.metadata import records as rec
from broker.metadata.records import kind

E = ErrorCode
CID = "test-cluster"
SESSION = 9000
HEARTBEAT = 2000
GRACE = 2 * HEARTBEAT  # a newly active controller's grace for a broker's first heartbeat


def inc(b: int, gen: int = 0) -> uuid.UUID:
    return uuid.UUID(int=(gen << 32) + abs(b) + 1)


def reg_req(b: int, gen: int = 0, prev: int = -1, **kw) -> BrokerRegistrationRequest:
    return BrokerRegistrationRequest(
        broker_id=b, cluster_id=kw.pop("cluster_id", CID), incarnation_id=inc(b, gen),
        listeners=[("PLAINTEXT", "127.0.0.1", 9000 + b, "PLAINTEXT")],
        features=kw.pop("features", [("metadata.version", 1, 1)]),
        rack=kw.pop("rack", None), previous_broker_epoch=prev)


def empty_harness(**settings) -> Harness:
    img = apply_records(MetadataImage.empty(CID), [rec.feature_level_record("metadata.version",
                                                                              1)], 0, 1)
    return Harness(img, broker_session_timeout_ms=SESSION, **settings)


def hb(h: Harness, b: int, now: int, **kw):
    epoch = kw.pop("epoch", h.image.brokers[b].epoch if b in h.image.brokers else 0)
    offset = kw.pop("offset", h.image.offset)
    return h.commit(h.controller.broker_heartbeat(
        h.image, BrokerHeartbeatRequest(b, epoch, offset, **kw), now))


def up(h: Harness, *brokers: int, now: int = 0) -> None:
    for b in brokers:
        r = h.commit(h.controller.register_broker(h.image, reg_req(b), now))
        assert r.error is E.none
    for b in brokers:
        assert hb(h, b, now).is_fenced is False


def tick_all(h: Harness, now: int) -> list:
    """Ticks at `now` until one fences nothing (each fences at most one broker), applying
    each tick's records; returns them all."""
    out: list = []
    for _ in range(10):
        records = h.controller.tick(h.image, now)
        if not records:
            return out
        h.image = apply_records(h.image, records)
        out.extend(records)
    raise AssertionError("ticks kept fencing")


def test_register_then_unfence_when_caught_up():
    h = empty_harness()
    r = h.controller.register_broker(h.image, reg_req(1, rack="r1"), now_ms=0)
    assert [kind(x) for x in r.records] == ["register_broker"]
    reply = h.commit(r)
    assert reply.error is E.none and reply.broker_epoch > 0
    b = h.image.brokers[1]
    assert b.fenced and b.epoch == reply.broker_epoch and b.rack == "r1"
    assert b.endpoint("PLAINTEXT").port == 9001 and b.incarnation_id == inc(1)
    # not caught up: stays fenced, no records
    res = h.controller.broker_heartbeat(
        h.image, BrokerHeartbeatRequest(1, reply.broker_epoch, h.image.offset - 1), 10)
    assert res.records == [] and res.response.is_fenced and not res.response.is_caught_up
    # caught up: unfenced
    out = hb(h, 1, 20)
    assert out.error is E.none and out.is_caught_up and not out.is_fenced
    assert not h.image.brokers[1].fenced
    # steady state: no records
    r = h.controller.broker_heartbeat(
        h.image, BrokerHeartbeatRequest(1, reply.broker_epoch, h.image.offset), 30)
    assert r.records == [] and not r.response.is_fenced


def test_registration_errors():
    h = empty_harness()
    r = h.controller.register_broker(h.image, reg_req(1, cluster_id="other"), 0)
    assert r.response.error is E.inconsistent_cluster_id and r.records == []
    r = h.controller.register_broker(h.image, reg_req(1, features=[("metadata.version", 2, 5)]),
                                     0)
    assert r.response.error is E.unsupported_version
    # as Kafka: a finalized feature the broker does not declare is supported at 0 only
    r = h.controller.register_broker(h.image, reg_req(1, features=[]), 0)
    assert r.response.error is E.unsupported_version
    assert "between 0 and 0" in (r.response.message or "")
    r = h.controller.register_broker(h.image, reg_req(-3), 0)
    assert r.response.error is E.invalid_registration


def test_duplicate_registration_only_while_session_alive():
    h = empty_harness()
    up(h, 1)
    r = h.controller.register_broker(h.image, reg_req(1, gen=1), 1000)
    assert r.response.error is E.duplicate_broker_registration
    h.commit(h.controller.register_broker(h.image, reg_req(1, gen=0,
                                                           prev=h.image.brokers[1].epoch), 1000))
    # same incarnation re-registering is allowed and gets a new epoch
    old_epoch = h.image.brokers[1].epoch
    r = h.commit(h.controller.register_broker(h.image, reg_req(1, gen=0, prev=old_epoch), 2000))
    assert r.error is E.none and r.broker_epoch > old_epoch
    # after the session expired a new incarnation may take over
    r = h.controller.register_broker(h.image, reg_req(1, gen=2), 2000 + SESSION)
    assert r.response.error is E.none


def test_duplicate_registration_also_while_the_other_is_fenced_but_alive():
    h = empty_harness()
    h.commit(h.controller.register_broker(h.image, reg_req(1), 0))
    hb(h, 1, 100, offset=-5)  # still catching up: fenced, but its session is alive
    assert h.image.brokers[1].fenced
    r = h.controller.register_broker(h.image, reg_req(1, gen=1), 200)
    assert r.response.error is E.duplicate_broker_registration


def test_heartbeat_errors():
    h = empty_harness()
    up(h, 1)
    assert hb(h, 2, 0, epoch=5).error is E.broker_id_not_registered
    assert hb(h, 1, 0, epoch=h.image.brokers[1].epoch + 1).error is E.stale_broker_epoch


def topic(h: Harness, name: str, parts: int, rf: int, configs=None):
    [r] = h.commit(h.controller.create_topics(
        h.image, [CreatableTopic(name, parts, rf, configs=configs or {})]))
    assert r.error is E.none, r
    return h.image.topic(name)


def test_session_expiry_fences_and_moves_leadership():
    h = empty_harness()
    up(h, 0, 1, 2)
    t = topic(h, "t", 6, 3)
    led_by_0 = [i for i, p in t.partitions.items() if p.leader == 0]
    assert led_by_0
    for now in (3000, 6000, SESSION - 1):
        hb(h, 1, now)
        hb(h, 2, now)
        assert h.controller.tick(h.image, now) == []
    records = h.controller.tick(h.image, SESSION)  # expired at last contact + timeout
    assert kind(records[-1]) == "fence_broker"
    # the log names the cause (issue 31): the session, not a closed connection
    assert h.controller.fence_causes == {
        0: f"session expired: no heartbeat for {SESSION} ms "
           f"(broker.session.timeout.ms={SESSION})"}
    h.image = apply_records(h.image, records)
    assert h.image.brokers[0].fenced
    for i, p in h.image.topic("t").partitions.items():
        assert 0 not in p.isr and p.leader in (1, 2)
        old = t.partitions[i]
        if i in led_by_0:
            assert p.leader_epoch == old.leader_epoch + 1 and p.leader == next(
                r for r in old.replicas if r != 0)
        else:
            assert p.leader == old.leader and p.leader_epoch == old.leader_epoch
        assert p.partition_epoch == old.partition_epoch + 1
        assert p.elr == ()  # ISR of 2 >= min.insync.replicas 1
    assert h.controller.tick(h.image, SESSION + 100) == []  # already fenced: nothing more


def test_a_closed_connection_fences_after_the_disconnect_timeout():
    h = empty_harness(broker_session_disconnect_timeout_ms=750)
    up(h, 0, 1, 2, now=0)
    topic(h, "t", 3, 3)
    hb(h, 0, 1000)
    h.controller.broker_disconnected(0, 1100)
    for b in (1, 2):
        hb(h, b, 1800)
    assert h.controller.tick(h.image, 1849) == []  # 749 ms since the close
    records = h.controller.tick(h.image, 1850)  # long before the 9 s session expires
    assert kind(records[-1]) == "fence_broker" and records[-1].fence_broker.broker_id == 0
    assert h.controller.fence_causes == {
        0: "its heartbeat connection closed 750 ms ago and no heartbeat came since "
           "(broker.session.disconnect.timeout.ms=750)"}
    h.image = apply_records(h.image, records)
    assert all(0 not in p.isr for p in h.image.topic("t").partitions.values())


def test_a_heartbeat_after_the_close_keeps_the_broker():
    h = empty_harness(broker_session_disconnect_timeout_ms=750)
    up(h, 0, 1, now=0)
    h.controller.broker_disconnected(0, 100)
    hb(h, 0, 500)  # a new connection
    hb(h, 1, 1000)
    assert h.controller.tick(h.image, 1000) == []
    assert not h.image.brokers[0].fenced
    # the session rule still holds on its own
    hb(h, 1, SESSION)
    assert kind(h.controller.tick(h.image, SESSION + 500)[-1]) == "fence_broker"


def test_disconnects_are_ignored_when_the_timeout_is_off_or_unknown():
    h = empty_harness(broker_session_disconnect_timeout_ms=-1)  # Kafka's behaviour
    up(h, 0, 1, now=0)
    h.controller.broker_disconnected(0, 0)
    h.controller.broker_disconnected(7, 0)  # no session: nothing to do
    hb(h, 1, SESSION - 1)
    assert h.controller.tick(h.image, SESSION - 1) == []
    assert kind(h.controller.tick(h.image, SESSION)[-1]) == "fence_broker"


def test_the_first_close_counts_not_a_later_one():
    h = empty_harness(broker_session_disconnect_timeout_ms=750)
    up(h, 0, 1, now=0)
    h.controller.broker_disconnected(0, 100)
    h.controller.broker_disconnected(0, 800)
    hb(h, 1, 850)
    assert kind(h.controller.tick(h.image, 850)[-1]) == "fence_broker"


def test_fencing_below_min_isr_fills_elr_and_unfence_elects_from_it():
    h = empty_harness()
    up(h, 0, 1)
    topic(h, "t", 1, 2, {"min.insync.replicas": "2"})
    p = h.image.topic("t").partitions[0]
    first, second = p.replicas
    hb(h, first, 0, want_fence=True)
    p = h.image.topic("t").partitions[0]
    assert p.isr == (second,) and p.elr == (first,) and p.leader == second
    hb(h, second, 0, want_fence=True)
    p = h.image.topic("t").partitions[0]
    assert p.isr == () and set(p.elr) == {first, second} and p.leader == -1
    epoch_offline = p.leader_epoch
    # the second broker comes back (caught up): it is elected from the ELR
    hb(h, second, 10)
    p = h.image.topic("t").partitions[0]
    assert p.leader == second and p.isr == (second,) and p.elr == (first,)
    assert p.leader_epoch == epoch_offline + 1


def test_rf1_broker_restart_comes_back_as_leader():
    h = empty_harness()
    up(h, 0)
    topic(h, "t", 2, 1)
    h.image = apply_records(h.image, h.controller.tick(h.image, 0))
    h.image = apply_records(h.image, h.controller.tick(h.image, SESSION + 1))
    assert all(p.leader == -1 and p.elr == (0,) for p in h.image.topic("t").partitions.values())
    # clean restart: same incarnation protocol, previous epoch matches
    r = h.commit(h.controller.register_broker(
        h.image, reg_req(0, gen=1, prev=h.image.brokers[0].epoch), SESSION + 2))
    assert r.error is E.none
    assert hb(h, 0, SESSION + 3).is_fenced is False
    for p in h.image.topic("t").partitions.values():
        assert p.leader == 0 and p.isr == (0,) and p.elr == ()


def test_unclean_restart_leaves_elr():
    h = empty_harness()
    up(h, 0, 1)
    topic(h, "t", 1, 2, {"min.insync.replicas": "2"})
    hb(h, 0, 0, want_fence=True)
    hb(h, 1, 0, want_fence=True)
    assert set(h.image.topic("t").partitions[0].elr) == {0, 1}
    # broker 0 restarts without a clean shutdown record (previous epoch unknown)
    h.commit(h.controller.register_broker(h.image, reg_req(0, gen=1, prev=-1), 1))
    assert h.image.topic("t").partitions[0].elr == (1,)


def test_unclean_leader_election_when_enabled_for_the_topic():
    h = empty_harness()
    up(h, 0, 1)
    topic(h, "t", 1, 2, {"unclean.leader.election.enable": "true"})
    p = h.image.topic("t").partitions[0]
    a, b = p.replicas
    hb(h, b, 0, want_fence=True)   # b leaves the ISR; ISR (a) >= 1 so no ELR
    hb(h, a, 0, want_fence=True)   # a is the last: ISR empties to ELR (a)
    p = h.image.topic("t").partitions[0]
    assert p.leader == -1 and p.elr == (a,)
    hb(h, b, 5)  # b is neither ISR nor ELR, but unclean election is on
    p = h.image.topic("t").partitions[0]
    assert p.leader == b and p.isr == (b,) and p.elr == ()
    assert p.leader_recovery_state == 1  # RECOVERING until the leader says otherwise


def test_no_unclean_election_by_default():
    h = empty_harness()
    up(h, 0, 1)
    topic(h, "t", 1, 2)
    p = h.image.topic("t").partitions[0]
    a, b = p.replicas
    hb(h, b, 0, want_fence=True)
    hb(h, a, 0, want_fence=True)
    hb(h, b, 5)
    p = h.image.topic("t").partitions[0]
    assert p.leader == -1 and b not in p.isr


def test_controlled_shutdown():
    h = empty_harness()
    up(h, 0, 1)
    topic(h, "t", 4, 2)
    out = hb(h, 0, 100, want_shut_down=True)
    assert not out.should_shut_down and not out.is_fenced
    assert h.image.brokers[0].in_controlled_shutdown
    for p in h.image.topic("t").partitions.values():
        assert p.leader == 1 and 0 not in p.isr
    # no new replicas go to a broker shutting down
    [r] = h.commit(h.controller.create_topics(h.image, [CreatableTopic("u", 1, 2)]))
    assert r.error is E.invalid_replication_factor
    # not caught up with the leadership moves yet
    assert hb(h, 0, 200, want_shut_down=True, offset=h.image.offset - 1).should_shut_down is False
    out = hb(h, 0, 300, want_shut_down=True)
    assert out.should_shut_down is True and out.is_fenced is True
    # Kafka's SHUTDOWN_NOW: fenced, and its session is over
    assert h.image.brokers[0].fenced


def test_a_restart_after_a_controlled_shutdown_registers_at_once():
    """Issue 31 point 2: the controlled shutdown ends the session, so the next incarnation
    (the process started again after SIGTERM) is not refused with
    DUPLICATE_BROKER_REGISTRATION for the rest of the old session; a heartbeat of the
    stopped epoch after that (a retry) starts no new session."""
    h = empty_harness()
    up(h, 0, 1)
    topic(h, "t", 2, 2)
    assert hb(h, 0, 100, want_shut_down=True).should_shut_down is False
    assert hb(h, 0, 200, want_shut_down=True).should_shut_down is True
    old_epoch = h.image.brokers[0].epoch
    retried = hb(h, 0, 250, want_shut_down=True)
    assert retried.should_shut_down and retried.is_fenced
    assert h.controller.tick(h.image, 300) == []
    r = h.commit(h.controller.register_broker(h.image, reg_req(0, gen=1, prev=old_epoch), 300))
    assert r.error is E.none and r.broker_epoch > old_epoch
    assert hb(h, 0, 400).is_fenced is False
    # a clean restart (previous epoch named): it stays eligible, its partitions come back
    assert all(0 in p.replicas for p in h.image.topic("t").partitions.values())


def test_without_the_controlled_shutdown_the_old_session_still_refuses():
    """A process that stopped without it (kill -9) left its session alive: the new
    incarnation waits for it to lapse, as in Kafka."""
    h = empty_harness()
    up(h, 0, 1)
    assert hb(h, 0, 1000).is_fenced is False
    r = h.controller.register_broker(h.image, reg_req(0, gen=1), 1000 + SESSION - 1)
    assert r.response.error is E.duplicate_broker_registration
    r = h.controller.register_broker(h.image, reg_req(0, gen=1), 1000 + SESSION)
    assert r.response.error is E.none


def test_fenced_broker_wanting_shutdown_may_go_at_once():
    h = empty_harness()
    h.commit(h.controller.register_broker(h.image, reg_req(3), 0))
    out = hb(h, 3, 1, want_shut_down=True)
    assert out.should_shut_down and out.is_fenced


def test_a_new_controller_fences_a_silent_broker_after_the_activation_grace():
    """Issue 31 point 3. Kafka's new controller gives every unfenced broker a full session
    from its activation, so the partitions of a broker that died with the old controller (a
    combined node) stayed leaderless for broker.session.timeout.ms. Here a broker the new
    controller has not heard from within 2 x broker.heartbeat.interval.ms of its activation
    is fenced; those that heartbeat keep full sessions."""
    h = empty_harness(broker_heartbeat_interval_ms=HEARTBEAT)
    up(h, 0, 1, 2, now=0)
    topic(h, "t", 3, 3)
    led_by_2 = [i for i, p in h.image.topic("t").partitions.items() if p.leader == 2]
    assert led_by_2
    fresh = Harness(h.image, broker_session_timeout_ms=SESSION,
                    broker_heartbeat_interval_ms=HEARTBEAT)
    t0 = 10**9
    fresh.controller.reset_sessions(t0)  # activation
    assert fresh.controller.awaiting_first_heartbeat(fresh.image) == {0, 1, 2}
    assert fresh.controller.tick(fresh.image, t0 + 50) == []
    # the live brokers heartbeat at once when they learn of the new controller
    fresh.controller.heartbeat_received(fresh.image, 0, fresh.image.brokers[0].epoch, t0 + 100)
    assert hb(fresh, 1, t0 + 150).is_fenced is False
    assert fresh.controller.awaiting_first_heartbeat(fresh.image) == {2}
    assert fresh.controller.tick(fresh.image, t0 + GRACE - 1) == []
    records = fresh.controller.tick(fresh.image, t0 + GRACE)
    assert [r.fence_broker.broker_id for r in records if kind(r) == "fence_broker"] == [2]
    fresh.image = apply_records(fresh.image, records)
    for i in led_by_2:
        p = fresh.image.topic("t").partitions[i]
        assert p.leader in (0, 1) and 2 not in p.isr
    # the others' sessions are full ones, from their heartbeats
    assert tick_all(fresh, t0 + 100 + SESSION - 1) == []
    assert [kind(r) for r in tick_all(fresh, t0 + 150 + SESSION)].count("fence_broker") == 2


def test_the_broker_of_the_deposed_controller_is_fenced_after_the_disconnect_timeout():
    """Issue 31 point 3: a combined node killed while it was the active controller. The
    new controller knows which node it replaced; that node's broker gets the disconnect
    rule's wait (broker.session.disconnect.timeout.ms) from the activation instead of the
    activation grace, unless it heartbeats. The other brokers keep the grace."""
    h = empty_harness(broker_heartbeat_interval_ms=HEARTBEAT)
    up(h, 0, 1, 2, now=0)
    topic(h, "t", 3, 3)
    disconnect = 750  # Skiff's default
    fresh = Harness(h.image, broker_session_timeout_ms=SESSION,
                    broker_heartbeat_interval_ms=HEARTBEAT,
                    broker_session_disconnect_timeout_ms=disconnect)
    t0 = 10**9
    fresh.controller.reset_sessions(t0, deposed=2)
    assert fresh.controller.tick(fresh.image, t0 + disconnect - 1) == []
    records = fresh.controller.tick(fresh.image, t0 + disconnect)
    assert [r.fence_broker.broker_id for r in records if kind(r) == "fence_broker"] == [2]
    assert "replaced" in fresh.controller.cluster.fence_causes[2]
    fresh.image = apply_records(fresh.image, records)
    assert all(p.leader in (0, 1) for p in fresh.image.topic("t").partitions.values())
    # the others, silent too, still have the activation grace
    assert fresh.controller.tick(fresh.image, t0 + GRACE - 1) == []
    assert [kind(r) for r in fresh.controller.tick(fresh.image, t0 + GRACE)].count(
        "fence_broker") == 1


def test_a_live_broker_of_the_deposed_controller_keeps_its_session_by_heartbeating():
    h = empty_harness(broker_heartbeat_interval_ms=HEARTBEAT)
    up(h, 0, 1, now=0)
    fresh = Harness(h.image, broker_session_timeout_ms=SESSION,
                    broker_heartbeat_interval_ms=HEARTBEAT,
                    broker_session_disconnect_timeout_ms=750)
    t0 = 10**9
    fresh.controller.reset_sessions(t0, deposed=1)
    fresh.controller.heartbeat_received(fresh.image, 1, fresh.image.brokers[1].epoch, t0 + 100)
    fresh.controller.heartbeat_received(fresh.image, 0, fresh.image.brokers[0].epoch, t0 + 100)
    assert tick_all(fresh, t0 + 100 + SESSION - 1) == []


def test_a_first_heartbeat_waiting_in_the_new_controller_saves_its_broker():
    """The arrival of the first heartbeat (heartbeat_received, before the heartbeat waits its
    turn behind other operations) turns the provisional session into a full one."""
    h = empty_harness(broker_heartbeat_interval_ms=HEARTBEAT)
    up(h, 0, now=0)
    fresh = Harness(h.image, broker_session_timeout_ms=SESSION,
                    broker_heartbeat_interval_ms=HEARTBEAT)
    fresh.controller.reset_sessions(1000)
    fresh.controller.heartbeat_received(fresh.image, 0, fresh.image.brokers[0].epoch, 1200)
    assert fresh.controller.tick(fresh.image, 1000 + GRACE) == []
    assert fresh.controller.tick(fresh.image, 1200 + SESSION - 1) == []


def test_the_activation_grace_is_at_most_a_session():
    h = empty_harness(broker_heartbeat_interval_ms=5000)
    up(h, 0, now=0)
    h.controller.reset_sessions(0)
    assert h.controller.tick(h.image, SESSION - 1) == []
    assert [kind(r) for r in h.controller.tick(h.image, SESSION)] == ["fence_broker"]


def test_a_new_incarnation_waits_only_for_the_activation_grace():
    """A combined node killed and started again: its new controller carries the old
    incarnation's registration over, unfenced. The new incarnation is refused
    (DUPLICATE_BROKER_REGISTRATION, as Kafka refuses it for a whole session) until the
    activation grace has passed, then accepted."""
    h = empty_harness(broker_heartbeat_interval_ms=HEARTBEAT)
    up(h, 0, now=0)
    fresh = Harness(h.image, broker_session_timeout_ms=SESSION,
                    broker_heartbeat_interval_ms=HEARTBEAT)
    fresh.controller.reset_sessions(50_000)
    r = fresh.controller.register_broker(fresh.image, reg_req(0, gen=1), 50_100)
    assert r.response.error is E.duplicate_broker_registration
    r = fresh.controller.register_broker(fresh.image, reg_req(0, gen=1), 50_000 + GRACE)
    assert r.response.error is E.none


def test_a_new_controller_unfences_only_a_caught_up_broker():
    """A broker that registered with the previous controller and has not applied its
    registration yet (restarted, still reading the metadata log) stays fenced when it
    heartbeats the next one; it is unfenced once it has applied what that controller had."""
    h = empty_harness(broker_heartbeat_interval_ms=HEARTBEAT)
    up(h, 0, now=0)
    before = h.image.offset
    assert h.commit(h.controller.register_broker(h.image, reg_req(1), 10)).error is E.none
    assert h.image.brokers[1].fenced
    fresh = Harness(h.image, broker_session_timeout_ms=SESSION,
                    broker_heartbeat_interval_ms=HEARTBEAT)
    fresh.controller.reset_sessions(1000)
    behind = hb(fresh, 1, 1100, offset=before)
    assert behind.is_fenced and not behind.is_caught_up
    assert fresh.image.brokers[1].fenced
    caught_up = hb(fresh, 1, 1200, offset=h.image.offset)
    assert not caught_up.is_fenced and caught_up.is_caught_up
    assert not fresh.image.brokers[1].fenced


def test_unregister_broker():
    h = empty_harness()
    up(h, 0, 1)
    topic(h, "t", 2, 2)
    code, _ = h.commit(h.controller.unregister_broker(h.image, 0))
    assert code is E.none and 0 not in h.image.brokers
    assert all(0 not in p.isr and p.leader == 1 for p in h.image.topic("t").partitions.values())
    code, _ = h.controller.unregister_broker(h.image, 0).response
    assert code is E.broker_id_not_registered


def test_epochs_stay_monotonic_across_unregistration():
    h = empty_harness()
    up(h, 0)
    e0 = h.image.brokers[0].epoch
    h.commit(h.controller.unregister_broker(h.image, 0))
    r = h.commit(h.controller.register_broker(h.image, reg_req(0, gen=1), 1))
    assert r.broker_epoch > e0


def test_allocate_producer_ids():
    h = empty_harness()
    up(h, 0)
    epoch = h.image.brokers[0].epoch
    a = h.commit(h.controller.allocate_producer_ids(h.image, 0, epoch))
    b = h.commit(h.controller.allocate_producer_ids(h.image, 0, epoch))
    assert (a.producer_id_start, a.producer_id_len) == (0, PRODUCER_ID_BLOCK_SIZE)
    assert b.producer_id_start == PRODUCER_ID_BLOCK_SIZE
    assert h.image.next_producer_id == 2 * PRODUCER_ID_BLOCK_SIZE
    assert h.controller.allocate_producer_ids(h.image, 0, epoch + 1).response.error is \
        E.stale_broker_epoch
    assert h.controller.allocate_producer_ids(h.image, 7, 1).response.error is \
        E.broker_id_not_registered


def test_bootstrap_records_only_on_an_empty_log():
    from broker.controller import Controller
    boot = [rec.feature_level_record("metadata.version", 27)]
    assert Controller.bootstrap_records(MetadataImage.empty(CID), boot) == boot
    after_leader_change = MetadataImage(cluster_id=CID, offset=0, epoch=1)
    assert Controller.bootstrap_records(after_leader_change, boot) == boot
    with_levels = apply_records(MetadataImage.empty(CID), boot, 0, 1)
    assert Controller.bootstrap_records(with_levels, boot) == []


def test_a_controller_active_again_starts_sessions_afresh():
    """Sessions kept from an earlier term would fence live brokers at the first tick after
    this node becomes active again; reset_sessions (called on activation) starts each
    unfenced broker's session afresh from the activation (provisional until it
    heartbeats)."""
    h = empty_harness()
    up(h, 0, 1, now=0)
    assert h.controller.tick(h.image, 1000) == []
    # another controller took the heartbeats for a while; this one is active again
    h.controller.reset_sessions(SESSION + 5000)
    assert h.controller.tick(h.image, SESSION + 5000) == []  # a fresh session, not expired
    for b in (0, 1):
        assert hb(h, b, SESSION + 5100).is_fenced is False
    assert tick_all(h, 2 * SESSION + 5099) == []
    records = tick_all(h, 2 * SESSION + 5100)  # no heartbeat since: expired
    assert [kind(r) for r in records].count("fence_broker") == 2


def test_a_heartbeat_waiting_in_the_controller_keeps_its_broker():
    """A heartbeat that reached the controller but waits behind earlier operations (each
    waits for its records to commit) shows its broker alive: tick does not fence it however
    long it waits. Under a busy controller every broker's heartbeats wait, and fencing them
    all moved every leadership and ISR at once (the EOS chaos run: brokers [1, 2, 3] fenced
    together, again and again). Once it has left (processed or failed) the session rule is
    back; a broker with nothing waiting is fenced as before."""
    h = empty_harness()
    up(h, 0, 1, 2, now=0)
    topic(h, "t", 3, 3)
    h.controller.heartbeat_arrived(0)
    h.controller.heartbeat_arrived(1)
    h.controller.heartbeat_arrived(1)  # a retry on another connection, say
    h.controller.heartbeat_left(1)
    records = h.controller.tick(h.image, SESSION + 5000)
    fenced = [r.fence_broker.broker_id for r in records if kind(r) == "fence_broker"]
    assert fenced == [2]  # nothing of its waits: the session rule
    h.image = apply_records(h.image, records)
    assert not h.image.brokers[0].fenced and not h.image.brokers[1].fenced
    # the waiting heartbeats are processed: sessions go on from then
    h.controller.heartbeat_left(0)
    h.controller.heartbeat_left(1)
    hb(h, 0, SESSION + 6000)
    hb(h, 1, SESSION + 6000)
    assert h.controller.tick(h.image, SESSION + 6000) == []
    h.controller.heartbeat_arrived(0)
    records = h.controller.tick(h.image, 2 * SESSION + 6000)
    assert [r.fence_broker.broker_id for r in records if kind(r) == "fence_broker"] == [1]
    h.image = apply_records(h.image, records)
    h.controller.heartbeat_left(5)  # unknown broker, or more lefts than arrivals: nothing
    h.controller.heartbeat_left(0)
    h.controller.heartbeat_left(0)
    records = h.controller.tick(h.image, 3 * SESSION + 6000)
    assert [r.fence_broker.broker_id for r in records if kind(r) == "fence_broker"] == [0]


def test_a_heartbeat_queued_behind_a_long_operation_keeps_the_session():
    """The shell calls heartbeat_received when a heartbeat arrives; the heartbeat itself may
    be processed seconds later, behind a big CreateTopics being committed. The tick that
    runs before it must count the session from the arrival, not fence the broker (issue
    17: every broker fenced while the controller committed 100,000 partitions)."""
    h = empty_harness()
    up(h, 0, 1, now=0)
    # heartbeats arrive at 5000 and 8000 ms; the controller is busy until 12000 ms
    for arrival in (5000, 8000):
        for b in (0, 1):
            h.controller.heartbeat_received(h.image, b, h.image.brokers[b].epoch, arrival)
    assert h.controller.tick(h.image, 12000) == []  # 12000 - 8000 < SESSION
    assert not h.image.brokers[0].fenced
    # the queued heartbeats are then processed: an earlier clock never shortens the session
    assert hb(h, 0, 5000).is_fenced is False
    assert h.controller.tick(h.image, 8000 + SESSION - 1) == []
    # without heartbeats the session still expires
    records = tick_all(h, 8000 + SESSION)
    assert [kind(r) for r in records].count("fence_broker") == 2


def test_heartbeat_received_renews_only_the_current_registration():
    """An arrival of a stale epoch or of an unknown broker renews nothing; nor does one for a
    fenced broker (its session ended with the fence: broker_heartbeat starts the next)."""
    h = empty_harness()
    up(h, 0, now=0)
    epoch = h.image.brokers[0].epoch
    h.controller.heartbeat_received(h.image, 0, epoch - 1, SESSION - 1)  # stale epoch
    h.controller.heartbeat_received(h.image, 7, epoch, SESSION - 1)  # not registered
    records = h.controller.tick(h.image, SESSION)
    assert [kind(r) for r in records] == ["fence_broker"]
    h.image = apply_records(h.image, records)
    h.controller.heartbeat_received(h.image, 0, epoch, SESSION + 10)
    assert h.image.brokers[0].fenced
    assert hb(h, 0, SESSION + 20).is_fenced is False  # the heartbeat itself unfences


def test_one_broker_is_fenced_per_tick():
    """After a stall of the controller every session may look expired while the heartbeats
    that renew them wait to be read: a tick fences one broker (Kafka fences one stale broker
    per event), and a heartbeat that arrives before the next tick saves the others."""
    h = empty_harness()
    up(h, 0, 1, 2, now=0)
    records = h.controller.tick(h.image, SESSION + 3000)
    assert [kind(r) for r in records].count("fence_broker") == 1
    h.image = apply_records(h.image, records)
    assert h.image.brokers[0].fenced and not h.image.brokers[1].fenced
    for b in (1, 2):
        h.controller.heartbeat_received(h.image, b, h.image.brokers[b].epoch, SESSION + 3050)
    assert h.controller.tick(h.image, SESSION + 3100) == []
    assert not h.image.brokers[1].fenced and not h.image.brokers[2].fenced


def test_cordoned_log_dirs_from_heartbeats_steer_placement():
    """KIP-1066: heartbeats carry the cordoned directories from metadata.version 4.3-IV0 on;
    a broker whose every directory is cordoned gets no new replica, and when that leaves
    too few brokers CreateTopics is INVALID_REPLICATION_FACTOR with Kafka's words."""
    from broker.metadata.features import MV_4_2_IV1, MV_4_3_IV0
    from broker.metadata.snapshot import decode_snapshot, encode_snapshot

    dirs = {b: (uuid.UUID(int=100 + 2 * b), uuid.UUID(int=101 + 2 * b)) for b in (1, 2)}
    for level, gated in ((MV_4_2_IV1, True), (MV_4_3_IV0, False)):
        img = apply_records(MetadataImage.empty(CID), [
            rec.feature_level_record("metadata.version", level)], 0, 1)
        h = Harness(img, broker_session_timeout_ms=SESSION)
        for b in (1, 2):
            req = reg_req(b, features=[("metadata.version", 21, 33)])
            req = dataclasses.replace(req, log_dirs=dirs[b])
            assert h.commit(h.controller.register_broker(h.image, req, 0)).error is E.none
            assert hb(h, b, 0).is_fenced is False
        # broker 1 cordons one directory, then both; None (not caught up) changes nothing
        hb(h, 1, 10, cordoned_log_dirs=[dirs[1][0]])
        hb(h, 2, 10, cordoned_log_dirs=None)
        want = frozenset() if gated else frozenset({dirs[1][0]})
        assert h.image.brokers[1].cordoned_log_dirs == want
        assert h.image.brokers[1].has_uncordoned_dirs
        hb(h, 1, 20, cordoned_log_dirs=list(dirs[1]))
        if gated:
            assert h.image.brokers[1].cordoned_log_dirs == frozenset()
            topic(h, "both", 4, 2)
            continue
        assert not h.image.brokers[1].has_uncordoned_dirs
        t = topic(h, "only-2", 4, 1)
        assert {r for p in t.partitions.values() for r in p.replicas} == {2}
        [r] = h.controller.create_topics(h.image, [CreatableTopic("rf2", 1, 2)]).response
        assert r.error is E.invalid_replication_factor
        assert "cannot be reached because only 1 broker(s) are registered or some brokers " \
               "have all their log directories cordoned" in (r.message or "")
        # a manual assignment naming broker 1 is refused, as Kafka's
        # validateManualPartitionAssignment: CreateTopics, CreatePartitions, a reassignment
        cordoned = ("The manual partition assignment includes broker 1, but all its log "
                    "directories are cordoned.")
        [r] = h.controller.create_topics(h.image, [
            CreatableTopic("manual", assignments={0: [2, 1]})]).response
        assert (r.error, r.message) == (E.invalid_replica_assignment, cordoned)
        [r] = h.controller.create_partitions(h.image, [
            CreatePartitionsTopic("only-2", 5, [[1]])]).response
        assert (r.error, r.message) == (E.invalid_replica_assignment, cordoned)
        [r] = h.controller.alter_partition_reassignments(h.image, [("only-2", 0, [2, 1])]) \
            .response
        assert (r.error, r.message) == (E.invalid_replica_assignment, cordoned)
        [r] = h.controller.create_topics(h.image, [
            CreatableTopic("manual", assignments={0: [2]})]).response
        assert r.error is E.none
        # the registration keeps its cordoned dirs through a snapshot
        again = decode_snapshot(encode_snapshot(h.image))
        assert again.brokers[1].cordoned_log_dirs == frozenset(dirs[1])
        hb(h, 1, 30, cordoned_log_dirs=[])
        assert h.image.brokers[1].has_uncordoned_dirs
