"""An old Go client with its defaults: Debian's sarama 1.22 (default protocol version 0.8.2).
Its SyncProducer sends Produce v0 (magic 0 message sets), its partition consumer Fetch v0
(down-converted answers), and its consumer group (Version 0.10.2, the minimum sarama allows
for groups, nothing else changed) commits with OffsetCommit v1; a restarted group member
resumes after its commits instead of re-reading everything (issue 23).

Needs `go` and the Debian packages golang-go and golang-github-shopify-sarama-dev (tests/run.sh
installs them); skipped with a reason when they are absent.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from broker.testing import admin as adm
from tests.support.requires import require_tool

pytestmark = pytest.mark.timeout(180)
SOURCE = Path(__file__).parent / "go" / "sarama_old" / "main.go"
GOCODE = Path("/usr/share/gocode")


@pytest.fixture(scope="session")
def sarama_old(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require_tool("go", "go is not installed (Debian golang-go; tests/run.sh installs it)")
    require_tool("sarama", "Debian golang-github-shopify-sarama-dev (tests/run.sh installs it)",
                 available=(GOCODE / "src/github.com/Shopify/sarama").is_dir())
    out = tmp_path_factory.mktemp("go")
    # Go's build cache outlives the run (as ~/.m2 does for Kafka's jars): a cold build of sarama
    # and its dependencies is ~90 s of CPU on the loaded 2-core CI machine, a warm one ~1 s
    cache = os.environ.get("GOCACHE") or str(Path.home() / ".cache" / "skiff-tests" / "go-build")
    env = {**os.environ, "GOPATH": f"{out / 'go'}:{GOCODE}", "GO111MODULE": "off",
           "GOPROXY": "off", "GOCACHE": cache}
    subprocess.run(["go", "build", "-o", str(out / "sarama_old"), str(SOURCE)], env=env,
                   check=True, capture_output=True, timeout=170)
    return out / "sarama_old"


def run(binary: Path, *args: str) -> list[tuple[int, str]]:
    proc = subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=90)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return [(int(o), v) for o, v in (line.split(" ", 1) for line in proc.stdout.splitlines())]


def _logged(skiff_node: Any, api: str, version: int) -> bool:
    log_path = getattr(skiff_node, "log_path", None)
    if log_path is None:
        return True  # an external broker's log is not readable here
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        for line in log_path.read_text(errors="replace").splitlines():
            if ("old api version" in line and f"api={api} " in line
                    and f"api_version={version} " in line and "client_id=sarama" in line):
                return True
        time.sleep(0.1)
    return False


def test_old_sarama_defaults(sarama_old: Path, skiff_node: Any, bootstrap: str,
                             topic_name: str) -> None:
    adm.create_topic(bootstrap, topic_name, partitions=1)
    produced = run(sarama_old, "produce", bootstrap, topic_name, "10")
    assert produced == [(i, f"m-{i}") for i in range(10)]
    assert run(sarama_old, "consume", bootstrap, topic_name, "10") == produced
    group = f"{topic_name}-g"
    first = run(sarama_old, "group", bootstrap, topic_name, group, "4")
    assert first == produced[:4]
    # a restarted member resumes after the committed offsets
    second = run(sarama_old, "group", bootstrap, topic_name, group, "6")
    assert second == produced[4:]
    assert _logged(skiff_node, "produce", 0)
    assert _logged(skiff_node, "fetch", 0)
    assert _logged(skiff_node, "offset_commit", 1)
