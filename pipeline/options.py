"""Source and sink options with the names, defaults and checks of Spark's Kafka connector.

Pure: strings in, frozen values or a `SkiffOptionError` (a ValueError, as Spark's
IllegalArgumentException) out. Nothing here talks to a broker; resolving "earliest",
"latest" and timestamps to offsets happens in `pipeline.kafka`.

Offset specifications (Spark's KafkaOffsetRangeLimit):
    Earliest | Latest | Specific({(topic, partition): offset, -2 earliest, -1 latest})
    | ByTimestamp({(topic, partition): ms}) | GlobalTimestamp(ms)
Precedence as in Spark: a global timestamp beats per-partition timestamps, which beat
`startingOffsets` / `endingOffsets`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

EARLIEST = -2
LATEST = -1

TopicPartition = tuple[str, int]

STRATEGY_KEYS = ("assign", "subscribe", "subscribepattern")
# Spark refuses these consumer settings because it manages offsets itself.
_REFUSED_CONSUMER = ("enable.auto.commit", "interceptor.classes")
_REFUSED_PRODUCER = ("interceptor.classes",)
# Spark Kafka options this connector does not implement: refused, never ignored.
_UNSUPPORTED = {
    "minoffsetspertrigger": "minOffsetsPerTrigger",
    "maxtriggerdelay": "maxTriggerDelay",
    "maxrecordsperpartition": "maxRecordsPerPartition",
}
# Spark options accepted for drop-in compatibility that have no effect here (documented).
_ACCEPTED_NOOP = ("fetchoffset.numretries", "fetchoffset.retryintervalms")
_READ_KEYS = {
    "assign", "subscribe", "subscribepattern", "startingoffsets", "endingoffsets",
    "startingtimestamp", "endingtimestamp", "startingoffsetsbytimestamp",
    "endingoffsetsbytimestamp", "startingoffsetsbytimestampstrategy",
    "maxoffsetspertrigger", "minpartitions", "failondataloss", "includeheaders",
    "kafkaconsumer.polltimeoutms", "groupidprefix", "skiff.partitionspertask",
}


class SkiffOptionError(ValueError):
    """A wrong or conflicting option; raised while Spark plans the query."""


@dataclass(frozen=True)
class Earliest:
    pass


@dataclass(frozen=True)
class Latest:
    pass


@dataclass(frozen=True)
class Specific:
    offsets: dict[TopicPartition, int]


@dataclass(frozen=True)
class ByTimestamp:
    timestamps: dict[TopicPartition, int]


@dataclass(frozen=True)
class GlobalTimestamp:
    timestamp: int


OffsetSpec = Earliest | Latest | Specific | ByTimestamp | GlobalTimestamp


@dataclass(frozen=True)
class Subscription:
    """Which partitions a query reads: `kind` is assign, subscribe or subscribePattern."""

    kind: str
    topics: tuple[str, ...] = ()
    pattern: str = ""
    assigned: tuple[TopicPartition, ...] = ()

    def matches(self, topic: str) -> bool:
        if self.kind == "subscribe":
            return topic in self.topics
        if self.kind == "subscribePattern":
            return re.fullmatch(self.pattern, topic) is not None
        return any(t == topic for t, _ in self.assigned)


@dataclass(frozen=True)
class ReadOptions:
    bootstrap: str
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    max_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    starting_by_timestamp_latest: bool = False
    poll_timeout_ms: int = 120_000
    partitions_per_task: int = 1
    group_id_prefix: str = "spark-kafka-source"
    client: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class WriteOptions:
    bootstrap: str
    topic: str | None
    client: dict[str, str] = field(default_factory=dict)
    exactly_once: bool = False
    transactional_id_prefix: str | None = None  # None: derived from the query id


def lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items()}


def _bool(opts: dict[str, str], key: str, name: str, default: bool) -> bool:
    raw = opts.get(key)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value not in ("true", "false"):
        raise SkiffOptionError(f"Option '{name}' must be true or false, not '{raw}'")
    return value == "true"


def _positive_int(opts: dict[str, str], key: str, name: str) -> int | None:
    raw = opts.get(key)
    if raw is None:
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        raise SkiffOptionError(f"Option '{name}' must be an integer, not '{raw}'") from None
    if value <= 0:
        raise SkiffOptionError(f"{name} must be positive")
    return value


def parse_partition_json(text: str, name: str) -> dict[TopicPartition, int]:
    """Spark's `{"topic":{"0":23,"1":-1}}` (offsets or timestamps)."""
    try:
        doc = json.loads(text)
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        raise SkiffOptionError(
            f"Expected e.g. {{\"topicA\":{{\"0\":23,\"1\":-1}},\"topicB\":{{\"0\":-2}}}}, "
            f"got {text} (option '{name}')")
    out: dict[TopicPartition, int] = {}
    for topic, parts in doc.items():
        if not isinstance(parts, dict):
            raise SkiffOptionError(
                f"Expected e.g. {{\"topicA\":{{\"0\":23,\"1\":-1}}}}, got {text} (option '{name}')")
        for p, off in parts.items():
            try:
                part = int(p)
            except ValueError:
                raise SkiffOptionError(
                    f"Partition '{p}' of topic '{topic}' is not an integer (option '{name}')"
                ) from None
            if isinstance(off, bool) or not isinstance(off, int):
                raise SkiffOptionError(
                    f"Offset {off!r} of {topic}-{part} is not an integer (option '{name}')")
            out[(str(topic), part)] = off
    return out


