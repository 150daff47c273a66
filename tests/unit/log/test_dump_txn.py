"""`skiff tools dump-log` on transactional segments: markers and the .txnindex."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.log import LogConfig, PartitionLog, TopicPartition
from broker.log.dump import main
from broker.log.txn_index import AbortedTxn
from broker.protocol.records import Record, build_batch
from broker.replication.partition import Partition

TS = 1_700_000_000_000


def test_markers_and_txn_index_are_printed_and_verified(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    plog = PartitionLog(tmp_path / "t-0", TopicPartition("t", 0), LogConfig(), clock=lambda: TS)
    part = Partition(topic="t", index=0, topic_id=None, log=plog, clock=lambda: TS, node_id=1)
    part.become_leader(leader_epoch=0, partition_epoch=0, replicas=(1,), isr=(1,),
                       min_insync_replicas=1)
    for pid in (5, 6):
        part.append_as_leader(build_batch(
            [Record(timestamp=TS, key=b"k", value=b"v%d" % pid)], producer_id=pid,
            producer_epoch=0, base_sequence=0, is_transactional=True), required_acks=1)
    part.write_marker(producer_id=5, producer_epoch=0, coordinator_epoch=3, committed=False)
    part.write_marker(producer_id=6, producer_epoch=0, coordinator_epoch=3, committed=True)
    plog.close()
    seg = tmp_path / "t-0" / "00000000000000000000"
    assert main([f"{seg}.log", f"{seg}.txnindex", "--verify", "--print-data"]) == 0
    out = capsys.readouterr().out
    assert "isTransactional: true isControl: true" in out
    assert "endTxnMarker: ABORT coordinatorEpoch: 3" in out
    assert "endTxnMarker: COMMIT coordinatorEpoch: 3" in out
    assert ("version: 0 producerId: 5 firstOffset: 0 lastOffset: 2 lastStableOffset: 1"
            in out)
    assert "Verification passed for" in out and "FAILED" not in out
    # an entry naming no ABORT marker fails verification
    Path(f"{seg}.txnindex").write_bytes(AbortedTxn(6, 1, 3, 4).encode())
    assert main([f"{seg}.txnindex", "--verify"]) == 1
    assert "names no ABORT marker" in capsys.readouterr().out
