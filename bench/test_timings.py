"""The latencies the unit tests used to bound from above, printed instead of asserted.

A loaded CI machine (2 cores, several pytest workers) is no place for sub-second upper
bounds; the tests keep their lower bounds and ordering checks and note what they saw
(tests/support/timings.py). This runs them with TEST_TIMINGS_FILE set and prints each figure
beside the bound the test once asserted.

    python bench/test_timings.py [--runs N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = [
    "tests/unit/server/test_server_quotas.py::"
    "test_throttled_answer_is_sent_then_the_connection_is_muted",
    "tests/unit/test_broker_lifecycle.py::"
    "test_a_closed_heartbeat_connection_makes_the_broker_heartbeat_at_once",
    "tests/unit/test_broker_lifecycle.py::"
    "test_a_new_metadata_leader_makes_the_broker_heartbeat_at_once",
    "tests/unit/controller/test_channel.py::test_a_silent_controller_is_asked_last_for_a_while",
]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "timings.jsonl"
        env = {**os.environ, "TEST_TIMINGS_FILE": str(out)}
        for _ in range(args.runs):
            proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                   *TESTS], cwd=ROOT, env=env, check=False)
            if proc.returncode != 0:
                return proc.returncode
        seen: dict[str, list[float]] = defaultdict(list)
        bounds: dict[str, float] = {}
        for line in out.read_text().splitlines():
            rec = json.loads(line)
            seen[rec["name"]].append(rec["seconds"])
            bounds[rec["name"]] = rec["bound_s"]
    print(f"{'figure':62} {'median':>8} {'max':>8} {'old bound':>9}")
    for name, values in seen.items():
        print(f"{name:62} {statistics.median(values) * 1000:7.1f}ms {max(values) * 1000:7.1f}ms "
              f"{bounds[name] * 1000:8.0f}ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
