"""Share-group consume throughput, Skiff against Apache Kafka 4.4 in one run (issue 34), by hand.

Both brokers are started as bench/vs_kafka.py starts them (one combined KRaft node each, the
same settings where they share a key); both start with share groups on (formatted at 4.4;
a node formatted before 4.2 would get share.version 1 from Kafka's kafka-features tool).
For each partition count a topic gets `--records` records of `--size` bytes (librdkafka,
bench/perf.py's producer); then, for each consumer count, a fresh share group
(share.auto.offset.reset=earliest) reads them all with Kafka's own
kafka-share-consumer-perf-test (ShareConsumerPerformance, `--threads` consumers in one JVM,
implicit acknowledgement, no work per record). Two figures per row:

  share       records/s from the first record any consumer got to the tool's end (from the
              tool's progress lines): the consume rate itself;
  share+join  the tool's own nMsg.sec, whose clock starts before the consumers join: a
              fresh group's first record came 6-8 s after the tool's start on Kafka 4.4 in
              the first runs, about 0.5 s on Skiff, so with few records this row measures
              the join.

The sides alternate per row (Skiff first, then Kafka first); every row prints Skiff, Kafka
and Skiff / Kafka.

    PYTHONPATH=. python bench/share_bench.py                 # 1, 2, 4 consumers; 1, 6 partitions
    PYTHONPATH=. python bench/share_bench.py --records 200000 --repeats 3
    PYTHONPATH=. python bench/share_bench.py --smoke         # tiny sizes: that it works
"""

from __future__ import annotations

import argparse
import datetime
import json
import queue
import re
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench import perf  # noqa: E402
from bench.vs_kafka import (  # noqa: E402
    Side,
    Table,
    create_topic,
    load,
    log,
    order,
    pair,
)
from broker.testing.kafka_ref import (  # noqa: E402
    KAFKA_VERSION,
    PERF_TOOL_JVM_OPTS,
    kafka_classpath,
    run_java,
)

SHARE_PERF = "org.apache.kafka.tools.ShareConsumerPerformance"
FEATURES = "org.apache.kafka.tools.FeatureCommand"


def enable_share_groups(side: Side) -> None:
    """share.version=1 where it is lower (kafka-features upgrade, as an operator would)."""
    proc = run_java(FEATURES, "--bootstrap-server", side.bootstrap, "describe", timeout=120)
    level = next((int(line.split("FinalizedVersionLevel:")[1].split()[0])
                  for line in proc.stdout.splitlines()
                  if "Feature: share.version" in line and "FinalizedVersionLevel:" in line), 0)
    if level >= 1:
        return
    proc = run_java(FEATURES, "--bootstrap-server", side.bootstrap, "upgrade", "--feature",
                    "share.version=1", timeout=120)
    if proc.returncode != 0:
        raise RuntimeError(f"{side.name}: kafka-features upgrade failed: "
                           f"{proc.stdout} {proc.stderr}")


def from_earliest(bootstrap: str, group: str) -> None:
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest",
                    incremental_operation=AlterConfigOpType.SET)])
    for f in admin.incremental_alter_configs([res]).values():
        f.result(60)


def produce(bootstrap: str, topic: str, partitions: int, records: int, size: int) -> None:
    out: queue.Queue[dict[str, float]] = queue.Queue()
    perf.producer_proc(bootstrap, topic, partitions, records, size, "none", out)
    result = out.get()
    if result["undelivered"] or result["errors"]:
        raise RuntimeError(f"produce to {topic}: {result}")


DATE_FORMAT = "yyyy-MM-dd HH:mm:ss.SSS"
PROGRESS = re.compile(r"^([\d-]+ [\d:.]+), ([\d-]+ [\d:.]+), [\d.]+, [\d.]+, [\d.]+, (\d+), "
                      r"\d+ for share consumer \d+$")


def _ms(stamp: str) -> float:
    return datetime.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S.%f").timestamp() * 1000


@dataclass
class Consumed:
    tool_rate: float  # the tool's nMsg.sec: from its start (the group join included)
    rate: float  # from the first record any consumer got to the tool's end
    records: int
    problem: str | None


