"""The transaction coordinator of one __transaction_state partition: a pure state machine.

Transaction states (Kafka's TransactionState; the id is what TransactionStatus stores) and
every transition, with what causes it:

    (new id)          -> Empty              InitProducerId of an unknown transactional id
                                            (a new producer id, epoch 0)
    Empty             -> Empty              InitProducerId: epoch bump (or a new producer id
                                            when the epoch is exhausted); a KIP-360 retry
    Empty             -> Ongoing            AddPartitionsToTxn / AddOffsetsToTxn
    Empty             -> Dead               transactional.id.expiration.ms without activity
    Ongoing           -> Ongoing            AddPartitionsToTxn / AddOffsetsToTxn with new
                                            partitions
    Ongoing           -> PrepareCommit      EndTxn(commit)
    Ongoing           -> PrepareAbort       EndTxn(abort)
    Ongoing           -> PrepareEpochFence  InitProducerId of a newer producer (the zombie is
                                            fenced by an epoch bump), or transaction.timeout.ms
                                            passed (the coordinator aborts it)
    PrepareEpochFence -> PrepareAbort       at once, with the bumped epoch (never persisted)
    PrepareCommit     -> CompleteCommit     every partition acknowledged its COMMIT marker
    PrepareAbort      -> CompleteAbort      every partition acknowledged its ABORT marker
    CompleteCommit    -> Empty | Ongoing | Dead    as Empty
    CompleteAbort     -> Empty | Ongoing | Dead    as Empty
    Dead              -> (none)             the id is forgotten once its tombstone is written

Every other pair is refused (IllegalTransition). A transition first becomes the transaction's
pending state; it is applied when its record is replicated to the ISR (`write_completed`),
and dropped when the write fails. While a transition is pending, requests get
CONCURRENT_TRANSACTIONS. PrepareCommit/PrepareAbort, once written, ask the shell to send
WriteTxnMarkers to every partition's leader (`MarkerSend`); `markers_completed` then writes
CompleteCommit/CompleteAbort. A coordinator loaded from the log resumes every transaction
found in PrepareCommit/PrepareAbort by sending its markers again (`finish_loading`).

Requests answer as Kafka's TransactionCoordinator does:
    InitProducerId   Prepare*: CONCURRENT_TRANSACTIONS; Ongoing: the producer is fenced and
                     its transaction aborted, the caller gets CONCURRENT_TRANSACTIONS and
                     retries (and then gets the epoch after the fence); KIP-360: a given
                     producer id/epoch must match the current or the last epoch, else
                     PRODUCER_FENCED
    AddPartitions    unknown id or other producer id: INVALID_PRODUCER_ID_MAPPING; other
                     epoch: PRODUCER_FENCED; Prepare*/pending: CONCURRENT_TRANSACTIONS
    EndTxn           as AddPartitions; Complete*/Prepare* of the same result: NONE /
                     CONCURRENT_TRANSACTIONS (a retry); of the other result, or Empty:
                     INVALID_TXN_STATE
    VerifyPartitions (AddPartitionsToTxn v4+ verify_only, KIP-890 part 1) no state change:
                     unknown id or other producer id INVALID_PRODUCER_ID_MAPPING, other
                     epoch PRODUCER_FENCED, Prepare* CONCURRENT_TRANSACTIONS, else each
                     partition NONE if in the transaction, TRANSACTION_ABORTABLE if not

Transactions V2 (KIP-890 part 2: EndTxn v5, AddPartitionsToTxn v5 from a leader, whose
transaction is then marked `client_tv2`, the ClientTransactionVersion Kafka records):
EndTxn bumps the epoch (Ongoing -> Prepare* at epoch + 1, the markers carry it, the answer
returns it); when that exhausts the epoch a fresh producer id is taken (NextProducerId) and
becomes the producer id, at epoch 0, with Complete*. A retry of EndTxn comes with the old
epoch: Prepare*/Complete* at epoch + 1 (or at epoch 0 of the next producer id after an
overflow) count as the retried call, anything else with another epoch is PRODUCER_FENCED.

Timers (`tick(now_ms)`): every transaction.abort.timed.out.transaction.cleanup.interval.ms,
Ongoing transactions older than their timeout are fenced and aborted; every
transaction.remove.expired.transaction.cleanup.interval.ms, ids idle in Empty/Complete*
for transactional.id.expiration.ms are removed (tombstone).

Inputs are method calls with `now_ms`; outputs are `Effects`: replies to complete (by token),
records to write to this partition, and markers to send.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from broker.coordinator.core import CoordinatorCore, Reply, WriteDone
from broker.txn.records import TopicPartition, TransactionLogValue

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_PRODUCER_EPOCH = 32767


class TxnState(enum.IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name Kafka's tools and DescribeTransactions/ListTransactions use."""
        return _NAMES[self]

    @classmethod
    def from_kafka_name(cls, name: str) -> TxnState | None:
        return _BY_NAME.get(name)


