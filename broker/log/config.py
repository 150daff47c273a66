"""Per-topic log configuration, Kafka's names and defaults."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.protocol.records import LONG_MAX as LONG_MAX

INT_MAX = (1 << 31) - 1


@dataclass
class LogConfig:
    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * 24 * 3600 * 1000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    retention_ms: int = 7 * 24 * 3600 * 1000
    retention_bytes: int = -1
    cleanup_policy: str = "delete"
    max_message_bytes: int = 1048588
    message_timestamp_type: str = "CreateTime"
    message_timestamp_before_max_ms: int = LONG_MAX
    # Kafka 4.0 default (KIP-1030): at most one hour in the future.
    message_timestamp_after_max_ms: int = 3_600_000
    delete_retention_ms: int = 24 * 3600 * 1000
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    file_delete_delay_ms: int = 60000
    compression_type: str = "producer"
    preallocate: bool = True
    # Skiff's: each segment keeps its newest drop_behind_bytes in the page cache and has
    # the kernel write back and forget the rest (broker/log/drop_behind.py); -1 leaves
    # the cache to the kernel, as Kafka does.
    drop_behind_bytes: int = 64 * 1024 * 1024
    # Not a Kafka topic config: fsync every append before acknowledging (metadata log).
    fsync_on_append: bool = False

    @property
    def compact(self) -> bool:
        return "compact" in self.policies

    @property
    def delete(self) -> bool:
        return "delete" in self.policies

    @property
    def policies(self) -> set[str]:
        return {p.strip() for p in self.cleanup_policy.split(",") if p.strip()}

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @classmethod
    def from_topic_configs(
        cls, configs: dict[str, str], base: LogConfig | None = None
    ) -> LogConfig:
        """Kafka topic configs (`segment.bytes` ...) over `base` (or Kafka's defaults).

        Unknown keys are ignored (other layers own them); bad values raise INVALID_CONFIG.
        """
        values: dict[str, Any] = {} if base is None else base.__dict__.copy()
        types = {f.name: f.type for f in fields(cls)}
        for key, raw in configs.items():
            name = key.replace(".", "_")
            if name not in types or name == "fsync_on_append":
                continue
            kind = types[name]
            try:
                if kind == "int":
                    values[name] = int(raw)
                elif kind == "float":
                    values[name] = float(raw)
                elif kind == "bool":
                    if raw.lower() not in ("true", "false"):
                        raise ValueError(raw)
                    values[name] = raw.lower() == "true"
                else:
                    values[name] = raw
            except ValueError:
                raise KafkaError(ErrorCode.invalid_config, f"{key}={raw!r}") from None
        cfg = cls(**values)
        cfg.validate()
        return cfg

    def validate(self) -> None:
        def bad(msg: str) -> KafkaError:
            return KafkaError(ErrorCode.invalid_config, msg)

        if not 14 <= self.segment_bytes <= INT_MAX:
            raise bad(f"segment.bytes {self.segment_bytes}")
        if self.segment_ms < 1:
            raise bad(f"segment.ms {self.segment_ms}")
        if self.segment_index_bytes < 8:
            raise bad(f"segment.index.bytes {self.segment_index_bytes}")
        if self.index_interval_bytes < 0:
            raise bad(f"index.interval.bytes {self.index_interval_bytes}")
        if self.max_message_bytes < 0:
            raise bad(f"max.message.bytes {self.max_message_bytes}")
        if not self.policies <= {"delete", "compact"} or not self.policies:
            raise bad(f"cleanup.policy {self.cleanup_policy}")
        if self.message_timestamp_type not in ("CreateTime", "LogAppendTime"):
            raise bad(f"message.timestamp.type {self.message_timestamp_type}")
        if not 0.0 <= self.min_cleanable_dirty_ratio <= 1.0:
            raise bad(f"min.cleanable.dirty.ratio {self.min_cleanable_dirty_ratio}")
        if self.compression_type not in (
            "producer",
            "uncompressed",
            "none",
            "gzip",
            "snappy",
            "lz4",
            "zstd",
        ):
            raise bad(f"compression.type {self.compression_type}")
        if self.drop_behind_bytes < -1:
            raise bad(f"drop.behind.bytes {self.drop_behind_bytes}")
        if self.flush_messages < 1 or self.flush_ms < 0:
            raise bad("flush.messages / flush.ms")
