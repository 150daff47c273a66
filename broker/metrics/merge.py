"""One broker's metrics from several processes (`skiff.broker.workers`, broker/node/shards.py).

Each worker counts what it serves (requests, connections, topic bytes, its partitions'
logs and replicas, its replica fetchers, its client quotas, its process) and answers the
node process's scrape with those families as plain values (`family_values`); the node
merges them with its own (`merge_families`), so a scraper sees one broker. Samples with the
same name and labels are summed (counters, histogram buckets and sums, connection and
partition counts, bytes of memory), but for the few that are a largest or a smallest of
the processes' values (MAX_SAMPLES, MIN_SAMPLES). A partition's figures come from its one
owner.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any

from prometheus_client.core import Metric
from prometheus_client.samples import Sample

# name, type, documentation, unit, samples as (name, labels, value)
FamilyValues = tuple[str, str, str, str, list[tuple[str, dict[str, str], float]]]

MAX_SAMPLES = frozenset({
    "kafka_server_replicafetchermanager_maxlag",  # the largest lag of any process
    "skiff_gc_pause_max_seconds",
    "process_max_fds",
    "python_info",
})
MIN_SAMPLES = frozenset({"process_start_time_seconds"})  # the broker's first process


def family_values(families: Iterable[Metric]) -> list[FamilyValues]:
    """Families as values that cross a channel (no prometheus_client objects)."""
    return [(m.name, m.type, m.documentation, m.unit,
             [(s.name, dict(s.labels), float(s.value)) for s in m.samples])
            for m in families]


def _combine(sample_name: str, a: float, b: float) -> float:
    if sample_name in MAX_SAMPLES:
        return max(a, b)
    if sample_name in MIN_SAMPLES or sample_name.endswith("_created"):
        return min(a, b)
    return a + b


def merge_families(own: Iterable[Metric], others: Iterable[list[FamilyValues]]
                   ) -> list[Metric]:
    """`own` with every other process's families merged in, in order of first appearance."""
    heads: dict[str, tuple[str, str, str]] = {}  # in order of first appearance
    samples: dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]] = {}
    for name, mtype, doc, unit, values in itertools.chain(family_values(own), *others):
        heads.setdefault(name, (mtype, doc, unit))
        table = samples.setdefault(name, {})
        for sname, labels, value in values:
            key = (sname, tuple(sorted(labels.items())))
            prev = table.get(key)
            table[key] = value if prev is None else _combine(sname, prev, value)
    out: list[Metric] = []
    for name, (mtype, doc, unit) in heads.items():
        metric = Metric(name, doc, mtype, unit)
        metric.samples = [Sample(sname, dict(labels), value)
                          for (sname, labels), value in samples[name].items()]
        out.append(metric)
    return out


def process_families() -> list[Any]:
    """prometheus_client's process, platform and GC families and Skiff's GC pauses, as
    the registry would collect them, for merging (build_registry(process=False) then)."""
    from prometheus_client import GC_COLLECTOR, PLATFORM_COLLECTOR, PROCESS_COLLECTOR

    from broker.util.gc_pauses import GC_PAUSES

    out: list[Any] = []
    for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR, GC_PAUSES):
        out.extend(collector.collect())
    return out
