"""`format("skiff-logdir")`: batch reads straight from a stopped broker's log directories.

For backfills that must not load the brokers: point `path` at one or more `log.dirs`
entries of a stopped (or snapshotted) node. Partition directories are Kafka's
(`<topic>-<n>/<20-digit base offset>.log`); rows have the `skiff` source's schema and
the broker's offsets. Files are opened read-only and never recovered, truncated or
written: a torn tail (a node killed mid-write) ends the partition at its last whole
batch with a good CRC. Records below the partition's log start offset
(`log-start-offset-checkpoint`, moved by DeleteRecords) are not returned, as a broker
would not return them. Control batches (transaction markers) are skipped.

Options: path (required), subscribe | subscribePattern | assign, startingOffsets,
endingOffsets (earliest / latest / per-partition JSON with -2 / -1), minPartitions,
includeHeaders, failOnDataLoss.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from pipeline import _broker
from pipeline.options import (
    EARLIEST,
    LATEST,
    Earliest,
    Latest,
    OffsetSpec,
    SkiffOptionError,
    Specific,
    Subscription,
    _subscription,
    lower,
    offset_spec,
)
from pipeline.plan import OffsetRange, ranges_between, split_ranges
from pipeline.schema import arrow_schema, spark_schema

_KEYS = {"path", "paths", "subscribe", "subscribepattern", "assign", "startingoffsets",
         "endingoffsets", "minpartitions", "includeheaders", "failondataloss"}
ROWS_PER_BATCH = 32_768


@dataclass(frozen=True)
class LogDirOptions:
    paths: tuple[str, ...]
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    min_partitions: int | None
    include_headers: bool
    fail_on_data_loss: bool


def logdir_options(options: dict[str, str]) -> LogDirOptions:
    opts = lower(options)
    for key in opts:
        if key not in _KEYS:
            raise SkiffOptionError(f"Unknown option '{key}' for the skiff-logdir source "
                                   "(see docs/pipeline.md for the options it takes)")
    raw = opts.get("path") or opts.get("paths") or ""
    paths = tuple(p.strip() for p in raw.strip("[]").replace('"', "").split(",") if p.strip())
    if not paths:
        raise SkiffOptionError("Option 'path' must name the broker's log directory "
                               "(a log.dirs entry), e.g. load('/var/lib/skiff/logs')")
    for p in paths:
        if not Path(p).is_dir():
            raise SkiffOptionError(f"Log directory '{p}' does not exist")
    starting = offset_spec(opts, "starting", Earliest())
    ending = offset_spec(opts, "ending", Latest())
    for spec, name in ((starting, "startingOffsets"), (ending, "endingOffsets")):
        if not isinstance(spec, Earliest | Latest | Specific):
            raise SkiffOptionError(f"Timestamps are not supported by skiff-logdir ({name})")
    if isinstance(starting, Latest):
        raise SkiffOptionError("starting offset can't be latest for batch queries on Kafka")
    if isinstance(ending, Earliest):
        raise SkiffOptionError("ending offset can't be earliest for batch queries on Kafka")
    minp = opts.get("minpartitions")
    min_partitions = None
    if minp is not None:
        try:
            min_partitions = int(minp)
        except ValueError:
            raise SkiffOptionError(f"Option 'minPartitions' must be an integer, not '{minp}'"
                                   ) from None
        if min_partitions <= 0:
            raise SkiffOptionError("minPartitions must be positive")
    return LogDirOptions(
        paths=paths,
        subscription=_subscription(opts),
        starting=starting,
        ending=ending,
        min_partitions=min_partitions,
        include_headers=opts.get("includeheaders", "false").strip().lower() == "true",
        fail_on_data_loss=opts.get("failondataloss", "true").strip().lower() != "false",
    )


@dataclass(frozen=True)
class PartitionFiles:
    directory: str
    log_start_offset: int
    segments: tuple[tuple[int, str], ...]  # (base offset, .log path), ascending


def _segments(directory: Path) -> tuple[tuple[int, str], ...]:
    out = []
    for entry in os.scandir(directory):
        name = entry.name
        if name.endswith(".log") and name[:-4].isdigit():
            out.append((int(name[:-4]), entry.path))
    return tuple(sorted(out))


def scan(paths: Sequence[str], sub: Subscription) -> dict[tuple[str, int], PartitionFiles]:
    """The partitions the subscription covers, found in the log dirs."""
    found: dict[tuple[str, int], PartitionFiles] = {}
    for root in paths:
        starts: dict[tuple[str, int], int] = {}
        ckpt = Path(root) / _broker.LOG_START_OFFSET_CHECKPOINT
        if ckpt.exists():
            starts = _broker.read_offsets_checkpoint(ckpt)
        for entry in os.scandir(root):
            if not entry.is_dir():
                continue
            tp = _broker.parse_partition_dir(entry.name)
            if tp is None or tp[0].startswith("__") or not sub.matches(tp[0]):
                continue
            if sub.kind == "assign" and tp not in sub.assigned:
                continue
            found[tp] = PartitionFiles(entry.path, starts.get(tp, 0),
                                       _segments(Path(entry.path)))
    if sub.kind == "assign":
        missing = sorted(set(sub.assigned) - set(found))
        if missing:
            raise SkiffOptionError(
                "Partitions not found in the log directories: "
                + ", ".join(f"{t}-{p}" for t, p in missing))
    return found


def _batches(path: str) -> Iterator[tuple[_broker.BatchHeader, memoryview]]:
    """Whole batches with good CRCs, up to the first torn or corrupt one. The map is
    read-only and closed by the garbage collector once no batch view refers to it."""
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    mv = memoryview(mm)
    _end, batches = _broker.valid_prefix(mv)
    for pos, h in batches:
        yield h, mv[pos : pos + h.size]


def bounds(files: PartitionFiles) -> tuple[int, int]:
    """(earliest, latest) offsets of one partition on disk."""
    latest = files.segments[-1][0] if files.segments else 0
    for _base, path in reversed(files.segments):
        last = None
        for h, _ in _batches(path):
            last = h
        if last is not None:
            latest = last.next_offset
            break
    first = files.segments[0][0] if files.segments else latest
    return max(first, min(files.log_start_offset, latest)), latest


def read_partition(files: PartitionFiles, rng: OffsetRange, include_headers: bool
                   ) -> Iterator[pa.RecordBatch]:
    schema = arrow_schema(include_headers)
    ts_type = schema.field("timestamp").type
    segs = files.segments
    cols: dict[str, list[Any]] = {k: [] for k in ("key", "value", "offset", "ts", "tt", "h")}
    start = max(rng.from_offset, files.log_start_offset)

    def flush() -> pa.RecordBatch:
        n = len(cols["offset"])
        arrays = [
            pa.array(cols["key"], pa.binary()), pa.array(cols["value"], pa.binary()),
            pa.array([rng.topic] * n, pa.string()), pa.array([rng.partition] * n, pa.int32()),
            pa.array(cols["offset"], pa.int64()), pa.array(cols["ts"], ts_type),
            pa.array(cols["tt"], pa.int32()),
        ]
        if include_headers:
            arrays.append(pa.array(cols["h"], schema.field("headers").type))
        for v in cols.values():
            v.clear()
        return pa.RecordBatch.from_arrays(arrays, schema=schema)

    for i, (base, path) in enumerate(segs):
        next_base = segs[i + 1][0] if i + 1 < len(segs) else None
        if next_base is not None and next_base <= start:
            continue
        if base >= rng.until_offset:
            break
        for h, raw in _batches(path):
            if h.next_offset <= start or h.is_control:
                continue
            if h.base_offset >= rng.until_offset:
                break
            tt = int(h.timestamp_type)
            for r in _broker.decode_records(raw):
                if r.offset < start or r.offset >= rng.until_offset:
                    continue
                cols["key"].append(r.key)
                cols["value"].append(r.value)
                cols["offset"].append(r.offset)
                cols["ts"].append(r.timestamp * 1000)
                cols["tt"].append(tt)
                if include_headers:
                    cols["h"].append([{"key": k, "value": v} for k, v in r.headers]
                                     if r.headers else None)
            if len(cols["offset"]) >= ROWS_PER_BATCH:
                yield flush()
    if cols["offset"]:
        yield flush()


class LogDirPartition(InputPartition):
    def __init__(self, files: PartitionFiles, rng: OffsetRange) -> None:
        super().__init__((files.directory, rng))
        self.files = files
        self.range = rng


class SkiffLogDirDataSource(DataSource):
    """Reads topics from log directories on disk; never talks to a broker."""

    @classmethod
    def name(cls) -> str:
        return "skiff-logdir"

    def schema(self) -> StructType:
        return spark_schema(logdir_options(dict(self.options)).include_headers)

    def reader(self, schema: StructType) -> DataSourceReader:
        return SkiffLogDirReader(logdir_options(dict(self.options)))


class SkiffLogDirReader(DataSourceReader):
    def __init__(self, opts: LogDirOptions) -> None:
        self.opts = opts

    def partitions(self) -> Sequence[InputPartition]:
        opts = self.opts
        found = scan(opts.paths, opts.subscription)
        edges = {tp: bounds(f) for tp, f in found.items()}
        tps = sorted(found)
        start = _resolve(opts.starting, edges, tps, "starting")
        end = _resolve(opts.ending, edges, tps, "ending")
        for tp in tps:
            if start[tp] < edges[tp][0]:
                if opts.fail_on_data_loss:
                    from pipeline.kafka import data_loss_message

                    t, p = tp
                    raise SkiffOptionError(data_loss_message(
                        f"Cannot read offset {start[tp]} of {t}-{p}: its earliest offset "
                        f"on disk is {edges[tp][0]}"))
                start[tp] = edges[tp][0]
            end[tp] = max(start[tp], min(end[tp], edges[tp][1]))
        ranges = split_ranges(ranges_between(start, end), opts.min_partitions)
        return [LogDirPartition(found[(r.topic, r.partition)], r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, LogDirPartition):
            return  # Spark runs one empty task when partitions() planned none
        yield from read_partition(partition.files, partition.range, self.opts.include_headers)


def _resolve(spec: OffsetSpec, edges: dict[tuple[str, int], tuple[int, int]],
             tps: list[tuple[str, int]], which: str) -> dict[tuple[str, int], int]:
    if isinstance(spec, Earliest):
        return {tp: edges[tp][0] for tp in tps}
    if isinstance(spec, Latest):
        return {tp: edges[tp][1] for tp in tps}
    assert isinstance(spec, Specific)
    if set(spec.offsets) != set(tps):
        names = ", ".join(f"{t}-{p}" for t, p in sorted(tps))
        raise SkiffOptionError(
            f"If {which}Offsets contains specific offsets, you must specify all "
            f"TopicPartitions.\nUse -1 for latest, -2 for earliest.\nAssigned: [{names}]")
    out = {}
    for tp in tps:
        off = spec.offsets[tp]
        out[tp] = edges[tp][0] if off == EARLIEST else edges[tp][1] if off == LATEST else off
    return out


__all__ = ["SkiffLogDirDataSource"]