def parse_assign(text: str) -> tuple[TopicPartition, ...]:
    """Spark's `{"topicA":[0,1],"topicB":[2,4]}`."""
    if not text.strip().startswith("{"):
        raise SkiffOptionError(
            f"No topicpartitions to assign as specified value for option 'assign' is '{text}'")
    try:
        doc = json.loads(text)
    except ValueError:
        doc = None
    if not isinstance(doc, dict) or not all(
        isinstance(v, list) and all(isinstance(p, int) and not isinstance(p, bool) for p in v)
        for v in doc.values()
    ):
        raise SkiffOptionError(
            f"Expected e.g. {{\"topicA\":[0,1],\"topicB\":[0,1]}}, got {text} (option 'assign')")
    tps = tuple((str(t), int(p)) for t, ps in doc.items() for p in ps)
    if not tps:
        raise SkiffOptionError(
            f"No topicpartitions to assign as specified value for option 'assign' is '{text}'")
    return tps


def _subscription(opts: dict[str, str]) -> Subscription:
    given = [k for k in STRATEGY_KEYS if k in opts]
    names = "assign, subscribe, subscribePattern"
    if not given:
        raise SkiffOptionError(
            f"One of the following options must be specified for Kafka source: {names}. "
            "See the docs for more details.")
    if len(given) > 1:
        raise SkiffOptionError(
            f"Only one of the following options can be specified for Kafka source: {names}. "
            "See the docs for more details.")
    key = given[0]
    value = opts[key]
    if key == "assign":
        return Subscription("assign", assigned=parse_assign(value))
    if key == "subscribe":
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise SkiffOptionError(
                "No topics to subscribe to as specified value for option "
                f"'subscribe' is '{value}'")
        return Subscription("subscribe", topics=topics)
    pattern = value.strip()
    if not pattern:
        raise SkiffOptionError(
            "Pattern to subscribe is empty as specified value for option "
            f"'subscribePattern' is '{value}'")
    try:
        re.compile(pattern)
    except re.error as e:
        raise SkiffOptionError(f"Option 'subscribePattern' is not a valid pattern: {e}") from None
    return Subscription("subscribePattern", pattern=pattern)


def _timestamp(raw: str, name: str) -> int:
    try:
        return int(raw.strip())
    except ValueError:
        raise SkiffOptionError(
            f"Option '{name}' must be a timestamp in milliseconds, not '{raw}'") from None


