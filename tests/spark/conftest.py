"""Spark fixtures: one SparkSession (local[2]) for the whole run, on the session's Skiff node.

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


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    if SKIP_REASON is not None:
        require_tool("pyspark/java", SKIP_REASON, available=False)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession

    import pipeline

    session = (SparkSession.builder.master("local[2]").appName("skiff-pipeline-tests")
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
