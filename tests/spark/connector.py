"""Spark's own Kafka connector (spark-sql-kafka-0-10) for the side-by-side tests and benchmark.

The jars come from Maven Central through tests/spark/pom.xml (the connector 4.2.0: Maven
Central serves none for Spark 4.3.0, see the pom) and are copied into
tests/spark/target/spark-kafka-libs, by tests/run.sh or here on first use; ~/.m2 keeps the
download. `spark_kafka_jars()` gives the comma-separated list for `spark.jars`, which must be
set before the SparkSession starts (the connector registers `format("kafka")` through the
driver's class loader).
"""

from __future__ import annotations

import contextlib
import fcntl
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

SPARK_DIR = Path(__file__).resolve().parent
POM = SPARK_DIR / "pom.xml"
LIBS_DIR = SPARK_DIR / "target" / "spark-kafka-libs"
CONNECTOR_VERSION = "4.2.0"


class ConnectorUnavailable(RuntimeError):
    """Java or Maven is missing, or Maven could not resolve the connector."""


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Parallel pytest workers and the benchmark resolve once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _resolve() -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ConnectorUnavailable("Maven resolves Spark's Kafka connector; tests/run.sh "
                                   "installs it (apt-get install maven)")
    if LIBS_DIR.exists():
        shutil.rmtree(LIBS_DIR)
    proc = subprocess.run(
        [mvn, "-q", "-B", "-f", str(POM), "dependency:copy-dependencies",
         f"-DoutputDirectory={LIBS_DIR}", "-DincludeScope=runtime"],
        capture_output=True, text=True, timeout=900, check=False)
    if proc.returncode != 0:
        raise ConnectorUnavailable(
            f"mvn could not resolve spark-sql-kafka-0-10 {CONNECTOR_VERSION}:\n"
            f"{proc.stdout[-4000:]}\n{proc.stderr[-2000:]}")
    (LIBS_DIR / ".resolved").write_text(CONNECTOR_VERSION + "\n")


def spark_kafka_jars() -> str:
    """The connector's jars for `spark.jars`, resolved with Maven when missing or stale."""
    marker = LIBS_DIR / ".resolved"
    if not marker.exists() or marker.stat().st_mtime < POM.stat().st_mtime:
        with _locked(SPARK_DIR / "target" / ".resolve.lock"):
            if not marker.exists() or marker.stat().st_mtime < POM.stat().st_mtime:
                _resolve()
    jars = sorted(LIBS_DIR.glob("*.jar"))
    if not any(j.name.startswith("spark-sql-kafka-0-10") for j in jars):
        raise ConnectorUnavailable(f"no spark-sql-kafka-0-10 jar in {LIBS_DIR}")
    return ",".join(str(j) for j in jars)


if __name__ == "__main__":
    print(spark_kafka_jars())
