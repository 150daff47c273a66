"""LogManager: every PartitionLog of this process across `log.dirs`.

Per log dir it keeps Kafka's files: `recovery-point-offset-checkpoint`,
`log-start-offset-checkpoint`, `cleaner-offset-checkpoint` and the clean-shutdown marker
`.kafka_cleanshutdown`, written by shutdown() and removed by load(): if it is missing at
load, every log is recovered after its checkpointed recovery point.

Periodic work (retention, delayed file deletion, flush.ms, checkpoints, the cleaner) is
done by `tick(now_ms)`, which a background thread (`start()` / `stop()`) calls; tests
call tick directly with a fake clock.

Several `log.dirs` (JBOD, KIP-858): each directory has its own id (`directory.id` in its
meta.properties), a new partition goes to the online directory holding the fewest that is
not cordoned (`cordoned.log.dirs`, KIP-1066; when every one is, the first online one, as
Kafka's LogManager.nextLogDirs falls back), and an
I/O error in a directory takes it offline without stopping the process (`fail_dir`, Kafka's
LogDirFailureChannel): its logs are closed and forgotten, what is asked of them afterwards
is KAFKA_STORAGE_ERROR, and `dir_failure_listeners` are told (the replica manager, the node,
which reports the directory to the controller and stops once no directory is left).

The metadata log `__cluster_metadata-0` belongs to Raft alone (broker/metadata_log_store.py):
under Kafka's default layout (`metadata.log.dir` unset) it lives in the first `log.dirs`
entry, next to the partitions, yet this manager never loads, retains, cleans, checkpoints
or deletes it, in any layout (RAFT_OWNED_TOPICS).
"""

from __future__ import annotations

import collections
import contextlib
import os
import shutil
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import structlog
from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.log.checkpoints import (
    CLEAN_SHUTDOWN_MARKER,
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    CheckpointError,
    read_meta_properties,
    read_offsets_checkpoint,
    write_offsets_checkpoint,
)
from broker.log.cleaner import LogCleaner
from broker.log.config import LogConfig
from broker.log.files import fsync_dir
from broker.log.log import PartitionLog, TopicPartition
from broker.log.move import FUTURE_DIR_SUFFIX, FutureLog

log = structlog.get_logger(__name__)

DELETE_DIR_SUFFIX = "-delete"
# Topics whose directories Raft owns: never opened as partition logs here.
RAFT_OWNED_TOPICS = frozenset({"__cluster_metadata"})
_LEGAL_TOPIC_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