_NAMES = {
    TxnState.EMPTY: "Empty", TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit", TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit", TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead", TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {v: k for k, v in _NAMES.items()}

S = TxnState
# to-state -> the states it may be reached from (the table above)
TRANSITIONS: dict[TxnState, frozenset[TxnState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.EMPTY, S.ONGOING, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}


class IllegalTransition(Exception):
    def __init__(self, transactional_id: str, old: TxnState, new: TxnState) -> None:
        super().__init__(f"transaction {transactional_id!r}: {old.kafka_name} -> "
                         f"{new.kafka_name} is not a transition")
        self.old, self.new = old, new


def check_transition(transactional_id: str, old: TxnState, new: TxnState) -> None:
    if old not in TRANSITIONS[new]:
        raise IllegalTransition(transactional_id, old, new)


def is_epoch_exhausted(epoch: int) -> bool:
    """Kafka bumps the epoch one last time when fencing; a producer at MAX-1 gets a new id."""
    return epoch >= MAX_PRODUCER_EPOCH - 1


Token = int


class ConfigLookup(Protocol):
    """A node's config by key: NodeConfig, or a plain mapping in tests."""

    def __getitem__(self, key: str, /) -> object: ...


@dataclass(frozen=True, slots=True)
class TxnConfig:
    max_timeout_ms: int = 900000
    abort_interval_ms: int = 10000
    remove_interval_ms: int = 3600000
    id_expiration_ms: int = 604800000

    @classmethod
    def from_node_config(cls, cfg: ConfigLookup) -> TxnConfig:
        def get(key: str) -> int:
            value: Any = cfg[key]
            return int(value)

        return cls(
            max_timeout_ms=get("transaction.max.timeout.ms"),
            abort_interval_ms=get("transaction.abort.timed.out.transaction.cleanup.interval.ms"),
            remove_interval_ms=get("transaction.remove.expired.transaction.cleanup.interval.ms"),
            id_expiration_ms=get("transactional.id.expiration.ms"),
        )


@dataclass(slots=True)
class TxnMetadata:
    """One transactional id as this coordinator knows it (Kafka's TransactionMetadata)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition] = frozenset()
    start_ms: int = -1
    last_update_ms: int = -1
    previous_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    pending: TxnState | None = None
    client_tv2: bool = False  # the transaction is of transactions V2 (KIP-890 part 2)
    next_producer_id: int = NO_PRODUCER_ID  # V2: taken when EndTxn exhausted the epoch

    def value(self) -> TransactionLogValue:
        return TransactionLogValue(
            producer_id=self.producer_id, producer_epoch=self.producer_epoch,
            timeout_ms=self.timeout_ms, state=int(self.state), partitions=self.partitions,
            last_update_ms=self.last_update_ms, start_ms=self.start_ms,
            previous_producer_id=self.previous_producer_id,
            next_producer_id=self.next_producer_id,
            client_transaction_version=2 if self.client_tv2 else 0,
        )


@dataclass(frozen=True, slots=True)
class Target:
    """What a pending transition will make of a transaction once written."""

    state: TxnState
    producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    previous_producer_id: int
    timeout_ms: int
    partitions: frozenset[TopicPartition]
    start_ms: int
    last_update_ms: int
    client_tv2: bool = False
    next_producer_id: int = NO_PRODUCER_ID


@dataclass(frozen=True, slots=True)
class Write:
    write_id: int
    transactional_id: str
    value: TransactionLogValue | None  # None: tombstone


@dataclass(frozen=True, slots=True)
class MarkerSend:
    """WriteTxnMarkers for one transaction: one marker per partition, to its leader."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    committed: bool
    partitions: frozenset[TopicPartition]


@dataclass(slots=True)
class Effects:
    replies: list[Reply] = field(default_factory=list)
    writes: list[Write] = field(default_factory=list)
    markers: list[MarkerSend] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class InitResult:
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


NEED_PRODUCER_ID = InitResult(ErrorCode.none, -2, -2)
"""Returned by init_producer_id when it needs a fresh producer id: call again with one."""


@dataclass(frozen=True, slots=True)
class EndResult:
    """EndTxn's answer: the error and, on success, the producer id and epoch the
    producer goes on with (EndTxn v5 returns them)."""

    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


NEED_NEXT_PRODUCER_ID = EndResult(ErrorCode.none, -2, -2)
"""Returned by a V2 end_txn that exhausts the epoch: call again with a fresh id."""


@dataclass(frozen=True, slots=True)
class TxnDescription:
    transactional_id: str
    state: TxnState
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_ms: int
    last_update_ms: int
    partitions: frozenset[TopicPartition]


_WRITE_ERRORS_COORDINATOR = {
    ErrorCode.unknown_topic_or_partition, ErrorCode.not_enough_replicas,
    ErrorCode.not_enough_replicas_after_append, ErrorCode.request_timed_out,
}


def map_write_error(error: ErrorCode) -> ErrorCode:
    """Kafka's mapping of an append failure on __transaction_state to the client's error."""
    if error in _WRITE_ERRORS_COORDINATOR:
        return ErrorCode.coordinator_not_available
    if error in (ErrorCode.not_leader_or_follower, ErrorCode.kafka_storage_error,
                 ErrorCode.not_coordinator):
        return ErrorCode.not_coordinator
    return ErrorCode.unknown_server_error


class TransactionCoordinator(CoordinatorCore[Effects]):
    """Transactions of one __transaction_state partition, at one coordinator epoch (the
    partition's leader epoch, which markers carry)."""

    def __init__(self, config: TxnConfig, coordinator_epoch: int, now_ms: int) -> None:
        super().__init__(Effects)
        self.config = config
        self.coordinator_epoch = coordinator_epoch
        self.txns: dict[str, TxnMetadata] = {}
        self._unwritten_complete: set[str] = set()  # CompleteX whose write failed: retry
        self.next_abort_check_ms = now_ms + config.abort_interval_ms
        self.next_expire_check_ms = now_ms + config.remove_interval_ms
        self.loaded = False

    # ---- plumbing ----------------------------------------------------------------------

    def _write(self, tid: str, value: TransactionLogValue | None, done: WriteDone) -> None:
        self._emit(lambda write_id: Write(write_id, tid, value), done)

    def _transit(self, meta: TxnMetadata, target: Target,
                 done: Callable[[ErrorCode, int], None]) -> None:
        """Make `target` the pending transition of `meta` and write it; `done` runs when
        the write ends (after the transition was applied, or dropped on an error)."""
        check_transition(meta.transactional_id, meta.state, target.state)
        meta.pending = target.state
        value = TransactionLogValue(
            producer_id=target.producer_id, producer_epoch=target.producer_epoch,
            timeout_ms=target.timeout_ms, state=int(target.state),
            partitions=target.partitions, last_update_ms=target.last_update_ms,
            start_ms=target.start_ms, previous_producer_id=target.previous_producer_id,
            next_producer_id=target.next_producer_id,
            client_transaction_version=2 if target.client_tv2 else 0,
        )
        tid = meta.transactional_id

        def written(error: ErrorCode, now: int) -> None:
            current = self.txns.get(tid)
            if current is not meta:
                done(ErrorCode.not_coordinator, now)
                return
            meta.pending = None
            if error is ErrorCode.none:
                self._apply(meta, target)
            done(error, now)

        self._write(tid, None if target.state is S.DEAD else value, written)

    def _apply(self, meta: TxnMetadata, t: Target) -> None:
        check_transition(meta.transactional_id, meta.state, t.state)
        meta.state = t.state
        meta.producer_id = t.producer_id
        meta.producer_epoch = t.producer_epoch
        meta.last_producer_epoch = t.last_producer_epoch
        meta.previous_producer_id = t.previous_producer_id
        meta.timeout_ms = t.timeout_ms
        meta.partitions = t.partitions
        meta.start_ms = t.start_ms
        meta.last_update_ms = t.last_update_ms
        meta.client_tv2 = t.client_tv2
        meta.next_producer_id = t.next_producer_id
        if t.state is S.DEAD:
            self.txns.pop(meta.transactional_id, None)

    @staticmethod
    def _target(meta: TxnMetadata, state: TxnState, now_ms: int, **changes: object) -> Target:
        base = Target(
            state=state, producer_id=meta.producer_id, producer_epoch=meta.producer_epoch,
            last_producer_epoch=meta.last_producer_epoch,
            previous_producer_id=meta.previous_producer_id, timeout_ms=meta.timeout_ms,
            partitions=meta.partitions, start_ms=meta.start_ms, last_update_ms=now_ms,
            client_tv2=meta.client_tv2, next_producer_id=meta.next_producer_id,
        )
        return replace(base, **changes)  # type: ignore[arg-type]

    # ---- loading -----------------------------------------------------------------------

    def replay(self, transactional_id: str, value: TransactionLogValue | None) -> None:
        """One record of the partition, in log order (the last one per id wins)."""
        if value is None:
            self.txns.pop(transactional_id, None)
            return
        try:
            state = TxnState(value.state)
        except ValueError:
            state = S.DEAD
        if state in (S.DEAD, S.PREPARE_EPOCH_FENCE):
            # never written by Kafka or Skiff; a record that says so is treated as gone
            self.txns.pop(transactional_id, None)
            return
        # the last epoch is not in the record (Kafka keeps it in memory only)
        self.txns[transactional_id] = TxnMetadata(
            transactional_id=transactional_id, producer_id=value.producer_id,
            producer_epoch=value.producer_epoch, timeout_ms=value.timeout_ms, state=state,
            partitions=value.partitions, start_ms=value.start_ms,
            last_update_ms=value.last_update_ms,
            previous_producer_id=value.previous_producer_id,
            client_tv2=value.client_transaction_version >= 2,
            next_producer_id=value.next_producer_id,
        )

    def finish_loading(self, now_ms: int) -> Effects:
        """Resume what the previous coordinator left half done: markers of every
        transaction in PrepareCommit/PrepareAbort are sent again."""
        self.loaded = True
        for meta in self.txns.values():
            if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                self._send_markers(meta)
        return self._take()

    def unload(self) -> Effects:
        """Nothing pending survives: write callbacks answer NOT_COORDINATOR."""
        self.loaded = False
        self._fail_writes(ErrorCode.not_coordinator, 0)
        return self._take()

    # ---- InitProducerId ----------------------------------------------------------------

    def wants_producer_id(self, transactional_id: str) -> bool:
        """Whether an InitProducerId for this id would now need a fresh producer id."""
        meta = self.txns.get(transactional_id)
        return meta is None or (is_epoch_exhausted(meta.producer_epoch)
                                and meta.state in (S.EMPTY, S.COMPLETE_COMMIT,
                                                   S.COMPLETE_ABORT))

    def init_producer_id(
        self, token: Token, transactional_id: str, timeout_ms: int, now_ms: int, *,
        expected_producer_id: int = NO_PRODUCER_ID,
        expected_epoch: int = NO_PRODUCER_EPOCH, new_producer_id: int | None = None,
    ) -> Effects:
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            self._reply(token, InitResult(ErrorCode.invalid_transaction_timeout))
            return self._take()
        expected = expected_producer_id != NO_PRODUCER_ID
        meta = self.txns.get(transactional_id)
        if meta is None:
            if new_producer_id is None:
                self._reply(token, NEED_PRODUCER_ID)
                return self._take()
            meta = TxnMetadata(transactional_id, new_producer_id, NO_PRODUCER_EPOCH,
                               timeout_ms, S.EMPTY, last_update_ms=now_ms)
            self.txns[transactional_id] = meta
            self._init_transit(token, meta, timeout_ms, now_ms, expected, expected_epoch)
            return self._take()
        if meta.pending is not None:
            self._reply(token, InitResult(ErrorCode.concurrent_transactions))
            return self._take()
        if expected and not (
            meta.producer_epoch == NO_PRODUCER_EPOCH
            or expected_producer_id == meta.producer_id
            or (expected_producer_id == meta.previous_producer_id
                and is_epoch_exhausted(expected_epoch))
        ):
            self._reply(token, InitResult(ErrorCode.producer_fenced))
            return self._take()
        if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            self._reply(token, InitResult(ErrorCode.concurrent_transactions))
        elif meta.state is S.ONGOING:
            # fence the current producer and abort its transaction; the caller retries
            self._fence_and_abort(meta, now_ms)
            self._reply(token, InitResult(ErrorCode.concurrent_transactions))
        elif meta.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            if (is_epoch_exhausted(meta.producer_epoch)
                    and (not expected or expected_epoch == meta.producer_epoch)):
                if new_producer_id is None:
                    self._reply(token, NEED_PRODUCER_ID)
                    return self._take()
                target = self._target(
                    meta, S.EMPTY, now_ms, producer_id=new_producer_id, producer_epoch=0,
                    last_producer_epoch=NO_PRODUCER_EPOCH,
                    previous_producer_id=meta.producer_id, timeout_ms=timeout_ms,
                    partitions=frozenset(), start_ms=-1, client_tv2=False)
                self._transit(meta, target, self._init_done(token, target))
            else:
                self._init_transit(token, meta, timeout_ms, now_ms, expected, expected_epoch)
        else:
            self._reply(token, InitResult(ErrorCode.concurrent_transactions))
        return self._take()

    def _init_transit(self, token: Token, meta: TxnMetadata, timeout_ms: int, now_ms: int,
                      expected: bool, expected_epoch: int) -> None:
        bumped = meta.producer_epoch + 1
        if not expected:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif meta.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == meta.producer_epoch:
            epoch, last = bumped, meta.producer_epoch
        elif expected_epoch == meta.last_producer_epoch:
            # a retry of a bump whose answer the producer never got
            epoch, last = meta.producer_epoch, meta.last_producer_epoch
        else:
            self._reply(token, InitResult(ErrorCode.producer_fenced))
            return
        target = self._target(meta, S.EMPTY, now_ms, producer_epoch=epoch,
                              last_producer_epoch=last, timeout_ms=timeout_ms,
                              partitions=frozenset(), start_ms=-1, client_tv2=False)
        self._transit(meta, target, self._init_done(token, target))

    def _init_done(self, token: Token, target: Target) -> WriteDone:
        def done(error: ErrorCode, now: int) -> None:
            if error is ErrorCode.none:
                self._reply(token, InitResult(ErrorCode.none, target.producer_id,
                                              target.producer_epoch))
            else:
                self._reply(token, InitResult(map_write_error(error)))
        return done

    def _fence_and_abort(self, meta: TxnMetadata, now_ms: int,
                         token: Token | None = None) -> None:
        """Ongoing -> PrepareEpochFence -> PrepareAbort: the epoch is bumped (unless
        exhausted) so the current producer is fenced, and its transaction aborted."""
        check_transition(meta.transactional_id, meta.state, S.PREPARE_EPOCH_FENCE)
        epoch = meta.producer_epoch
        if not is_epoch_exhausted(epoch):
            epoch += 1
        target = self._target(meta, S.PREPARE_ABORT, now_ms, producer_epoch=epoch,
                              last_producer_epoch=meta.producer_epoch)
        # PrepareEpochFence is held in memory only; the record says PrepareAbort
        meta.state, saved = S.PREPARE_EPOCH_FENCE, meta.state
        try:
            self._transit(meta, target, self._prepare_done(meta, token, target, plain=True))
        finally:
            if meta.pending is None:
                meta.state = saved
        # while the abort is written, the state reads PrepareEpochFence; on a failed
        # write it goes back to Ongoing (see _prepare_done)

    # ---- AddPartitionsToTxn / AddOffsetsToTxn ---------------------------------------------

    def _validate(self, tid: str, producer_id: int, epoch: int,
                  ) -> tuple[ErrorCode, TxnMetadata | None]:
        meta = self.txns.get(tid)
        if meta is None or meta.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping, None
        if meta.producer_epoch != epoch:
            return ErrorCode.producer_fenced, None
        if meta.pending is not None or meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT,
                                                      S.PREPARE_EPOCH_FENCE):
            return ErrorCode.concurrent_transactions, None
        return ErrorCode.none, meta

    def add_partitions(self, token: Token, tid: str, producer_id: int, epoch: int,
                       partitions: Iterable[TopicPartition], now_ms: int, *,
                       tv2: bool = False) -> Effects:
        """Reply: ErrorCode for all the partitions. `tv2`: added by a leader for a
        transactions V2 producer (AddPartitionsToTxn v5 without verify_only)."""
        parts = frozenset(partitions)
        error, meta = self._validate(tid, producer_id, epoch)
        if meta is None:
            self._reply(token, error)
            return self._take()
        if meta.state is S.ONGOING and parts <= meta.partitions:
            self._reply(token, ErrorCode.none)
            return self._take()
        start = meta.start_ms if meta.state is S.ONGOING else now_ms
        target = self._target(meta, S.ONGOING, now_ms, partitions=meta.partitions | parts,
                              start_ms=start, client_tv2=tv2)

        def done(err: ErrorCode, now: int) -> None:
            self._reply(token, ErrorCode.none if err is ErrorCode.none else map_write_error(err))

        self._transit(meta, target, done)
        return self._take()

    def verify_partitions(self, tid: str, producer_id: int, epoch: int,
                          partitions: Iterable[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn v4+ verify_only (KIP-890): is each partition in the ongoing
        transaction of this producer? No state changes."""
        parts = list(partitions)
        meta = self.txns.get(tid)
        if meta is None or meta.producer_id != producer_id:
            return dict.fromkeys(parts, ErrorCode.invalid_producer_id_mapping)
        if meta.producer_epoch != epoch:
            return dict.fromkeys(parts, ErrorCode.producer_fenced)
        if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return dict.fromkeys(parts, ErrorCode.concurrent_transactions)
        # a pending change is not waited for: the leader checks its guard at the append
        return {tp: (ErrorCode.none if tp in meta.partitions
                     else ErrorCode.transaction_abortable) for tp in parts}

    # ---- EndTxn ------------------------------------------------------------------------

    def wants_next_producer_id(self, tid: str, tv2: bool) -> bool:
        """Whether a V2 EndTxn for this id would exhaust the epoch and so needs a fresh
        producer id (the shell then calls end_txn with one)."""
        meta = self.txns.get(tid)
        return (tv2 and meta is not None and meta.state is S.ONGOING
                and is_epoch_exhausted(meta.producer_epoch))

    def end_txn(self, token: Token, tid: str, producer_id: int, epoch: int, committed: bool,
                now_ms: int, *, tv2: bool = False,
                next_producer_id: int | None = None) -> Effects:
        """Reply: EndResult, once PrepareCommit/PrepareAbort is written (markers follow).
        `tv2`: EndTxn v5, the epoch is bumped (see the top of this module)."""
        meta = self.txns.get(tid)
        if meta is None:
            self._reply(token, EndResult(ErrorCode.invalid_producer_id_mapping))
            return self._take()
        v2 = meta.client_tv2 and meta.state is not S.PREPARE_EPOCH_FENCE
        st = meta.state
        retry_on_bump = v2 and meta.producer_epoch == epoch + 1
        retry_on_overflow = (v2 and meta.previous_producer_id == producer_id
                             and epoch == MAX_PRODUCER_EPOCH - 1 and meta.producer_epoch == 0
                             and st in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT))
        if v2:
            if st in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                valid = retry_on_bump
            elif st in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
                valid = retry_on_bump or retry_on_overflow
            else:
                valid = epoch == meta.producer_epoch
        else:
            valid = epoch == meta.producer_epoch
        if meta.producer_id != producer_id and not retry_on_overflow:
            self._reply(token, EndResult(ErrorCode.invalid_producer_id_mapping))
            return self._take()
        if not valid:
            self._reply(token, EndResult(ErrorCode.producer_fenced))
            return self._take()
        if meta.pending is not None or st is S.PREPARE_EPOCH_FENCE:
            self._reply(token, EndResult(ErrorCode.concurrent_transactions))
            return self._take()
        current = EndResult(ErrorCode.none, meta.producer_id, meta.producer_epoch)
        if st is S.ONGOING:
            changes: dict[str, object] = {}
            if tv2:
                changes = {"producer_epoch": meta.producer_epoch + 1,
                           "last_producer_epoch": meta.producer_epoch, "client_tv2": True}
                if is_epoch_exhausted(meta.producer_epoch):
                    if next_producer_id is None:
                        self._reply(token, NEED_NEXT_PRODUCER_ID)
                        return self._take()
                    changes["next_producer_id"] = next_producer_id
            target = self._target(meta, S.PREPARE_COMMIT if committed else S.PREPARE_ABORT,
                                  now_ms, **changes)
            self._transit(meta, target, self._prepare_done(meta, token, target))
        elif st is S.COMPLETE_COMMIT:
            self._reply(token, current if committed else EndResult(ErrorCode.invalid_txn_state))
        elif st is S.COMPLETE_ABORT:
            self._reply(token, EndResult(ErrorCode.invalid_txn_state) if committed else current)
        elif st is S.PREPARE_COMMIT:
            self._reply(token, EndResult(ErrorCode.concurrent_transactions if committed
                                         else ErrorCode.invalid_txn_state))
        elif st is S.PREPARE_ABORT:
            self._reply(token, EndResult(ErrorCode.invalid_txn_state if committed
                                         else ErrorCode.concurrent_transactions))
        else:
            self._reply(token, EndResult(ErrorCode.invalid_txn_state))
        return self._take()

    def _prepare_done(self, meta: TxnMetadata, token: Token | None, target: Target, *,
                      plain: bool = False) -> WriteDone:
        """Replies EndResult (ErrorCode when `plain`): after an epoch-exhausting V2 EndTxn,
        the next producer id at epoch 0 (what the producer uses next); else the (possibly
        bumped) id and epoch."""
        def done(error: ErrorCode, now: int) -> None:
            if error is not ErrorCode.none:
                if meta.state is S.PREPARE_EPOCH_FENCE:
                    meta.state = S.ONGOING
                self._reply(token, map_write_error(error) if plain
                            else EndResult(map_write_error(error)))
                return
            if plain:
                self._reply(token, ErrorCode.none)
            elif target.next_producer_id != NO_PRODUCER_ID:
                self._reply(token, EndResult(ErrorCode.none, target.next_producer_id, 0))
            else:
                self._reply(token, EndResult(ErrorCode.none, target.producer_id,
                                             target.producer_epoch))
            self._send_markers(meta)
        return done

    def _send_markers(self, meta: TxnMetadata) -> None:
        self._fx.markers.append(MarkerSend(
            meta.transactional_id, meta.producer_id, meta.producer_epoch,
            meta.state is S.PREPARE_COMMIT, meta.partitions))

    def markers_completed(self, tid: str, producer_id: int, producer_epoch: int,
                          now_ms: int) -> Effects:
        """Every partition acknowledged the markers of `tid`'s transaction at this producer
        id and epoch: write CompleteCommit/CompleteAbort."""
        meta = self.txns.get(tid)
        if (meta is None or meta.producer_id != producer_id
                or meta.producer_epoch != producer_epoch or meta.pending is not None
                or meta.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT)):
            return self._take()
        self._complete(meta, now_ms)
        return self._take()

    def _complete(self, meta: TxnMetadata, now_ms: int) -> None:
        state = S.COMPLETE_COMMIT if meta.state is S.PREPARE_COMMIT else S.COMPLETE_ABORT
        changes: dict[str, object] = {}
        if meta.client_tv2 and meta.next_producer_id != NO_PRODUCER_ID:
            # V2 epoch overflow: the markers are out, the next producer id takes over
            changes = {"producer_id": meta.next_producer_id, "producer_epoch": 0,
                       "previous_producer_id": meta.producer_id,
                       "last_producer_epoch": meta.producer_epoch,
                       "next_producer_id": NO_PRODUCER_ID}
        target = self._target(meta, state, now_ms, partitions=frozenset(), **changes)
        tid = meta.transactional_id

        def done(error: ErrorCode, now: int) -> None:
            if error is ErrorCode.none:
                self._unwritten_complete.discard(tid)
            elif error is not ErrorCode.not_coordinator:
                self._unwritten_complete.add(tid)  # tick writes it again

        self._transit(meta, target, done)

    # ---- timers ------------------------------------------------------------------------

    def tick(self, now_ms: int) -> Effects:
        for tid in list(self._unwritten_complete):
            meta = self.txns.get(tid)
            self._unwritten_complete.discard(tid)
            if (meta is not None and meta.pending is None
                    and meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT)):
                self._complete(meta, now_ms)
        if now_ms >= self.next_abort_check_ms:
            self.next_abort_check_ms = now_ms + self.config.abort_interval_ms
            self.abort_timed_out(now_ms)
        if now_ms >= self.next_expire_check_ms:
            self.next_expire_check_ms = now_ms + self.config.remove_interval_ms
            self.expire_ids(now_ms)
        return self._take()

    def abort_timed_out(self, now_ms: int) -> list[str]:
        aborted = []
        for meta in list(self.txns.values()):
            if (meta.state is S.ONGOING and meta.pending is None
                    and meta.start_ms + meta.timeout_ms <= now_ms):
                self._fence_and_abort(meta, now_ms)
                aborted.append(meta.transactional_id)
        return aborted

    def expire_ids(self, now_ms: int) -> list[str]:
        expired = []
        for meta in list(self.txns.values()):
            if (meta.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
                    and meta.pending is None
                    and meta.last_update_ms + self.config.id_expiration_ms <= now_ms):
                self._transit(meta, self._target(meta, S.DEAD, now_ms),
                              lambda _e, _n: None)
                expired.append(meta.transactional_id)
        return expired

    # ---- operations --------------------------------------------------------------------

    def abort(self, token: Token, tid: str, now_ms: int) -> Effects:
        """An operator's abort of an ongoing transaction (`skiff transactions abort`):
        the producer is fenced, as by a timeout. Reply: ErrorCode, once PrepareAbort (with
        the bumped epoch) is written."""
        meta = self.txns.get(tid)
        if meta is None:
            self._reply(token, ErrorCode.transactional_id_not_found)
        elif meta.pending is not None or meta.state is not S.ONGOING:
            self._reply(token, ErrorCode.invalid_txn_state if meta.pending is None
                        else ErrorCode.concurrent_transactions)
        else:
            self._fence_and_abort(meta, now_ms, token)  # answered once PrepareAbort is written
        return self._take()

    def describe(self, tid: str) -> TxnDescription | None:
        meta = self.txns.get(tid)
        if meta is None:
            return None
        return TxnDescription(
            transactional_id=tid, state=meta.state, producer_id=meta.producer_id,
            producer_epoch=meta.producer_epoch, timeout_ms=meta.timeout_ms,
            start_ms=meta.start_ms, last_update_ms=meta.last_update_ms,
            partitions=meta.partitions)

    def list(self, states: Iterable[TxnState] = (), producer_ids: Iterable[int] = (),
             min_duration_ms: int = -1, now_ms: int = 0) -> list[TxnDescription]:
        wanted_states, wanted_pids = set(states), set(producer_ids)
        out = []
        for tid in sorted(self.txns):
            d = self.describe(tid)
            assert d is not None
            if wanted_states and d.state not in wanted_states:
                continue
            if wanted_pids and d.producer_id not in wanted_pids:
                continue
            if min_duration_ms >= 0 and (d.state is not S.ONGOING
                                         or now_ms - d.start_ms < min_duration_ms):
                continue
            out.append(d)
        return out
