"""How long a `skiff dev` node takes to be ready (issue 31 point 2), run by hand:

  cold     a fresh data directory: format, start, register, unfence
  term     SIGTERM (controlled shutdown), then start again on the same data
  kill     SIGKILL, then start again on the same data

Ready is the moment the client listener accepts a connection: a broker opens it only once
it is registered and unfenced. The time is from spawning the process (Python's start-up
included: seconds on a loaded machine). The node logs in JSON; from its timestamps each
start also reports the span from its controller's activation to the broker's registration
(what a refused registration prolongs) and how many registrations the controller refused
on the way (`broker_registration_refused`, e.g. DUPLICATE_BROKER_REGISTRATION while the
session of the previous process is still alive). A topic of 3 partitions exists before
the restarts.

    python bench/restart_bench.py --rounds 3
"""

from __future__ import annotations

import argparse
import datetime
import json
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from broker.testing.node import SkiffNode, admin_answers, tcp_connects  # noqa: E402

TIMEOUT_S = 60.0


def _log_since(node: SkiffNode, offset: int) -> str:
    return node.log_path.read_bytes()[offset:].decode(errors="replace")


def _at(line: dict[str, object]) -> float:
    return datetime.datetime.fromisoformat(
        str(line["timestamp"]).replace("Z", "+00:00")).timestamp()


def _activation_to_registration(text: str) -> float:
    lines = [json.loads(x) for x in text.splitlines() if x.startswith("{")]
    active = next(x for x in lines if x.get("event") == "controller_activated")
    registered = next(x for x in lines if x.get("event") == "broker_registered")
    return _at(registered) - _at(active)


def timed_start(node: SkiffNode) -> tuple[float, float, int]:
    """(seconds from spawn until the client port accepts, seconds from the controller's
    activation to the broker's registration, refused registrations)."""
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
    text = _log_since(node, offset)
    return took, _activation_to_registration(text), text.count("broker_registration_refused")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    results: dict[str, list[tuple[float, float, int]]] = {"cold": [], "term": [], "kill": []}
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory() as tmp:
            node = SkiffNode(Path(tmp) / "node", config_env={"SKIFF_LOG_FORMAT": "json"})
            try:
                results["cold"].append(timed_start(node))
                from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

                admin = AdminClient({"bootstrap.servers": node.bootstrap, "log_level": 0})
                admin.create_topics([NewTopic("restart-bench", 3, 1)])["restart-bench"].result(30)
                for kind, sig in (("term", signal.SIGTERM), ("kill", signal.SIGKILL)):
                    node.stop(sig)
                    results[kind].append(timed_start(node))
            finally:
                node.close()
    for kind, rows in results.items():
        times = [t for t, _, _ in rows]
        spans = [a for _, a, _ in rows]
        print(f"{kind:5s}: spawn to ready median {statistics.median(times):.2f} s "
              f"(each: {', '.join(f'{t:.2f}' for t in times)}); controller active to broker "
              f"registered median {statistics.median(spans):.2f} s "
              f"(each: {', '.join(f'{t:.2f}' for t in spans)}); refused registrations "
              f"{[r for _, _, r in rows]}", flush=True)


if __name__ == "__main__":
    main()