class LogManager:
    def __init__(
        self,
        log_dirs: list[Path],
        default_config: LogConfig,
        clock: Callable[[], int],
        *,
        retention_check_interval_ms: int = 300_000,
        flush_checkpoint_interval_ms: int = 60_000,
        flush_start_offset_checkpoint_interval_ms: int = 60_000,
        cleaner_enabled: bool = True,
        cleaner_io_max_bytes_per_second: float = float("inf"),
        dir_ids: Mapping[Path, uuid.UUID] | None = None,
        owns: Callable[[str, int], bool] | None = None,
        file_suffix: str = "",
    ) -> None:
        """`dir_ids`: each log dir's directory id; by default read from its meta.properties
        (a directory without one, in tests, gets a random id for this process).
        `owns` and `file_suffix`: a worker of a broker with several
        (broker/node/shards.py) loads only the partitions it owns and keeps its own
        checkpoint files and clean-shutdown marker (Kafka's names plus `file_suffix`)."""
        if not log_dirs:
            raise ValueError("log.dirs is empty")
        self.log_dirs = [Path(d) for d in log_dirs]
        self.owns = owns
        self.file_suffix = file_suffix
        self.dir_ids: dict[Path, uuid.UUID] = {
            d: (dir_ids or {}).get(d) or _directory_id(d) for d in self.log_dirs}
        self.offline_dirs: set[Path] = set()
        # KIP-1066: the directories cordoned now (the node sets it from cordoned.log.dirs,
        # dynamic values included)
        self.cordoned: Callable[[], frozenset[Path]] = frozenset
        # partitions whose log was in a failed directory: KAFKA_STORAGE_ERROR from now on
        self.offline_logs: dict[tuple[str, int], Path] = {}
        self.dir_failure_listeners: list[Callable[[Path], None]] = []
        # AlterReplicaLogDirs: the future copies being filled, and logs that were replaced
        # by one (closed once in-flight reads of their files are over)
        self._futures: dict[tuple[str, int], FutureLog] = {}
        self._found_futures: list[tuple[Path, Path]] = []  # (log dir, future dir) at load
        self._retired: list[tuple[int, PartitionLog]] = []
        # AlterReplicaLogDirs for a replica not here yet: where to create it
        self.preferred_dirs: dict[tuple[str, int], Path] = {}
        self.default_config = default_config
        self.clock = clock
        self.retention_check_interval_ms = retention_check_interval_ms
        self.flush_checkpoint_interval_ms = flush_checkpoint_interval_ms
        self.flush_start_offset_checkpoint_interval_ms = flush_start_offset_checkpoint_interval_ms
        self.cleaner_enabled = cleaner_enabled
        self.cleaner_io_max_bytes_per_second = cleaner_io_max_bytes_per_second
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self._log_dir_of: dict[tuple[str, int], Path] = {}
        self._lock = threading.RLock()
        self._pending_dir_deletes: list[tuple[int, Path]] = []
        self._last_retention_ms = 0
        self._last_checkpoint_ms = 0
        self._last_start_checkpoint_ms = 0
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._loaded = False
        self.cleaner_checkpoints: dict[tuple[str, int], int] = {}
        self.had_clean_shutdown: dict[Path, bool] = {}
        self.cleaner = LogCleaner(self)

    # ------------------------------------------------------------------ loading

    def load(self) -> None:
        """Open every partition directory; recover those of dirs without a clean marker."""
        with self._lock:
            for d in self.log_dirs:
                try:
                    self._load_dir(d)
                except OSError as exc:
                    # KIP-858: a dir that cannot be read at start is offline from the start
                    for key in [k for k, v in self._log_dir_of.items() if v == d]:
                        self._logs.pop(key).close()
                        del self._log_dir_of[key]
                    self.offline_dirs.add(d)
                    log.error("log_dir_offline_at_start", log_dir=str(d), reason=str(exc))
            if not self.online_dirs:
                raise KafkaError(ErrorCode.kafka_storage_error, "no log dir could be loaded: "
                                 + ", ".join(map(str, self.log_dirs)))
            for d, path in self._found_futures:
                self._resume_future(d, path)
            self._found_futures.clear()
            self._loaded = True

    def _resume_future(self, d: Path, path: Path) -> None:
        """A move to log dir `d` that a restart cut short: its future copy is kept and
        filled again from the start (the replica manager drives it once the partition is
        served here again), as Kafka resumes a future replica. A copy whose partition is
        gone, or lives in `d` already, or whose dir went offline, is deleted."""
        tp = TopicPartition.parse_dir_name(path.name[: -len(FUTURE_DIR_SUFFIX)].rsplit(".", 1)[0])
        key = (tp.topic, tp.partition) if tp is not None else None
        current = self._log_dir_of.get(key) if key is not None else None
        if (key is None or current is None or current == d or d in self.offline_dirs
                or key in self._futures):
            log.warning("replica_move_dropped", future_dir=str(path),
                        reason="its partition has no log here in another dir")
            self._pending_dir_deletes.append((0, path))
            return
        try:
            for child in path.iterdir():  # the copy starts over: nothing stale may remain
                if child.is_dir():
                    shutil.rmtree(child)
                else:
                    child.unlink()
        except OSError as exc:
            log.warning("replica_move_dropped", future_dir=str(path), reason=str(exc))
            self._pending_dir_deletes.append((0, path))
            return
        plog = self._logs[key]
        self._futures[key] = FutureLog(key[0], key[1], d, path, plog.dir,
                                       current_end_offset=plog.log_end_offset)
        log.info("replica_move_resumed", future_dir=str(path), from_dir=str(current))

    def _load_dir(self, d: Path) -> None:
        """One log dir's partitions (an OSError: the dir is unusable)."""
        d.mkdir(parents=True, exist_ok=True)
        marker = self._file(d, CLEAN_SHUTDOWN_MARKER)
        clean = marker.exists()
        self.had_clean_shutdown[d] = clean
        try:
            recovery = read_offsets_checkpoint(self._file(d, RECOVERY_POINT_CHECKPOINT))
        except CheckpointError:
            recovery, clean = {}, False
        try:
            starts = read_offsets_checkpoint(self._file(d, LOG_START_OFFSET_CHECKPOINT))
        except CheckpointError:
            starts = {}
        with contextlib.suppress(CheckpointError):
            self.cleaner_checkpoints.update(
                read_offsets_checkpoint(self._file(d, CLEANER_OFFSET_CHECKPOINT))
            )
        for child in sorted(d.iterdir()):
            if not child.is_dir():
                continue
            if not self._owns_dir(child.name):
                continue  # another worker's (broker/node/shards.py)
            if child.name.endswith(DELETE_DIR_SUFFIX):
                self._pending_dir_deletes.append((0, child))
                continue
            if child.name.endswith(FUTURE_DIR_SUFFIX):
                self._found_futures.append((d, child))  # resumed once every dir is loaded
                continue
            tp = TopicPartition.parse_dir_name(child.name)
            if tp is None or "." in child.name.rsplit("-", 1)[-1]:
                continue
            if tp.topic in RAFT_OWNED_TOPICS:
                continue  # the metadata log: Raft's, not ours (see the docstring)
            key = (tp.topic, tp.partition)
            if key in self._logs:
                raise KafkaError(
                    ErrorCode.kafka_storage_error,
                    f"{tp} found in two log dirs: {self._log_dir_of[key]} and {d}",
                )
            plog = PartitionLog(
                child,
                tp,
                self.default_config,
                clock=self.clock,
                recovery_point=recovery.get(key, 0),
                log_start_offset=starts.get(key, 0),
                clean_shutdown=clean,
            )
            if plog.recovered_bytes_truncated:
                log.warning(
                    "log recovery truncated",
                    partition=child.name,
                    bytes=plog.recovered_bytes_truncated,
                )
            self._logs[key] = plog
            self._log_dir_of[key] = d
        # The marker is only valid for one start: remove it now that we run.
        if marker.exists():
            marker.unlink()
            fsync_dir(d)
        self._write_checkpoints_for(d)

    def _file(self, d: Path, name: str) -> Path:
        return d / (name + self.file_suffix)

    def _owns_dir(self, name: str) -> bool:
        """Whether a partition directory (live, "-delete" or "-future") is this worker's;
        a name that is no partition's is left to the checks that follow."""
        if self.owns is None:
            return True
        base = name
        for suffix in (DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX):
            if base.endswith(suffix):
                base = base[: -len(suffix)].rsplit(".", 1)[0]
        tp = TopicPartition.parse_dir_name(base)
        return tp is None or self.owns(tp.topic, tp.partition)

    # ------------------------------------------------------------------ access

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    # ------------------------------------------------------------------ log dir failure

    @property
    def online_dirs(self) -> list[Path]:
        return [d for d in self.log_dirs if d not in self.offline_dirs]

    def dir_id(self, d: Path) -> uuid.UUID:
        return self.dir_ids[d]

    def dir_by_id(self, dir_id: uuid.UUID) -> Path | None:
        return next((d for d, i in self.dir_ids.items() if i == dir_id), None)

    def dir_of_path(self, path: Path) -> Path | None:
        """The log dir holding `path` (a partition directory or a file in one)."""
        for d in self.log_dirs:
            if path == d or d in path.parents:
                return d
        return None

    def fail_dir(self, d: Path, reason: object) -> None:
        """Take log dir `d` offline after an I/O error (once): its logs are closed and
        dropped, and every dir_failure_listener is called with `d` (from the caller's
        thread)."""
        with self._lock:
            if d in self.offline_dirs or d not in self.log_dirs:
                return
            self.offline_dirs.add(d)
            gone = self._logs_in(d)
            for key, _plog in gone:
                del self._logs[key]
                del self._log_dir_of[key]
                self.cleaner_checkpoints.pop(key, None)
                self.offline_logs[key] = d
            self._pending_dir_deletes = [(t, p) for t, p in self._pending_dir_deletes
                                         if p.parent != d]
            for key, fut in list(self._futures.items()):
                if fut.log_dir == d or key in self.offline_logs:
                    fut.aborted = True
                    del self._futures[key]
        log.error("log_dir_failed", log_dir=str(d), directory_id=str(self.dir_ids[d]),
                  partitions=len(gone), reason=str(reason),
                  online_dirs=[str(x) for x in self.online_dirs])
        for _key, plog in gone:
            self.cleaner.abort(plog)
            with contextlib.suppress(Exception):
                plog.close()
        for listener in list(self.dir_failure_listeners):
            try:
                listener(d)
            except Exception:
                log.exception("log_dir_failure_listener_failed", log_dir=str(d))

    def fail_log(self, plog: PartitionLog, reason: object) -> None:
        """An I/O error on `plog`: its log dir goes offline. Not when `plog` is no longer
        the partition's log here (a move swapped it out, or it was deleted): its directory
        was renamed away, so a path-based write on it from a thread that still held it
        (the periodic flush) fails with no fault in the dir."""
        tp = plog.topic_partition
        with self._lock:
            live = self._logs.get((tp.topic, tp.partition)) is plog
        if not live:
            log.info("retired_log_io_error", partition=plog.dir.name, reason=str(reason))
            return
        d = self.dir_of_path(plog.dir)
        if d is not None:
            self.fail_dir(d, reason)

    def all_logs(self) -> list[PartitionLog]:
        return list(self._logs.values())

    def get_or_create(
        self,
        topic: str,
        partition: int,
        config: LogConfig | None = None,
        topic_id: uuid.UUID | None = None,
    ) -> PartitionLog:
        """The partition's log, created if missing. An existing log recorded under a
        different topic id belongs to an earlier topic of the same name (deleted while
        this node was away): it is deleted and a fresh log created, as Kafka does with
        stray logs."""
        key = (topic, partition)
        with self._lock:
            existing = self._logs.get(key)
            if existing is not None:
                stale = topic_id is not None and existing.topic_id not in (None, topic_id)
                if not stale:
                    if config is not None:
                        existing.update_config(config)
                    if topic_id is not None:
                        existing.set_topic_id(topic_id)
                    return existing
                log.warning(
                    "deleting stray log",
                    partition=existing.dir.name,
                    topic_id=str(existing.topic_id),
                    expected=str(topic_id),
                )
                self.delete(topic, partition)
            if not topic or not set(topic) <= _LEGAL_TOPIC_CHARS or topic in (".", ".."):
                raise KafkaError(ErrorCode.invalid_topic_exception, f"topic name {topic!r}")
            if topic in RAFT_OWNED_TOPICS:
                raise KafkaError(ErrorCode.invalid_topic_exception,
                                 f"{topic} is the metadata log, owned by Raft")
            if partition < 0:
                raise KafkaError(ErrorCode.unknown_topic_or_partition, f"partition {partition}")
            if key in self.offline_logs:
                raise KafkaError(ErrorCode.kafka_storage_error,
                                 f"{topic}-{partition} is in the offline log dir "
                                 f"{self.offline_logs[key]}")
            preferred = self.preferred_dirs.pop(key, None)
            d = preferred if preferred in self.online_dirs else self._next_log_dir()
            tp = TopicPartition(topic, partition)
            plog = PartitionLog(
                d / tp.dir_name(),
                tp,
                config or self.default_config,
                clock=self.clock,
                topic_id=topic_id,
            )
            # No fsync of the log dir here: at 100,000 partitions one per new partition was
            # a fifth of a broker's time while it applied them, on its event loop (issue
            # 17). An empty partition lost in a crash is created again from the metadata
            # log; its first flush makes the directory entry durable before its data.
            plog.parent_dir_unsynced = True
            self._logs[key] = plog
            self._log_dir_of[key] = d
            return plog

    # ------------------------------------------------------------------ replica moves

    def future_logs(self) -> list[FutureLog]:
        return list(self._futures.values())

    def future_of(self, topic: str, partition: int) -> FutureLog | None:
        return self._futures.get((topic, partition))

    def create_future(self, topic: str, partition: int, dest: Path) -> FutureLog:
        """A future copy of the partition's log in log dir `dest` (an online dir other than
        its current one); an existing future copy elsewhere is dropped first."""
        key = (topic, partition)
        with self._lock:
            plog = self._logs.get(key)
            if plog is None:
                raise KafkaError(ErrorCode.replica_not_available, f"{topic}-{partition}")
            existing = self._futures.get(key)
            if existing is not None:
                if existing.log_dir == dest:
                    return existing
                self.abort_future(topic, partition)
            path = dest / f"{plog.dir.name}.{uuid.uuid4().hex}{FUTURE_DIR_SUFFIX}"
            try:
                path.mkdir()
                fsync_dir(dest)
            except OSError as exc:
                self.fail_dir(dest, exc)
                raise KafkaError(ErrorCode.kafka_storage_error, f"{dest}: {exc}") from None
            fut = FutureLog(topic, partition, dest, path, plog.dir,
                            current_end_offset=plog.log_end_offset)
            self._futures[key] = fut
            return fut

    def abort_future(self, topic: str, partition: int) -> None:
        with self._lock:
            fut = self._futures.pop((topic, partition), None)
        if fut is not None:
            fut.aborted = True
            fut.remove()

    def complete_future(self, fut: FutureLog) -> PartitionLog:
        """The last copy pass and the swap: the future directory becomes the partition's
        log in its new dir and the old one is renamed for deletion. Call on the thread that
        appends to the log (nothing may write to it meanwhile); returns the new log."""
        key = (fut.topic, fut.partition)
        with self._lock:
            old = self._logs.get(key)
            if old is None or self._futures.get(key) is not fut or fut.aborted:
                raise KafkaError(ErrorCode.replica_not_available,
                                 f"{fut.topic}-{fut.partition}: its move was abandoned")
            src_dir = self._log_dir_of[key]
            with old._lock:  # the cleaner swaps segments under it
                old.flush()
                fut.copy_pass(old.log_end_offset)
                fut.sync()
                retired = src_dir / f"{old.dir.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
                os.replace(old.dir, retired)
                final = fut.log_dir / old.dir.name
                try:
                    os.replace(fut.path, final)
                except OSError:
                    os.replace(retired, old.dir)  # the old log stays where it was
                    raise
                fsync_dir(src_dir)
                fsync_dir(fut.log_dir)
                new = PartitionLog(
                    final, old.topic_partition, old.config, clock=self.clock,
                    recovery_point=old.recovery_point, log_start_offset=old.log_start_offset,
                    clean_shutdown=False)
                new.update_high_watermark(old.high_watermark)
            del self._futures[key]
            self._logs[key] = new
            self._log_dir_of[key] = fut.log_dir
            due = self.clock() + old.config.file_delete_delay_ms
            self._retired.append((due, old))
            self._pending_dir_deletes.append((due, retired))
        for d in (src_dir, fut.log_dir):
            self._write_checkpoints_for_safely(d)
        log.info("replica_moved", partition=new.dir.name, from_dir=str(src_dir),
                 to_dir=str(fut.log_dir), log_end_offset=new.log_end_offset)
        return new

    def _write_checkpoints_for_safely(self, d: Path) -> None:
        if d in self.offline_dirs:
            return
        try:
            self._write_checkpoints_for(d)
        except OSError as exc:
            self.fail_dir(d, exc)

    def _next_log_dir(self) -> Path:
        """Kafka's placement: the online dir holding the fewest partitions (the first such)
        among those not cordoned, counted once per call, not once per partition (O(n) per
        new partition made creating 100,000 of them quadratic)."""
        online = self.online_dirs
        if not online:
            raise KafkaError(ErrorCode.kafka_storage_error, "every log dir is offline")
        if len(online) == 1:
            return online[0]
        cordoned = self.cordoned()
        candidates = [d for d in online if d not in cordoned] or online[:1]
        counts = collections.Counter(self._log_dir_of.values())
        return min(candidates, key=lambda d: (counts[d], self.log_dirs.index(d)))

    def cordoned_dir_ids(self) -> list[uuid.UUID]:
        cordoned = self.cordoned()
        return [self.dir_ids[d] for d in self.log_dirs if d in cordoned]

    def log_dir_of(self, topic: str, partition: int) -> Path | None:
        return self._log_dir_of.get((topic, partition))

    def delete(self, topic: str, partition: int) -> None:
        """Close the log, rename its directory to `<tp>.<uuid>-delete`, remove it later."""
        key = (topic, partition)
        self.abort_future(topic, partition)
        with self._lock:
            plog = self._logs.pop(key, None)
            d = self._log_dir_of.pop(key, None)
            self.cleaner_checkpoints.pop(key, None)
        if plog is None or d is None:
            return
        self.cleaner.abort(plog)
        plog.close()
        target = d / f"{plog.dir.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
        os.replace(plog.dir, target)
        fsync_dir(d)
        with self._lock:
            self._pending_dir_deletes.append(
                (self.clock() + plog.config.file_delete_delay_ms, target)
            )
            self._write_checkpoints_for(d)

    # ------------------------------------------------------------------ periodic work

    def tick(self, now_ms: int) -> None:
        """One round of periodic work, each part on its own interval."""
        for plog in self.all_logs():
            try:
                plog.maybe_flush(now_ms)
                plog.delete_expired_files(now_ms)
            except OSError as exc:
                self.fail_log(plog, exc)
        if now_ms - self._last_retention_ms >= self.retention_check_interval_ms:
            self._last_retention_ms = now_ms
            self.run_retention(now_ms)
        self._delete_pending_dirs(now_ms)
        if now_ms - self._last_checkpoint_ms >= self.flush_checkpoint_interval_ms:
            self._last_checkpoint_ms = now_ms
            self.checkpoint_recovery_points()
        if (
            now_ms - self._last_start_checkpoint_ms
            >= self.flush_start_offset_checkpoint_interval_ms
        ):
            self._last_start_checkpoint_ms = now_ms
            self.checkpoint_log_start_offsets()
        if self.cleaner_enabled:
            self.cleaner.clean_once(now_ms)

    def run_retention(self, now_ms: int) -> int:
        deleted = 0
        for plog in self.all_logs():
            deleted += plog.delete_old_segments(now_ms)
        return deleted

    def _delete_pending_dirs(self, now_ms: int, *, force: bool = False) -> None:
        with self._lock:
            retired = [p for t, p in self._retired if force or t <= now_ms]
            self._retired = [(t, p) for t, p in self._retired if not (force or t <= now_ms)]
        for plog in retired:
            with contextlib.suppress(Exception):
                plog.close()
        with self._lock:
            due = [p for t, p in self._pending_dir_deletes if force or t <= now_ms]
            self._pending_dir_deletes = [
                (t, p) for t, p in self._pending_dir_deletes if not (force or t <= now_ms)
            ]
        for p in due:
            shutil.rmtree(p, ignore_errors=True)

    def _logs_in(self, d: Path) -> list[tuple[tuple[str, int], PartitionLog]]:
        return [(k, v) for k, v in list(self._logs.items()) if self._log_dir_of.get(k) == d]

    def _write_checkpoints_for(self, d: Path) -> None:
        logs = self._logs_in(d)
        write_offsets_checkpoint(
            self._file(d, RECOVERY_POINT_CHECKPOINT), {k: p.recovery_point for k, p in logs}
        )
        write_offsets_checkpoint(
            self._file(d, LOG_START_OFFSET_CHECKPOINT), {k: p.log_start_offset for k, p in logs}
        )
        write_offsets_checkpoint(
            self._file(d, CLEANER_OFFSET_CHECKPOINT),
            {k: o for k, o in self.cleaner_checkpoints.items() if self._log_dir_of.get(k) == d},
        )

    def write_dir_checkpoint(self, d: Path, name: str,
                             offsets: dict[tuple[str, int], int]) -> bool:
        """Write one offsets checkpoint file in log dir `d`; an I/O error takes `d` offline
        (False)."""
        if d in self.offline_dirs:
            return False
        try:
            write_offsets_checkpoint(self._file(d, name), offsets)
        except OSError as exc:
            self.fail_dir(d, exc)
            return False
        return True

    def checkpoint_recovery_points(self) -> None:
        for d in self.online_dirs:
            self.write_dir_checkpoint(d, RECOVERY_POINT_CHECKPOINT,
                                      {k: p.recovery_point for k, p in self._logs_in(d)})

    def checkpoint_log_start_offsets(self) -> None:
        for d in self.online_dirs:
            self.write_dir_checkpoint(d, LOG_START_OFFSET_CHECKPOINT,
                                      {k: p.log_start_offset for k, p in self._logs_in(d)})

    def checkpoint_cleaner_offsets(self) -> None:
        for d in self.online_dirs:
            self.write_dir_checkpoint(d, CLEANER_OFFSET_CHECKPOINT, {
                k: o for k, o in self.cleaner_checkpoints.items() if self._log_dir_of.get(k) == d})

    # ------------------------------------------------------------------ background runner

    def start(self, interval_s: float = 1.0) -> None:
        """Run tick() every `interval_s` on a daemon thread until stop()."""
        if self._thread is not None:
            return
        self._stop.clear()

        def run() -> None:
            while not self._stop.wait(interval_s):
                try:
                    self.tick(self.clock())
                except Exception:
                    log.exception("log manager tick failed")

        self._thread = threading.Thread(target=run, name="log-manager", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None

    def shutdown(self) -> None:
        """Stop background work, flush and close every log, write checkpoints, then the
        clean-shutdown marker (last, so a crash before it forces recovery)."""
        self.stop()
        with self._lock:
            for plog in self._logs.values():
                self.cleaner.abort(plog)
                plog.close()
            self._delete_pending_dirs(0, force=True)
            for d in self.online_dirs:
                if not d.exists():
                    continue
                self._write_checkpoints_for(d)
                marker = self._file(d, CLEAN_SHUTDOWN_MARKER)
                fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.fsync(fd)
                os.close(fd)
                fsync_dir(d)


def _directory_id(d: Path) -> uuid.UUID:
    """The `directory.id` of a log dir's meta.properties (Kafka's base64 uuid), or a random
    one for this process when the directory has none (unformatted, in tests)."""
    from broker.protocol.kafka_uuid import kafka_to_uuid

    try:
        props = read_meta_properties(d) or {}
        return kafka_to_uuid(props["directory.id"])
    except (OSError, KeyError, ValueError):
        return uuid.uuid4()


CORDONED_LOG_DIRS = "cordoned.log.dirs"


def cordoned_entry_problem(entries: Iterable[str], log_dirs: Iterable[str]) -> str | None:
    """Kafka's KafkaConfig.validateCordonedLogDirs, which a dynamic change also passes
    (its Scala `require`s: "requirement failed: ..."): `*` alone, or entries of log.dirs."""
    known = set(log_dirs)
    entries = list(entries)
    if "*" in entries and len(entries) > 1:
        return ("requirement failed: When cordoned.log.dirs is set to *, it must not contain "
                "other values")
    missing = [e for e in entries if e != "*" and e not in known]
    if missing:
        return ("requirement failed: All entries in cordoned.log.dirs must be present in "
                f"log.dirs or log.dir. Missing entries : {','.join(missing)}")
    return None


def cordoned_paths(entries: Iterable[str], log_dirs: Iterable[Path]) -> frozenset[Path]:
    """The log dirs `cordoned.log.dirs` names (`*`: all of them)."""
    dirs = list(log_dirs)
    wanted = [e for e in entries if e]
    if "*" in wanted:
        return frozenset(dirs)
    names = {Path(e) for e in wanted} | {Path(e).resolve() for e in wanted}
    return frozenset(d for d in dirs if d in names or d.resolve() in names)
