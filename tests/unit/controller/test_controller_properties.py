"""Random broker churn against the controller, with invariants checked after every step."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from test_brokers import empty_harness, reg_req, topic, up

from broker.controller import AlterPartitionItem, AlterPartitionRequest, BrokerHeartbeatRequest
from broker.metadata import MetadataImage, apply_records

BROKERS = range(4)

event = st.one_of(
    st.tuples(st.just("fence"), st.sampled_from(BROKERS)),
    st.tuples(st.just("heartbeat"), st.sampled_from(BROKERS)),
    st.tuples(st.just("shutdown"), st.sampled_from(BROKERS)),
    st.tuples(st.just("restart"), st.sampled_from(BROKERS), st.booleans()),
    st.tuples(st.just("tick"), st.integers(0, 12_000)),
    st.tuples(st.just("shrink"), st.integers(0, 7)),
    st.tuples(st.just("expand"), st.integers(0, 7)),
    st.tuples(st.just("reassign"), st.integers(0, 7),
              st.permutations(list(BROKERS)), st.integers(1, 4)),
    st.tuples(st.just("cancel"), st.integers(0, 7)),
)


def check(before: MetadataImage, after: MetadataImage, isr_grew: bool = False) -> None:
    t0, t1 = before.topic("t"), after.topic("t")
    for i, p in t1.partitions.items():
        old = t0.partitions[i]
        assert set(p.isr) <= set(p.replicas) and set(p.elr) <= set(p.replicas)
        assert set(p.adding_replicas) <= set(p.replicas)
        assert set(p.removing_replicas) <= set(p.replicas)
        assert not set(p.adding_replicas) & set(p.removing_replicas)
        assert len(set(p.replicas)) == len(p.replicas)
        assert not set(p.isr) & set(p.elr)
        assert len(p.isr) >= 1 or p.leader == -1
        if p.leader != -1:
            assert p.leader in p.isr and after.is_alive(p.leader)
            assert not after.brokers[p.leader].in_controlled_shutdown
        if len(p.isr) >= 2:  # min.insync.replicas
            assert p.elr == ()
        assert p.partition_epoch >= old.partition_epoch
        assert p.leader_epoch >= old.leader_epoch
        if p.leader != old.leader:
            assert p.leader_epoch > old.leader_epoch
            # clean elections only: the new leader held all committed data (a reassignment
            # completing in the ISR change that admitted it may pick a just-admitted member)
            # ... or, once ISR and ELR are both empty, the last known leader coming back
            # (KIP-966's step before unclean elections; partitions.elect_leader)
            assert (p.leader == -1 or p.leader in old.isr or p.leader in old.elr
                    or (isr_grew and p.leader in p.isr)
                    or (not old.isr and not old.elr and p.leader in old.last_known_elr))
        if p != old:
            assert p.partition_epoch > old.partition_epoch


@settings(max_examples=60, deadline=None)
@given(events=st.lists(event, max_size=40))
def test_invariants_under_churn(events):
    h = empty_harness()
    up(h, *BROKERS)
    topic(h, "t", 8, 3, {"min.insync.replicas": "2"})
    now = 0
    gen = dict.fromkeys(BROKERS, 0)
    for ev in events:
        now += 500
        before = h.image
        kind = ev[0]
        isr_grew = kind == "expand"
        if kind == "tick":
            now += ev[1]
            records = h.controller.tick(h.image, now)
            if records:
                h.image = apply_records(h.image, records, h.image.offset + len(records), 1)
        elif kind in ("fence", "heartbeat", "shutdown"):
            b = ev[1]
            reg = h.image.brokers[b]
            h.commit(h.controller.broker_heartbeat(h.image, BrokerHeartbeatRequest(
                b, reg.epoch, h.image.offset, want_fence=kind == "fence",
                want_shut_down=kind == "shutdown"), now))
        elif kind == "restart":
            b, clean = ev[1], ev[2]
            gen[b] += 1
            prev = h.image.brokers[b].epoch if clean else -1
            h.commit(h.controller.register_broker(h.image, reg_req(b, gen=gen[b], prev=prev),
                                                  now + 10**6))
            now += 10**6
        elif kind == "reassign":
            _, idx, order, n = ev
            h.commit(h.controller.alter_partition_reassignments(h.image,
                                                                [("t", idx, order[:n])]))
        elif kind == "cancel":
            h.commit(h.controller.alter_partition_reassignments(h.image, [("t", ev[1], None)]))
        else:
            p = h.image.topic("t").partitions[ev[1]]
            if p.leader == -1:
                continue
            if kind == "shrink":
                isr = [p.leader]
            else:
                isr = [r for r in p.replicas if h.image.is_alive(r)
                       and not h.image.brokers[r].in_controlled_shutdown]
            item = AlterPartitionItem(ev[1], p.leader_epoch, p.partition_epoch,
                                      [(r, h.image.brokers[r].epoch) for r in isr])
            h.commit(h.controller.alter_partition(h.image, AlterPartitionRequest(
                p.leader, h.image.brokers[p.leader].epoch, [(h.image.topic("t").topic_id,
                                                             [item])])))
        check(before, h.image, isr_grew)
