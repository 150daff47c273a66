"""bench/vs_kafka.py names the worker count its `skiff dev` node runs with, as that node
will take it (it printed "one process per node" even for a broker of two workers)."""

from __future__ import annotations

import pytest

from bench.vs_kafka import dev_node_workers
from broker.cli.server import dev_workers


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.delenv("SKIFF_SKIFF_BROKER_WORKERS", raising=False)
    monkeypatch.delenv("SKIFFTESTS_DEV_WORKERS", raising=False)
    return monkeypatch


def test_skiff_devs_own_count_by_default(clean_env: pytest.MonkeyPatch) -> None:
    assert dev_node_workers() == dev_workers("auto", {})


def test_the_key_from_the_environment(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("SKIFF_SKIFF_BROKER_WORKERS", "2")
    assert dev_node_workers() == "2"


def test_the_test_suites_workers_flag_first(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("SKIFF_SKIFF_BROKER_WORKERS", "2")
    clean_env.setenv("SKIFFTESTS_DEV_WORKERS", "3")
    assert dev_node_workers() == "3"