def offset_spec(opts: dict[str, str], which: str, default: OffsetSpec) -> OffsetSpec:
    """Spark's getKafkaOffsetRangeLimit for `which` in ("starting", "ending")."""
    ts_key, by_ts_key, off_key = (
        f"{which}timestamp", f"{which}offsetsbytimestamp", f"{which}offsets")
    if ts_key in opts:
        return GlobalTimestamp(_timestamp(opts[ts_key], f"{which}Timestamp"))
    if by_ts_key in opts:
        return ByTimestamp(parse_partition_json(opts[by_ts_key], f"{which}OffsetsByTimestamp"))
    raw = opts.get(off_key)
    if raw is None:
        return default
    value = raw.strip()
    if value.lower() == "earliest":
        return Earliest()
    if value.lower() == "latest":
        return Latest()
    return Specific(parse_partition_json(value, f"{which}Offsets"))


def _kafka_params(opts: Mapping[str, str], refused: tuple[str, ...], role: str) -> dict[str, str]:
    """The `kafka.*` options without their prefix, after Spark's refusals."""
    out: dict[str, str] = {}
    for k, v in opts.items():
        if not k.lower().startswith("kafka."):
            continue
        key = k[len("kafka."):]
        low = key.lower()
        if role == "consumer" and low == "auto.offset.reset":
            raise SkiffOptionError(
                "Kafka option 'auto.offset.reset' is not supported. Instead set the source "
                "option 'startingOffsets' to 'earliest' or 'latest' to specify where to start. "
                "Structured Streaming manages which offsets are consumed internally, rather "
                "than relying on the kafkaConsumer to do it.")
        for kind in ("key", "value"):
            if role == "consumer" and low == f"{kind}.deserializer":
                raise SkiffOptionError(
                    f"Kafka option '{kind}.deserializer' is not supported as {kind}s are "
                    "deserialized as byte arrays with ByteArrayDeserializer. Use DataFrame "
                    f"operations to explicitly deserialize the {kind}s.")
            if role == "producer" and low == f"{kind}.serializer":
                raise SkiffOptionError(
                    f"Kafka option '{kind}.serializer' is not supported as {kind}s are "
                    "serialized with ByteArraySerializer.")
        if low in refused:
            raise SkiffOptionError(f"Kafka option '{low}' is not supported")
        out[low] = str(v)
    return out


def _refuse_unsupported(opts: dict[str, str]) -> None:
    for key, name in _UNSUPPORTED.items():
        if key in opts:
            raise SkiffOptionError(
                f"Option '{name}' of Spark's Kafka source is not supported by the skiff "
                "source (see docs/pipeline.md)")


def _bootstrap(client: dict[str, str], role: str) -> str:
    servers = client.get("bootstrap.servers", "").strip()
    if not servers:
        raise SkiffOptionError(
            f"Option 'kafka.bootstrap.servers' must be specified for configuring Kafka {role}")
    return servers


