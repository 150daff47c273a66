"""Spark fixtures: one SparkSession (local[2]) for the whole run, on the session's Skiff node.

The session carries Spark's own Kafka connector (`spark.jars`, tests/spark/connector.py), so
test_kafka_connector.py can run `format("kafka")` beside `format("skiff")`; when Maven cannot
resolve it the session starts without it and `kafka_connector` skips (fails under CI).

The tests skip with the reason when PySpark (the `pipeline` extra) or Java is missing;
tests/run.sh installs the extra, so CI runs them.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.requires import require_tool


def _why_no_spark() -> str | None:
    try:
        import pyarrow  # noqa: F401
        import pyspark  # noqa: F401
    except ImportError as e:
        return f"pyspark/pyarrow not installed (pip install -e '.[pipeline]'): {e}"
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "no Java runtime (Spark needs Java 17+)"
    return None


SKIP_REASON = _why_no_spark()
# Why format("kafka") is not in the session (empty when it is), set by the `spark` fixture.
_connector_missing: list[str] = []


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    if SKIP_REASON is not None:
        require_tool("pyspark/java", SKIP_REASON, available=False)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession

    import pipeline
    from tests.spark.connector import ConnectorUnavailable, spark_kafka_jars

    builder = SparkSession.builder
    try:
        builder = builder.config("spark.jars", spark_kafka_jars())
    except ConnectorUnavailable as e:
        _connector_missing.append(str(e))
    session = (builder.master("local[2]").appName("skiff-pipeline-tests")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.memory", "1g")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    pipeline.register(session)
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture
def kafka_connector(spark: Any) -> Any:
    """The session, with Spark's `format("kafka")` available in it."""
    if _connector_missing:
        require_tool("spark-sql-kafka-0-10", _connector_missing[0], available=False)
    return spark
