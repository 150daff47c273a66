"""Shared fixtures: a real broker for integration and compat tests.

`skiff_node` (session) starts one `skiff dev` process on free loopback ports and yields it;
with SKIFF_TEST_BOOTSTRAP=host:port set it yields that external broker instead (tests that
stop, kill or restart it then skip). `own_skiff_node` gives a test its own node in its own
data dir, for tests that stop and restart it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.kafka_ref import KafkaCluster, KafkaNode, started_kafka
from tests.support.node import ExternalBroker, SkiffNode, external_bootstrap, started_node
from tests.support.records import unique_topic
from tests.support.requires import is_missing_tool_skip, under_ci

Broker = SkiffNode | ExternalBroker


def _start(data_dir: Path) -> Broker:
    ext = external_bootstrap()
    if ext is not None:
        ext_broker = ExternalBroker(ext)
        ext_broker.wait_ready()
        return ext_broker
    return started_node(data_dir)


def pytest_configure(config: pytest.Config) -> None:
    # The base of tests/sim's fresh seeds: set here (from the clock, above the fixed seeds
    # 0-1999) before xdist starts its workers, which inherit it; set it to replay a run.
    if "SIM_SEED_BASE" not in os.environ:
        os.environ["SIM_SEED_BASE"] = str(int(time.time()) * 1000)


def pytest_report_header(config: pytest.Config) -> str:
    base = os.environ["SIM_SEED_BASE"]
    return (f"tests/sim fresh seeds from SIM_SEED_BASE={base} (replay the run with that "
            "variable, one seed with python -m tests.sim.run --seeds 1 --start SEED)")


@pytest.fixture(scope="session")
def skiff_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    node = _start(tmp_path_factory.mktemp("skiff-node"))
    try:
        yield node
    finally:
        node.close()


@pytest.fixture
def own_skiff_node(tmp_path: Path) -> Iterator[Broker]:
    node = _start(tmp_path / "node")
    try:
        yield node
    finally:
        node.close()


@pytest.fixture(scope="session")
def kafka_ref(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaNode]:
    """The reference: one Apache Kafka 4.4 KRaft node (broker and controller), started once."""
    node = started_kafka(tmp_path_factory.mktemp("kafka-ref"))
    try:
        yield node
    finally:
        node.close()


@pytest.fixture(scope="session")
def kafka_ref_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    """The reference: three combined Apache Kafka 4.4 nodes, started once."""
    cluster = KafkaCluster(tmp_path_factory.mktemp("kafka-ref-cluster"))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.close()


@pytest.fixture
def bootstrap(skiff_node: Broker) -> str:
    return skiff_node.bootstrap


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    return unique_topic(request.node.name)


# Parallel runs (pytest-xdist, `--dist loadgroup`, as tests/run.sh runs the suite). Every test
# gets an xdist_group: its file, so module fixtures start once; or a group shared by files
# whose session fixtures are heavy, so each starts once in one worker: the image built by
# tests/deploy, the SparkSession of tests/spark. Fixed names (the podman image and
# containers, the netns subnet) stay in one worker as a result. The files using the
# reference Kafka node (kafka_ref) keep a group each and go first: one group for all of them
# ran ~30 min of JVM-bound steps on one worker, while a reference node costs a worker ~12 s
# to start. The files using the reference cluster (kafka_ref_cluster: three Kafka nodes, and
# a Skiff cluster beside it) share one group, so the three nodes start once.
SHARED_GROUPS = {"tests/deploy/": "deploy", "tests/spark/": "spark"}
# Files whose tests share nothing (no module fixture, no state): each test goes to whichever
# worker is free. tests/sim's seed chunks are CPU-bound and independent.
UNGROUPED = ("tests/sim/",)
KAFKA_REF_FIXTURES = ("kafka_ref", "kafka_ref_cluster")
KAFKA_REF_CLUSTER_GROUP = "kafka-ref:cluster"
# Groups are handed out in collection order (run.sh passes --no-loadscope-reorder): the long
# ones first, so that the workers finish together rather than one waiting on a late cluster.
LONG_FIRST = ("kafka-ref:", "tests/compat/kafka/", "deploy", "spark", "tests/chaos/",
              "tests/integration/",
              "tests/compat/", "tests/sim/")


def _group_of(item: pytest.Item, kafka_files: set[str], cluster_files: set[str]) -> str:
    rel = item.path.relative_to(item.config.rootpath).as_posix()
    if rel in cluster_files:
        return KAFKA_REF_CLUSTER_GROUP
    if rel in kafka_files:
        return f"kafka-ref:{rel}"
    for prefix, group in SHARED_GROUPS.items():
        if rel.startswith(prefix):
            return group
    return rel


def _rank(group: str) -> int:
    for i, prefix in enumerate(LONG_FIRST):
        if group.startswith(prefix):
            return i
    return len(LONG_FIRST)


@pytest.hookimpl(tryfirst=True)  # before xdist reads the marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    kafka_files = {item.path.relative_to(config.rootpath).as_posix() for item in items
                   if set(getattr(item, "fixturenames", ())) & set(KAFKA_REF_FIXTURES)}
    cluster_files = {item.path.relative_to(config.rootpath).as_posix() for item in items
                     if "kafka_ref_cluster" in getattr(item, "fixturenames", ())}
    groups: dict[str, str] = {}
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            group = _group_of(item, kafka_files, cluster_files)
            if not group.startswith(UNGROUPED):
                item.add_marker(pytest.mark.xdist_group(group))
        else:
            mark = item.get_closest_marker("xdist_group")
            assert mark is not None
            group = str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
        groups[item.nodeid] = group
    if hasattr(config, "workerinput"):  # an xdist worker: every worker sorts alike
        items.sort(key=lambda it: _rank(groups[it.nodeid]))


def _missing_tool_fails(report: pytest.TestReport | pytest.CollectReport) -> None:
    """Under CI a skip for a tool tests/run.sh installs (tests/support/requires.py) fails."""
    if report.skipped and under_ci() and is_missing_tool_skip(report.longrepr):
        reason = (report.longrepr[2] if isinstance(report.longrepr, tuple)
                  else str(report.longrepr))
        report.outcome = "failed"
        report.longrepr = (f"{reason}\nCI=true: tests/run.sh installs this tool, so a test "
                           "that cannot find it fails instead of skipping")


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector):  # type: ignore[no-untyped-def]
    report = yield
    _missing_tool_fails(report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    report = yield
    _missing_tool_fails(report)
    if report.failed:
        funcargs = getattr(item, "funcargs", {})
        for name in ("own_skiff_node", "skiff_node", "kafka_ref"):
            node = funcargs.get(name)
            if isinstance(node, SkiffNode | KafkaNode):
                report.sections.append((f"{name} log", node.log_tail(80)))
    return report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):  # type: ignore[no-untyped-def]
    try:
        return (yield)
    finally:
        _stop_reference_nodes_done_with(item, nextitem)


def _stop_reference_nodes_done_with(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """A worker's reference nodes stop after its last kafka-ref group, not at the end of the
    session: an idle Kafka 4.4 node still uses ~2% of a core, and the six of them (one per
    worker, and the cluster's three) idled through most of part 1, which is CPU-bound.
    The kafka-ref groups are handed out first, so a worker whose next test is in another
    group gets none again; if one did, its session fixture would start a node again."""
    next_group = _xdist_group(nextitem) if nextitem is not None else ""
    still_needed = {"kafka_ref": next_group.startswith("kafka-ref:"),
                    "kafka_ref_cluster": next_group == KAFKA_REF_CLUSTER_GROUP}
    manager = item.session._fixturemanager  # type: ignore[attr-defined]
    for name, needed in still_needed.items():
        if needed:
            continue
        # the group's last test need not use the node itself (a module's last test may not)
        for fixturedef in manager.getfixturedefs(name, item) or ():
            if fixturedef.cached_result is not None:
                fixturedef.finish(item._request)  # type: ignore[attr-defined]


def _xdist_group(item: pytest.Item) -> str:
    mark = item.get_closest_marker("xdist_group")
    return str(mark.args[0]) if mark is not None and mark.args else ""


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):  # type: ignore[no-untyped-def]
    """With PYTEST_TIMELINE=FILE, each test appends "worker start end cpu nodeid" to FILE
    (setup to teardown, wall clock): where a run's workers were busy or idle, which
    --durations cannot show. cpu is the CPU seconds the worker and the processes it reaped
    in that span used (a node a fixture keeps for a module counts at its last test): in a
    CPU-bound run, what a test costs the others. (Not SKIFF_*: the nodes tests start read
    those as settings.)"""
    path = os.environ.get("PYTEST_TIMELINE")
    start = time.time()
    cpu_start = _cpu_seconds()
    try:
        return (yield)
    finally:
        if path:
            worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
            cpu = _cpu_seconds() - cpu_start
            with open(path, "a") as out:
                out.write(f"{worker} {start:.2f} {time.time():.2f} {cpu:.2f} {item.nodeid}\n")


def _cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system
