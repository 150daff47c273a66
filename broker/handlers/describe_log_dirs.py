"""DescribeLogDirs (API 35), versions 0-4: partitions and sizes per log directory (v0, dropped
by Kafka 4.0 in KIP-896, is v1's shape; v1 only changed throttling to happen before the
answer)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.handlers._build import build, response_module
from broker.protocol.durations import NO_THROTTLE

if TYPE_CHECKING:
    from broker.handlers.services import BrokerServices
    from broker.server import RequestContext

API_KEY = 35


def _disk_usage(path: Path) -> tuple[int, int]:
    try:
        st = os.statvfs(path)
    except OSError:
        return -1, -1
    return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize


async def handle(node: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    mod = response_module(request)
    wanted: dict[str, set[int]] | None = None
    if request.topics is not None:
        wanted = {t.topic: set(t.partitions) for t in request.topics}
    per_dir: dict[Path, dict[str, list[Any]]] = {Path(d): {} for d in node.logs.log_dirs}
    for part in node.replicas.partitions():
        if wanted is not None and part.index not in wanted.get(part.topic, ()):
            continue
        log_dir = part.log.dir.parent
        lag = max(0, part.log.log_end_offset - part.high_watermark)
        per_dir.setdefault(log_dir, {}).setdefault(part.topic, []).append(build(
            mod.DescribeLogDirsPartition, partition_index=part.index,
            partition_size=part.log.size_in_bytes, offset_lag=lag, is_future_key=False,
        ))
    results = []
    for log_dir, topics in per_dir.items():
        total, usable = _disk_usage(log_dir)
        results.append(build(
            mod.DescribeLogDirsResult, error_code=ErrorCode.none, log_dir=str(log_dir),
            topics=tuple(
                build(mod.DescribeLogDirsTopic, name=name, partitions=tuple(parts))
                for name, parts in sorted(topics.items())
            ),
            total_bytes=total, usable_bytes=usable,
        ))
    return build(
        mod.DescribeLogDirsResponse, throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none, results=tuple(results),
    )
