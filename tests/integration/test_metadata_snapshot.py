"""Metadata snapshots: a node with a tiny snapshot threshold writes KRaft snapshot files,
and a restart rebuilds topics (created and deleted) from the snapshot plus the log tail."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.node import SkiffNode

pytestmark = pytest.mark.timeout(240)


class SnapshottingNode(SkiffNode):
    def command(self) -> list[str]:
        return [*super().command(), "--override",
                "metadata.log.max.record.bytes.between.snapshots=2000"]


def topics(bootstrap: str) -> set[str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return {t for t in admin.list_topics(timeout=10).topics if t.startswith("snap-")}


def test_restart_loads_the_snapshot(tmp_path: Path) -> None:
    node = SnapshottingNode(tmp_path / "node")
    node.start()
    try:
        node.wait_ready()
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        names = [f"snap-{i}" for i in range(30)]
        for future in admin.create_topics([NewTopic(n, 2, 1) for n in names]).values():
            future.result(timeout=30)
        admin.delete_topics(["snap-7"])["snap-7"].result(timeout=30)
        expected = set(names) - {"snap-7"}
        assert topics(node.bootstrap) == expected

        metadata_dir = node.data_dir / "metadata" / "__cluster_metadata-0"
        snapshots = sorted(metadata_dir.glob("*.checkpoint"))
        assert snapshots, "no metadata snapshot was written"

        assert node.stop() == 0
        node.start()
        node.wait_ready()
        assert topics(node.bootstrap) == expected
        log = node.log_path.read_text(errors="replace")
        assert "metadata_snapshot_loaded" in log.split("=== start #2")[1]
    finally:
        node.close()
