"""DescribeLogDirs (API 35), versions 0-5: the partitions and their sizes in each log dir
(v0, dropped by Kafka 4.0 in KIP-896, is v1's shape; v1 only changed throttling to happen
before the answer; v2 is flexible; v3 adds a top-level error code; v4 each dir's total and
usable bytes; v5 whether a dir is cordoned (KIP-1066): Skiff has no cordoning, so never).

As Kafka's ReplicaManager.describeLogDirs answers it, one result per `log.dirs` entry:
  * an online dir: error NONE and its partition logs (the metadata log is Raft's, not
    listed), each with its size, its offset lag (for a replica: how far its log end is
    behind the high watermark, max(HW - LEO, 0); for a future replica that
    AlterReplicaLogDirs is filling in this dir, `is_future_key` and how far it is behind the
    current log's end), and the file system's total and usable bytes;
  * an offline dir (KIP-858: it failed): KAFKA_STORAGE_ERROR and nothing else.
`topics` null means every partition. DESCRIBE on the cluster is checked before the handler
(broker/handlers/_authz.py CLUSTER_CHECKS).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.protocol.durations import NO_THROTTLE
from broker.protocol.kio_build import build, response_module

if TYPE_CHECKING:
    from broker.handlers.services import BrokerServices
    from broker.server import RequestContext

API_KEY = 35
UNKNOWN_VOLUME_BYTES = -1


def _disk_usage(path: Path) -> tuple[int, int]:
    try:
        st = os.statvfs(path)
    except OSError:
        return UNKNOWN_VOLUME_BYTES, UNKNOWN_VOLUME_BYTES
    return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize


async def handle(node: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    mod = response_module(request)
    wanted: dict[str, set[int]] | None = None
    if request.topics is not None:
        wanted = {}
        for t in request.topics:
            wanted.setdefault(t.topic, set()).update(t.partitions)
    logs = node.logs
    # dir -> topic -> [(partition, size, lag, is_future)]
    per_dir: dict[Path, dict[str, list[tuple[int, int, int, bool]]]] = {
        d: {} for d in logs.log_dirs}
    for plog in logs.all_logs():
        topic, index = plog.topic_partition.topic, plog.topic_partition.partition
        if wanted is not None and index not in wanted.get(topic, ()):
            continue
        d = logs.log_dir_of(topic, index)
        if d is None or d not in per_dir:
            continue
        part = node.replicas.get(topic, index)
        hw = part.high_watermark if part is not None else plog.log_end_offset
        per_dir[d].setdefault(topic, []).append(
            (index, plog.size_in_bytes, max(hw - plog.log_end_offset, 0), False))
    for fut in logs.future_logs():
        topic, index = fut.topic, fut.partition
        if wanted is not None and index not in wanted.get(topic, ()):
            continue
        if fut.log_dir in per_dir:
            per_dir[fut.log_dir].setdefault(topic, []).append(
                (index, fut.size_in_bytes(), fut.offset_lag(), True))
    results = []
    cordoned = logs.cordoned()  # v5's is_cordoned (KIP-1066)
    for d in logs.log_dirs:
        if d in logs.offline_dirs:
            results.append(build(mod.DescribeLogDirsResult,
                                 error_code=ErrorCode.kafka_storage_error, log_dir=str(d),
                                 topics=(), total_bytes=UNKNOWN_VOLUME_BYTES,
                                 usable_bytes=UNKNOWN_VOLUME_BYTES))
            continue
        total, usable = _disk_usage(d)
        results.append(build(
            mod.DescribeLogDirsResult, error_code=ErrorCode.none, log_dir=str(d),
            topics=tuple(
                build(mod.DescribeLogDirsTopic, name=name, partitions=tuple(
                    build(mod.DescribeLogDirsPartition, partition_index=i, partition_size=size,
                          offset_lag=lag, is_future_key=future)
                    for i, size, lag, future in sorted(parts)))
                for name, parts in sorted(per_dir[d].items())
            ),
            total_bytes=total, usable_bytes=usable, is_cordoned=d in cordoned,
        ))
    return build(
        mod.DescribeLogDirsResponse, throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none, results=tuple(results),
    )