def read_options(options: Mapping[str, str], *, streaming: bool | None) -> ReadOptions:
    """Checks and parses the options of `spark.read` / `spark.readStream`; with
    streaming=None only the checks that hold for both (Spark's validateGeneralOptions)."""
    opts = lower(options)
    _refuse_unsupported(opts)
    if streaming:
        if "endingoffsets" in opts:
            raise SkiffOptionError("ending offset not valid in streaming queries")
        if "endingoffsetsbytimestamp" in opts or "endingtimestamp" in opts:
            raise SkiffOptionError("ending timestamp not valid in streaming queries")
    starting = offset_spec(opts, "starting", Latest() if streaming else Earliest())
    ending = offset_spec(opts, "ending", Latest())
    if streaming is False:
        if isinstance(starting, Latest):
            raise SkiffOptionError("starting offset can't be latest for batch queries on Kafka")
        if isinstance(starting, Specific):
            for (t, p), off in starting.offsets.items():
                if off == LATEST:
                    raise SkiffOptionError(
                        f"startingOffsets for {t}-{p} can't be latest for batch queries on Kafka")
        if isinstance(ending, Earliest):
            raise SkiffOptionError("ending offset can't be earliest for batch queries on Kafka")
        if isinstance(ending, Specific):
            for (t, p), off in ending.offsets.items():
                if off == EARLIEST:
                    raise SkiffOptionError(
                        f"ending offset for {t}-{p} can't be earliest for batch queries on Kafka")
    for spec, name in ((starting, "startingOffsets"), (ending, "endingOffsets")):
        if isinstance(spec, Specific):
            for (t, p), off in spec.offsets.items():
                if off < EARLIEST:
                    raise SkiffOptionError(
                        f"Offset {off} of {t}-{p} in '{name}' is invalid: use an offset >= 0, "
                        "-1 for latest or -2 for earliest")
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise SkiffOptionError(
            "Option 'startingOffsetsByTimestampStrategy' must be 'error' or 'latest', "
            f"not '{opts['startingoffsetsbytimestampstrategy']}'")
    subscription = _subscription(opts)
    client = _kafka_params(options, _REFUSED_CONSUMER, "consumer")
    bootstrap = _bootstrap(client, "consumer")
    return ReadOptions(
        bootstrap=bootstrap,
        subscription=subscription,
        starting=starting,
        ending=ending,
        max_offsets_per_trigger=_positive_int(opts, "maxoffsetspertrigger",
                                              "maxOffsetsPerTrigger"),
        min_partitions=_positive_int(opts, "minpartitions", "minPartitions"),
        fail_on_data_loss=_bool(opts, "failondataloss", "failOnDataLoss", True),
        include_headers=_bool(opts, "includeheaders", "includeHeaders", False),
        starting_by_timestamp_latest=strategy == "latest",
        poll_timeout_ms=_positive_int(opts, "kafkaconsumer.polltimeoutms",
                                      "kafkaConsumer.pollTimeoutMs") or 120_000,
        # Spark's defaults: its batch relation's consumers and its streaming source's differ.
        group_id_prefix=opts.get("groupidprefix", "spark-kafka-relation" if streaming is False
                                 else "spark-kafka-source"),
        partitions_per_task=_positive_int(opts, "skiff.partitionspertask",
                                          "skiff.partitionsPerTask") or 1,
        client=client,
    )


def write_options(options: Mapping[str, str]) -> WriteOptions:
    opts = lower(options)
    client = _kafka_params(options, _REFUSED_PRODUCER, "producer")
    bootstrap = _bootstrap(client, "producer")
    topic = opts.get("topic")
    if topic is not None and not topic.strip():
        raise SkiffOptionError("Option 'topic' is empty")
    guarantee = opts.get("skiff.deliveryguarantee", "at-least-once").strip().lower()
    if guarantee not in ("at-least-once", "exactly-once"):
        raise SkiffOptionError(
            "Option 'skiff.deliveryGuarantee' must be 'at-least-once' or 'exactly-once', "
            f"not '{opts['skiff.deliveryguarantee']}'")
    prefix = opts.get("skiff.transactionalidprefix")
    if prefix is not None and not prefix.strip():
        raise SkiffOptionError("Option 'skiff.transactionalIdPrefix' is empty")
    if prefix is not None and guarantee != "exactly-once":
        raise SkiffOptionError(
            "Option 'skiff.transactionalIdPrefix' needs skiff.deliveryGuarantee=exactly-once")
    return WriteOptions(bootstrap=bootstrap, topic=topic.strip() if topic else None,
                        client=client, exactly_once=guarantee == "exactly-once",
                        transactional_id_prefix=prefix.strip() if prefix else None)


def known_read_option(key: str) -> bool:
    low = key.lower()
    return (low in _READ_KEYS or low in _ACCEPTED_NOOP or low in _UNSUPPORTED
            or low.startswith("kafka."))
