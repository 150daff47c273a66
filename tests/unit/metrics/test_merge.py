"""A broker of several workers' metrics merged by its node (broker/metrics/merge.py)."""

from __future__ import annotations

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from broker.metrics.merge import family_values, merge_families


def samples(families: list) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for m in families for s in m.samples}


def node_and_worker() -> tuple[list, list]:
    def one(messages: float, lag: float, start: float, partitions: list[int]) -> list:
        msgs = CounterMetricFamily("kafka_server_brokertopicmetrics_messagesin", "in",
                                   labels=["topic"])
        msgs.add_metric(["t"], messages)
        maxlag = GaugeMetricFamily("kafka_server_replicafetchermanager_maxlag", "lag",
                                   labels=["client_id"])
        maxlag.add_metric(["Replica"], lag)
        started = GaugeMetricFamily("process_start_time_seconds", "start", value=start)
        leo = GaugeMetricFamily("kafka_log_log_logendoffset", "leo",
                                labels=["topic", "partition"])
        for p in partitions:
            leo.add_metric(["t", str(p)], 10 * p)
        hist = HistogramMetricFamily("kafka_network_requestmetrics_totaltimems", "ms",
                                     labels=["request"])
        hist.add_metric(["Produce"], [("1.0", 1), ("+Inf", 2)], sum_value=3)
        return [msgs, maxlag, started, leo, hist]

    return one(3, 5, 100, [0, 2]), one(4, 2, 90, [1])


def test_counters_histograms_and_partitions_add_up_from_every_process() -> None:
    own, worker = node_and_worker()
    merged = samples(merge_families(own, [family_values(worker)]))
    assert merged[("kafka_server_brokertopicmetrics_messagesin_total", (("topic", "t"),))] == 7
    assert {k[1]: v for k, v in merged.items() if k[0] == "kafka_log_log_logendoffset"} == {
        (("partition", str(p)), ("topic", "t")): 10 * p for p in range(3)}
    bucket = ("kafka_network_requestmetrics_totaltimems_bucket",
              (("le", "+Inf"), ("request", "Produce")))
    assert merged[bucket] == 4
    assert merged[("kafka_network_requestmetrics_totaltimems_sum",
                   (("request", "Produce"),))] == 6


def test_a_largest_or_smallest_figure_is_not_summed() -> None:
    own, worker = node_and_worker()
    merged = samples(merge_families(own, [family_values(worker)]))
    assert merged[("kafka_server_replicafetchermanager_maxlag",
                   (("client_id", "Replica"),))] == 5
    assert merged[("process_start_time_seconds", ())] == 90


def test_a_family_only_a_worker_has_is_kept_and_nothing_is_doubled_alone() -> None:
    own, worker = node_and_worker()
    extra = GaugeMetricFamily("skiff_only_in_worker", "x", value=2)
    merged = merge_families(own, [family_values([*worker, extra])])
    assert [m.name for m in merged][-1] == "skiff_only_in_worker"
    assert samples(merge_families(own, [])) == samples(own)
