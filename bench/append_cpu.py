"""CPU per leader append, with the kernel's write taken out: the log engine's own (Python)
cost per batch, which log_bench's wall and process-CPU ratios hide under the page-cache
write and under whatever else the machine runs.

    PYTHONPATH=. python bench/append_cpu.py [--kib 16] [--mib 96] [--rounds 5] [--with-write]

Appends the same prepared batches as log_bench (uncompressed v2, ~1 KB records) to a fresh
log each round and reports the calling thread's CPU time per append (time.thread_time, so
other processes and the drop-behind thread do not count), the minimum and every round.
Without --with-write, os.pwritev/os.pwrite are replaced by no-ops that report everything
written, so the figure is the engine's Python plus the CRC32C of each batch.

--partition appends through a leader Partition (replication/partition.py: the ISR and
producer-state checks around the log's append), and --idempotent (implies --partition)
gives every batch producer id 7 and the next sequence, with its CRC computed again, as
Kafka's Java producer sends them (enable.idempotence=true, its default).

Thread CPU hardly moves with the load of a shared machine, so two commits can be compared
by running this from a checkout of each (`git worktree add --detach DIR COMMIT`, then
`PYTHONPATH=DIR python DIR/bench/append_cpu.py` or this file with PYTHONPATH=DIR),
alternating, in the same minutes.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from log_bench import make_batches
from replay import stamp_sequence

from broker.log import LogConfig, PartitionLog, TopicPartition
from broker.protocol.records import BatchHeader, iter_batches
from broker.replication.partition import Partition

NOW_MS = 1_700_000_000_000
PRODUCER_ID_AT = 43  # producerId int64, then producerEpoch int16
PRODUCER = struct.Struct(">qh")


def _no_pwritev(fd: int, buffers: list[bytes | bytearray | memoryview], position: int) -> int:
    return sum(len(b) for b in buffers)


def _no_pwrite(fd: int, data: bytes | bytearray | memoryview, position: int) -> int:
    return len(data)


def with_sequences(batches: list[bytes], producer_id: int) -> list[bytes]:
    """Each batch again with `producer_id`, epoch 0 and consecutive sequences."""
    out: list[bytes] = []
    sequence = 0
    for b in batches:
        h: BatchHeader = next(iter(iter_batches(b)))[0]
        x = bytearray(b)
        PRODUCER.pack_into(x, PRODUCER_ID_AT, producer_id, 0)
        stamp_sequence(x, 0, sequence)
        out.append(bytes(x))
        sequence += h.records_count
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kib", type=int, default=16, help="batch size in KiB")
    ap.add_argument("--mib", type=int, default=96, help="MiB appended per round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--with-write", action="store_true", help="keep the kernel write")
    ap.add_argument("--partition", action="store_true",
                    help="append through a leader Partition (acks=all, ISR of one)")
    ap.add_argument("--idempotent", action="store_true",
                    help="batches with a producer id and sequences (implies --partition)")
    args = ap.parse_args()
    through_partition = args.partition or args.idempotent
    if not args.with_write:
        os.pwritev = _no_pwritev  # type: ignore[assignment]
        os.pwrite = _no_pwrite  # type: ignore[assignment]
    batches = make_batches(args.kib << 10, args.mib << 20, random.Random(1))
    if args.idempotent:
        batches = with_sequences(batches, 7)
    per_append: list[float] = []
    for _ in range(args.rounds):
        root = Path(tempfile.mkdtemp(prefix="append-cpu-"))
        try:
            plog = PartitionLog(root / "b-0", TopicPartition("b", 0), LogConfig(),
                                clock=lambda: NOW_MS)
            if through_partition:
                part = Partition(topic="b", index=0, topic_id=None, log=plog,
                                 clock=lambda: NOW_MS, node_id=1)
                part.become_leader(leader_epoch=1, partition_epoch=1, replicas=(1,), isr=(1,),
                                   min_insync_replicas=1)
                c0 = time.thread_time()
                for b in batches:
                    part.append_as_leader(b, -1)
            else:
                c0 = time.thread_time()
                for b in batches:
                    plog.append_as_leader(b, 1, NOW_MS)
            per_append.append((time.thread_time() - c0) / len(batches) * 1e6)
            plog.close()
        finally:
            shutil.rmtree(root, ignore_errors=True)
    how = ("idempotent, through the partition" if args.idempotent
           else "through the partition" if through_partition else "to the log")
    print(f"{args.kib} KiB appends ({how}) x{len(batches)}, kernel write "
          f"{'kept' if args.with_write else 'replaced'}: thread CPU {min(per_append):.2f} "
          f"us/append (rounds {', '.join(f'{x:.2f}' for x in per_append)}); load average "
          f"{os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
