"""read_committed against read_uncommitted consume, in one run on one node (run by hand).

One `skiff dev` node (broker/testing/node.py). A topic of one partition is filled with
transactions written the way a transactional producer and its coordinator write them:
each transaction is one transactional batch of --txn-records records of --size bytes from
one of four producers (raw kio Produce), ended by a COMMIT or, for every --abort-every-th
transaction, an ABORT marker (kio WriteTxnMarkers). Then librdkafka consumes the whole
partition from offset 0 with isolation.level=read_uncommitted and read_committed in turn
(--repeats rounds, alternating which goes first) and the time to reach the end is taken.
Both read the same log; read_committed also gets the aborted transactions list and drops
the aborted records client-side. The node runs with
transaction.partition.verification.enable=false, as no coordinator knows these transactions.
Prints log MB/s for both and the ratio (goal >= 0.9).

    python bench/txn_bench.py --mb 256 --repeats 3
"""

from __future__ import annotations

import argparse
import datetime
import os
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kio.schema.errors import ErrorCode
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.write_txn_markers.v1.request import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)
from kio.static.primitive import Records, i16, i32, i32Timedelta, i64

from broker.protocol.records import Record, build_batch
from broker.testing.node import SkiffNode
from broker.testing.wire import decode_response, encode_request, recv_frame


class Raw:
    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=60)
        self.correlation = 0

    def call(self, request: Any) -> Any:
        self.correlation += 1
        self.sock.sendall(encode_request(request, self.correlation))
        _, resp = decode_response(int(request.__api_key__), int(request.__version__),
                                  recv_frame(self.sock))
        return resp


def fill(bootstrap: str, topic: str, n_txns: int, per_txn: int, size: int,
         abort_every: int) -> tuple[int, int]:
    """Returns (records written, records committed)."""
    raw = Raw(bootstrap)
    pids = []
    for _ in range(4):
        resp = raw.call(InitProducerIdRequest(transactional_id=None, transaction_timeout=(
            i32Timedelta.parse(datetime.timedelta(seconds=60)))))
        assert resp.error_code is ErrorCode.none, resp
        pids.append(int(resp.producer_id))
    seqs = dict.fromkeys(pids, 0)
    value = os.urandom(size)
    committed = 0
    for t in range(n_txns):
        pid = pids[t % 4]
        now = int(time.time() * 1000)
        batch = build_batch([Record(timestamp=now, value=value)] * per_txn, producer_id=pid,
                            producer_epoch=0, base_sequence=seqs[pid], is_transactional=True)
        seqs[pid] += per_txn
        resp = raw.call(ProduceRequest(
            transactional_id=f"bench-{pid}", acks=i16(1),
            timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
            topic_data=(TopicProduceData(name=topic, partition_data=(
                PartitionProduceData(index=i32(0), records=Records(batch)),)),)))
        code = resp.responses[0].partition_responses[0].error_code
        assert code is ErrorCode.none, code
        commit = abort_every <= 0 or (t + 1) % abort_every != 0
        resp = raw.call(WriteTxnMarkersRequest(markers=(WritableTxnMarker(
            producer_id=i64(pid), producer_epoch=i16(0), transaction_result=commit,
            coordinator_epoch=i32(0),
            topics=(WritableTxnMarkerTopic(name=topic, partition_indexes=(i32(0),)),)),)))
        assert resp.markers[0].topics[0].partitions[0].error_code is ErrorCode.none
        committed += per_txn if commit else 0
    raw.sock.close()
    return n_txns * per_txn, committed


def consume(bootstrap: str, topic: str, isolation: str, expect: int) -> float:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"txnb-{isolation}",
                  "enable.auto.commit": False, "isolation.level": isolation,
                  "fetch.queue.backoff.ms": 1, "fetch.max.bytes": 52428800,
                  "max.partition.fetch.bytes": 10485760})
    c.assign([TopicPartition(topic, 0, 0)])
    got = 0
    t0 = time.perf_counter()
    deadline = t0 + 600
    while got < expect and time.perf_counter() < deadline:
        got += sum(1 for m in c.consume(10000, 0.5) if m.error() is None)
    elapsed = time.perf_counter() - t0
    c.close()
    assert got == expect, f"{isolation}: consumed {got} of {expect}"
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=128)
    ap.add_argument("--size", type=int, default=1000)
    ap.add_argument("--txn-records", type=int, default=100)
    ap.add_argument("--abort-every", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    per_txn = args.txn_records
    n_txns = max(1, args.mb * (1 << 20) // (args.size * per_txn))
    # the bench plays the coordinator itself, which KIP-890's verification would refuse
    node = SkiffNode(Path(tempfile.mkdtemp(prefix="skiff-txnbench-")),
                     config_env={"SKIFF_TRANSACTION_PARTITION_VERIFICATION_ENABLE": "false"})
    node.start()
    try:
        node.wait_ready()
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        admin.create_topics([NewTopic("txn-bench", 1, 1)])["txn-bench"].result(30)
        del admin
        t0 = time.perf_counter()
        total, committed = fill(node.bootstrap, "txn-bench", n_txns, per_txn, args.size,
                                args.abort_every)
        print(f"wrote {n_txns} transactions, {total} records ({committed} committed) in "
              f"{time.perf_counter() - t0:.1f}s; load average {os.getloadavg()[0]:.1f}")
        mb = total * args.size / (1 << 20)
        times: dict[str, list[float]] = {"read_uncommitted": [], "read_committed": []}
        for r in range(args.repeats):
            order = ["read_uncommitted", "read_committed"]
            if r % 2:
                order.reverse()
            for isolation in order:
                expect = total if isolation == "read_uncommitted" else committed
                times[isolation].append(consume(node.bootstrap, "txn-bench", isolation, expect))
        print(f"{'isolation':<18} {'median s':>9} {'log MiB/s':>10}  rounds")
        med = {k: statistics.median(v) for k, v in times.items()}
        for k, v in times.items():
            print(f"{k:<18} {med[k]:>9.2f} {mb / med[k]:>10.1f}  "
                  + " ".join(f"{x:.2f}" for x in v))
        print(f"read_committed / read_uncommitted throughput: "
              f"{med['read_uncommitted'] / med['read_committed']:.2f} (goal >= 0.9); "
              f"load average {os.getloadavg()[0]:.1f}")
    finally:
        node.close()


if __name__ == "__main__":
    main()