def share_consume(bootstrap: str, topic: str, group: str, records: int, consumers: int,
                  timeout_ms: int) -> Consumed:
    """kafka-share-consumer-perf-test, with its progress lines (--show-detailed-stats): the
    first a consumer prints comes with its first record, as each consumer's report clock
    starts when it does and the group join takes longer than the interval."""
    proc = subprocess.run(
        ["java", *PERF_TOOL_JVM_OPTS, "-cp", kafka_classpath(), SHARE_PERF,
         "--bootstrap-server", bootstrap, "--topic", topic, "--group", group,
         "--num-records", str(records), "--threads", str(consumers),
         "--timeout", str(timeout_ms), "--show-detailed-stats", "--reporting-interval", "100",
         "--date-format", DATE_FORMAT],
        capture_output=True, text=True, timeout=900, check=False)
    lines = [x.strip() for x in proc.stdout.splitlines() if x.strip()]
    head = next((i for i, x in enumerate(lines) if x.startswith("start.time")), None)
    group_line = next((x for x in reversed(lines)
                       if x.count(",") == 6 and "for share consumer" not in x), None)
    if proc.returncode != 0 or head is None or group_line is None:
        return Consumed(float("nan"), float("nan"), 0,
                        f"share-consumer-perf-test exit {proc.returncode}: "
                        f"{proc.stdout[-500:]} {proc.stderr[-500:]}")
    cols = dict(zip([c.strip() for c in lines[head].split(",")],
                    [v.strip() for v in group_line.split(",")], strict=False))
    got = int(float(cols["data.consumed.in.nMsg"]))
    firsts = [(_ms(m.group(2)), int(m.group(3))) for m in map(PROGRESS.match, lines) if m]
    if not firsts:
        return Consumed(float(cols["nMsg.sec"]), float("nan"), got, "no progress lines")
    t0, c0 = min(firsts)
    end = _ms(cols["end.time"])
    problem = None if got >= records else f"read {got} of {records}"
    return Consumed(float(cols["nMsg.sec"]), (got - c0) * 1000 / max(end - t0, 1.0), got,
                    problem)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--consumers", default="1,2,4")
    ap.add_argument("--partitions", default="1,6")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--timeout-ms", type=int, default=30_000,
                    help="the tool's --timeout: the longest wait between records")
    ap.add_argument("--smoke", action="store_true", help="2,000 records, one repeat")
    ap.add_argument("--json", type=Path, help="write the rows here too")
    args = ap.parse_args()
    if args.smoke:
        args.records, args.repeats = 2_000, 1
    consumer_counts = [int(x) for x in args.consumers.split(",")]
    partition_counts = [int(x) for x in args.partitions.split(",")]
    table = Table()
    log(f"Kafka {KAFKA_VERSION}; {args.records} records of {args.size} B; consumers "
        f"{consumer_counts}; partitions {partition_counts}; repeats {args.repeats}")
    with tempfile.TemporaryDirectory(prefix="share-bench-") as tmp, pair(Path(tmp)) as sides:
        for s in sides.values():
            enable_share_groups(s)
        topics: dict[tuple[str, int], str] = {}
        for partitions in partition_counts:
            for s in sides.values():
                topic = f"share-{partitions}p-{uuid.uuid4().hex[:6]}"
                create_topic(s.bootstrap, topic, partitions)
                t0 = time.monotonic()
                produce(s.bootstrap, topic, partitions, args.records, args.size)
                log(f"{s.name}: {args.records} records into {topic} in "
                    f"{time.monotonic() - t0:.1f} s")
                topics[(s.name, partitions)] = topic
        n = 0
        for repeat in range(args.repeats):
            for partitions in partition_counts:
                for consumers in consumer_counts:
                    label = f"{consumers} consumer(s), {partitions} partition(s)"
                    for name in order(n):
                        s = sides[name]
                        group = f"share-bench-{uuid.uuid4().hex[:6]}"
                        from_earliest(s.bootstrap, group)
                        c = share_consume(
                            s.bootstrap, topics[(name, partitions)], group, args.records,
                            consumers, args.timeout_ms)
                        log(f"{name} {label} (repeat {repeat + 1}): {c.rate:,.0f} records/s "
                            f"from the first record, {c.tool_rate:,.0f} with the join (the "
                            f"tool's), {c.records} records"
                            + (f"; {c.problem}" if c.problem else ""))
                        ok = c.problem is None
                        table.add("share", label, "records/s", "higher", name,
                                  c.rate if ok else None)
                        table.add("share+join", label, "records/s", "higher", name,
                                  c.tool_rate if ok else None)
                    n += 1
    table.show()
    print(f"load {load()}")
    if args.json:
        args.json.write_text(json.dumps(table.as_json(), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
