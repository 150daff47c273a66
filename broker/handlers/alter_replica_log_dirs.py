"""AlterReplicaLogDirs (API 34), versions 0-2 (v1 is v0 with throttling, v2 is flexible; v0,
which Kafka 4.0 dropped in KIP-896, is served as Kafka 3.9 did, from broker/protocol/
_kio_legacy): move replicas of this broker to another
of its log dirs (KIP-113), as Kafka's ReplicaManager.alterReplicaLogDirs does.

Each partition is answered at once; the move itself goes on in the background
(ReplicaManager.alter_log_dir: a future replica `<topic>-<partition>.<uuid>-future` in the
destination dir is filled from the current log and then takes its place; DescribeLogDirs
shows it with is_future_key meanwhile). Per partition:
  * NONE: the move started, is under way, or the replica is already there (asking for its
    current dir cancels a move in progress);
  * LOG_DIR_NOT_FOUND: the path is not one of this broker's log.dirs (compared as absolute
    paths, as Kafka does);
  * KAFKA_STORAGE_ERROR: the destination dir or the partition is offline, or any log dir
    is offline (KIP-858: no future replica is made then);
  * INVALID_REPLICA_ASSIGNMENT: the destination is cordoned (cordoned.log.dirs, KIP-1066;
    Kafka 4.4 checks it after the offline test, before looking at the partition);
  * REPLICA_NOT_AVAILABLE: this broker has no replica of the partition (the destination is
    remembered, and the replica is created there if it comes);
  * CLUSTER_AUTHORIZATION_FAILED for every partition without ALTER on the cluster.
A partition named twice is moved to the last dir named, as Kafka's map of them does.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.handlers._authz import Op, Res, allowed
from broker.protocol.durations import NO_THROTTLE
from broker.protocol.kio_build import build, response_module

if TYPE_CHECKING:
    from broker.handlers.services import BrokerServices
    from broker.server import RequestContext

API_KEY = 34


def _absolute(path: str) -> str:
    """Kafka's File.getAbsolutePath: against the working directory, `..` resolved, no
    symlinks followed."""
    return os.path.abspath(path)


def _respond(mod: Any, answers: dict[tuple[str, int], ErrorCode]) -> Any:
    by_topic: dict[str, list[Any]] = {}
    for (topic, index), code in answers.items():
        by_topic.setdefault(topic, []).append(
            build(mod.AlterReplicaLogDirPartitionResult, partition_index=index, error_code=code))
    return build(mod.AlterReplicaLogDirsResponse, throttle_time=NO_THROTTLE, results=tuple(
        build(mod.AlterReplicaLogDirTopicResult, topic_name=t, partitions=tuple(ps))
        for t, ps in by_topic.items()))


async def handle(node: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    mod = response_module(request)
    wanted: dict[tuple[str, int], str] = {}
    for d in request.dirs:
        for t in d.topics:
            for p in t.partitions:
                wanted.pop((t.name, int(p)), None)  # the last one named counts, in its place
                wanted[(t.name, int(p))] = d.path
    if not allowed(node, ctx, Op.ALTER, Res.CLUSTER):
        return _respond(mod, dict.fromkeys(wanted, ErrorCode.cluster_authorization_failed))
    dirs = {_absolute(str(d)): Path(d) for d in node.logs.log_dirs}
    answers: dict[tuple[str, int], ErrorCode] = {}
    cordoned = node.logs.cordoned()
    for (topic, index), path in wanted.items():
        dest = dirs.get(_absolute(path)) if path else None
        if dest is None:
            answers[(topic, index)] = ErrorCode.log_dir_not_found
        elif dest in cordoned and dest not in node.logs.offline_dirs:
            answers[(topic, index)] = ErrorCode.invalid_replica_assignment
        else:
            answers[(topic, index)] = node.replicas.alter_log_dir(topic, index, dest)
    return _respond(mod, answers)
