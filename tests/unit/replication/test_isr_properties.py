"""Hypothesis state machine over a leader Partition: appends, follower fetches, time,
ISR shrink/expand proposals answered (or refused) by a controller model, and metadata
that overtakes answers. Invariants after every step: the high watermark never goes back,
never passes the log end of the leader or of any replica in the maximal ISR, and only
moves while the committed ISR has min.insync.replicas members."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)
from kio.schema.errors import ErrorCode

from broker.log import LogConfig, PartitionLog, TopicPartition
from broker.replication.partition import Partition, PendingIsrChange
from broker.testing.inprocess_cluster import batch, now_ms

LAG_MS = 1000
FOLLOWERS = (2, 3)


class IsrMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp())
        self.ms = now_ms()
        self.plog = PartitionLog(self.tmp / "t-0", TopicPartition("t", 0), LogConfig(),
                                 clock=lambda: self.ms)
        self.part = Partition(topic="t", index=0, topic_id=None, log=self.plog,
                              clock=lambda: self.ms, node_id=1)
        self.leo = {2: 0, 3: 0}
        self.controller_epoch = 0  # the partition epoch the controller holds
        self.in_flight: PendingIsrChange | None = None
        self.last_hw = 0
        self.isr_before: tuple[int, ...] = ()

    @initialize(isr=st.sampled_from([(1, 2, 3), (1, 2), (1, 3)]))
    def lead(self, isr: tuple[int, ...]) -> None:
        self.part.become_leader(leader_epoch=0, partition_epoch=0, replicas=(1, 2, 3),
                                isr=isr, min_insync_replicas=2)
        self.isr_before = isr

    def teardown(self) -> None:
        self.plog.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _step(self) -> None:
        self.isr_before = self.part.isr
        self.last_hw = self.part.high_watermark

    @rule(n=st.integers(1, 3))
    def append(self, n: int) -> None:
        self._step()
        for _ in range(n):
            self.part.append_as_leader(batch(b"v", ts=self.ms), required_acks=1)

    @rule(r=st.sampled_from(FOLLOWERS), k=st.integers(0, 4))
    def fetch(self, r: int, k: int) -> None:
        self._step()
        self.leo[r] = min(self.leo[r] + k, self.plog.log_end_offset)
        self.part.update_follower(r, self.leo[r])
        pending = self.part.maybe_expand_isr(r, self.ms)
        if pending is not None:
            assert self.in_flight is None
            assert r in pending.new_isr and pending.expand
            self.in_flight = pending

    @rule(ms=st.integers(1, 1500))
    def tick(self, ms: int) -> None:
        self._step()
        self.ms += ms
        pending = self.part.maybe_shrink_isr(self.ms, LAG_MS)
        if pending is not None:
            assert self.in_flight is None
            assert 1 in pending.new_isr and not pending.expand
            self.in_flight = pending

    @precondition(lambda self: self.in_flight is not None)
    @rule(accept=st.booleans(), metadata_first=st.booleans())
    def answer(self, accept: bool, metadata_first: bool) -> None:
        self._step()
        pending = self.in_flight
        assert pending is not None
        self.in_flight = None
        if not accept or pending.partition_epoch != self.controller_epoch:
            self.part.apply_isr_result(pending, error=ErrorCode.invalid_update_version,
                                       retry_after_ms=self.ms + 100)
            assert self.part.pending_isr is None
            return
        self.controller_epoch += 1
        if metadata_first:
            self.part.become_leader(leader_epoch=0, partition_epoch=self.controller_epoch,
                                    replicas=(1, 2, 3), isr=pending.new_isr,
                                    min_insync_replicas=2)
        self.part.apply_isr_result(pending, error=ErrorCode.none, isr=pending.new_isr,
                                   leader_epoch=0, partition_epoch=self.controller_epoch)
        if not metadata_first:
            self.part.become_leader(leader_epoch=0, partition_epoch=self.controller_epoch,
                                    replicas=(1, 2, 3), isr=pending.new_isr,
                                    min_insync_replicas=2)
        assert self.part.isr == pending.new_isr
        assert self.part.partition_epoch == self.controller_epoch

    @invariant()
    def high_watermark_rules(self) -> None:
        p = self.part
        if p.leader_epoch < 0:
            return  # before `lead`
        hw = p.high_watermark
        assert hw >= self.last_hw, "the high watermark went back"
        assert hw <= self.plog.log_end_offset
        for r in p.maximal_isr:
            if r != 1:
                assert hw <= self.leo[r], (r, hw, self.leo)
        if hw > self.last_hw:
            assert len(self.isr_before) >= 2 or len(p.isr) >= 2, (self.isr_before, p.isr)
        assert 1 in p.isr
        assert (p.pending_isr is None) == (self.in_flight is None) or p.pending_isr is None


IsrMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=40,
                                        deadline=None)
TestIsr = IsrMachine.TestCase
