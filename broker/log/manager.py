"""LogManager: every PartitionLog of this process across `log.dirs`.

Per log dir it keeps Kafka's files: `recovery-point-offset-checkpoint`,
`log-start-offset-checkpoint`, `cleaner-offset-checkpoint` and the clean-shutdown marker
`.kafka_cleanshutdown`, written by shutdown() and removed by load(): if it is missing at
load, every log is recovered after its checkpointed recovery point.

Periodic work (retention, delayed file deletion, flush.ms, checkpoints, the cleaner) is
done by `tick(now_ms)`, which a background thread (`start()` / `stop()`) calls; tests
call tick directly with a fake clock.

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
from collections.abc import Callable
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
    read_offsets_checkpoint,
    write_offsets_checkpoint,
)
from broker.log.config import LogConfig
from broker.log.files import fsync_dir
from broker.log.log import PartitionLog, TopicPartition

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
    ) -> None:
        if not log_dirs:
            raise ValueError("log.dirs is empty")
        self.log_dirs = [Path(d) for d in log_dirs]
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
        from broker.log.cleaner import LogCleaner

        self.cleaner = LogCleaner(self)

    # ------------------------------------------------------------------ loading

    def load(self) -> None:
        """Open every partition directory; recover those of dirs without a clean marker."""
        with self._lock:
            for d in self.log_dirs:
                d.mkdir(parents=True, exist_ok=True)
                marker = d / CLEAN_SHUTDOWN_MARKER
                clean = marker.exists()
                self.had_clean_shutdown[d] = clean
                try:
                    recovery = read_offsets_checkpoint(d / RECOVERY_POINT_CHECKPOINT)
                except CheckpointError:
                    recovery, clean = {}, False
                try:
                    starts = read_offsets_checkpoint(d / LOG_START_OFFSET_CHECKPOINT)
                except CheckpointError:
                    starts = {}
                with contextlib.suppress(CheckpointError):
                    self.cleaner_checkpoints.update(
                        read_offsets_checkpoint(d / CLEANER_OFFSET_CHECKPOINT)
                    )
                for child in sorted(d.iterdir()):
                    if not child.is_dir():
                        continue
                    if child.name.endswith(DELETE_DIR_SUFFIX):
                        self._pending_dir_deletes.append((0, child))
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
            self._loaded = True

    # ------------------------------------------------------------------ access

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

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
            d = self._next_log_dir()
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

    def _next_log_dir(self) -> Path:
        """The log dir holding the fewest partitions (the first such): counted once per
        call, not once per partition (O(n) per new partition made creating 100,000 of them
        quadratic)."""
        if len(self.log_dirs) == 1:
            return self.log_dirs[0]
        counts = collections.Counter(self._log_dir_of.values())
        return min(self.log_dirs, key=lambda d: (counts[d], self.log_dirs.index(d)))

    def log_dir_of(self, topic: str, partition: int) -> Path | None:
        return self._log_dir_of.get((topic, partition))

    def delete(self, topic: str, partition: int) -> None:
        """Close the log, rename its directory to `<tp>.<uuid>-delete`, remove it later."""
        key = (topic, partition)
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
            plog.maybe_flush(now_ms)
            plog.delete_expired_files(now_ms)
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
            d / RECOVERY_POINT_CHECKPOINT, {k: p.recovery_point for k, p in logs}
        )
        write_offsets_checkpoint(
            d / LOG_START_OFFSET_CHECKPOINT, {k: p.log_start_offset for k, p in logs}
        )
        write_offsets_checkpoint(
            d / CLEANER_OFFSET_CHECKPOINT,
            {k: o for k, o in self.cleaner_checkpoints.items() if self._log_dir_of.get(k) == d},
        )

    def checkpoint_recovery_points(self) -> None:
        for d in self.log_dirs:
            logs = self._logs_in(d)
            write_offsets_checkpoint(
                d / RECOVERY_POINT_CHECKPOINT, {k: p.recovery_point for k, p in logs}
            )

    def checkpoint_log_start_offsets(self) -> None:
        for d in self.log_dirs:
            logs = self._logs_in(d)
            write_offsets_checkpoint(
                d / LOG_START_OFFSET_CHECKPOINT, {k: p.log_start_offset for k, p in logs}
            )

    def checkpoint_cleaner_offsets(self) -> None:
        for d in self.log_dirs:
            write_offsets_checkpoint(
                d / CLEANER_OFFSET_CHECKPOINT,
                {k: o for k, o in self.cleaner_checkpoints.items() if self._log_dir_of.get(k) == d},
            )

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
            for d in self.log_dirs:
                if not d.exists():
                    continue
                self._write_checkpoints_for(d)
                marker = d / CLEAN_SHUTDOWN_MARKER
                fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.fsync(fd)
                os.close(fd)
                fsync_dir(d)
