"""How long a `skiff dev` node takes to be ready (issue 31 point 2), run by hand:

  cold     a fresh data directory: format, start, register, unfence
  term     SIGTERM (controlled shutdown), then start again on the same data
  kill     SIGKILL, then start again on the same data

Ready is the moment the client listener accepts a connection: a broker opens it only once
it is registered and unfenced. The time is from spawning the process. Each restart also
reports how many registrations the controller refused on the way (the node logs
`broker_registration_refused`, e.g. DUPLICATE_BROKER_REGISTRATION while the session of the
previous process is still alive). A topic of 3 partitions exists before the restarts.

    python bench/restart_bench.py --rounds 3
"""

from __future__ import annotations

import argparse
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from tests.support.node import SkiffNode, admin_answers, tcp_connects  # noqa: E402

TIMEOUT_S = 60.0


def _log_since(node: SkiffNode, offset: int) -> str:
    return node.log_path.read_bytes()[offset:].decode(errors="replace")


def timed_start(node: SkiffNode) -> tuple[float, int]:
    """(seconds from spawn until the client port accepts, refused registrations)."""
    offset = node.log_path.stat().st_size if node.log_path.exists() else 0
    t0 = time.monotonic()
    node.start()
    while not tcp_connects("127.0.0.1", node.port, timeout=0.2):
        if not node.running:
            raise RuntimeError(f"node exited\n{node.log_tail()}")
        if time.monotonic() - t0 > TIMEOUT_S:
            raise TimeoutError(node.log_tail())
        time.sleep(0.01)
    took = time.monotonic() - t0
    if not admin_answers(node.bootstrap, timeout=10):
        raise RuntimeError(f"no Metadata answer\n{node.log_tail()}")
    refused = _log_since(node, offset).count("broker_registration_refused")
    return took, refused


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    results: dict[str, list[tuple[float, int]]] = {"cold": [], "term": [], "kill": []}
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory() as tmp:
            node = SkiffNode(Path(tmp) / "node")
            try:
                results["cold"].append(timed_start(node))
                from confluent_kafka.admin import AdminClient, NewTopic

                admin = AdminClient({"bootstrap.servers": node.bootstrap, "log_level": 0})
                admin.create_topics([NewTopic("restart-bench", 3, 1)])["restart-bench"].result(30)
                for kind, sig in (("term", signal.SIGTERM), ("kill", signal.SIGKILL)):
                    node.stop(sig)
                    results[kind].append(timed_start(node))
            finally:
                node.close()
    for kind, rows in results.items():
        times = [t for t, _ in rows]
        print(f"{kind:5s}: median {statistics.median(times):.2f} s "
              f"(each: {', '.join(f'{t:.2f}' for t in times)}); refused registrations "
              f"{[r for _, r in rows]}", flush=True)


if __name__ == "__main__":
    main()
