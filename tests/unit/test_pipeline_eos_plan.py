"""The pure pieces of the exactly-once sink (pipeline/eos.py): names, the replay marker, the
commit plan, and the options that choose it. Spark and a broker: tests/spark."""

from __future__ import annotations

import pytest

from tests.support.requires import have_module, require_tool

require_tool("pyspark", "the pipeline extra is not installed (tests/run.sh installs it)",
             available=have_module("pyspark"), allow_module_level=True)

from pipeline.eos import (  # noqa: E402 - only once pyspark is known to be there
    TxnCommitMessage,
    already_committed,
    check_transactional_config,
    pending_transactions,
    transactional_id,
)
from pipeline.options import SkiffOptionError, write_options  # noqa: E402

B = {"kafka.bootstrap.servers": "127.0.0.1:9092", "topic": "out"}


def test_transactional_id_is_stable_per_prefix_and_partition() -> None:
    assert transactional_id("spark-skiff-sink-q1", 3) == "spark-skiff-sink-q1-3"
    assert transactional_id("p", 0) != transactional_id("p", 1)


@pytest.mark.parametrize(("marker", "batch", "done"), [
    (None, 0, False),      # never committed
    (-1001, 0, False),     # librdkafka's OFFSET_INVALID: no committed offset
    (0, 0, True),          # batch 0 committed
    (4, 5, False),         # batch 4 committed, 5 not yet
    (5, 5, True),          # the replay of batch 5
    (7, 5, True),          # batches commit in order: 7 done means 5 done
])
def test_already_committed(marker: int | None, batch: int, done: bool) -> None:
    assert already_committed(marker, batch) is done


def test_pending_transactions_checks_the_batch_and_skips_empty_tasks() -> None:
    msgs = [TxnCommitMessage(0, 7, 3, "p-0", 1000, 2),
            TxnCommitMessage(1, 7, 0),                               # no rows
            TxnCommitMessage(2, 7, 0, already_committed=True),       # replayed, done before
            None]                                                    # a task without message
    assert [m.transactional_id for m in pending_transactions(msgs, 7)] == ["p-0"]
    with pytest.raises(RuntimeError, match="micro-batch 6 reported to the commit of"):
        pending_transactions([TxnCommitMessage(0, 6, 1, "p-0", 1, 0)], 7)
    with pytest.raises(RuntimeError, match="two tasks reported transactional id p-0"):
        pending_transactions([TxnCommitMessage(0, 7, 1, "p-0", 1, 0),
                              TxnCommitMessage(0, 7, 1, "p-0", 1, 1)], 7)


def test_delivery_guarantee_options() -> None:
    assert not write_options(B).exactly_once
    w = write_options({**B, "skiff.deliveryGuarantee": "Exactly-Once",
                       "skiff.transactionalIdPrefix": " orders-sink "})
    assert w.exactly_once and w.transactional_id_prefix == "orders-sink"
    assert write_options({**B, "skiff.deliveryguarantee": "exactly-once"}
                         ).transactional_id_prefix is None
    with pytest.raises(SkiffOptionError, match="must be 'at-least-once' or 'exactly-once'"):
        write_options({**B, "skiff.deliveryGuarantee": "exactly_once"})
    with pytest.raises(SkiffOptionError, match=r"needs skiff\.deliveryGuarantee=exactly-once"):
        write_options({**B, "skiff.transactionalIdPrefix": "p"})
    eos = {**B, "skiff.deliveryGuarantee": "exactly-once"}
    with pytest.raises(SkiffOptionError, match=r"'transactional\.id' is set by the exactly-once"):
        check_transactional_config(write_options({**eos, "kafka.transactional.id": "x"}))
    with pytest.raises(SkiffOptionError, match="PLAINTEXT only, not 'sasl_ssl'"):
        check_transactional_config(write_options({**eos, "kafka.security.protocol": "SASL_SSL"}))
    check_transactional_config(write_options(eos))
