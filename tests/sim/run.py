"""Run simulator seeds: python -m tests.sim.run --seeds N --start S [--replay SEED]"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter

from tests.sim.cluster import InvariantError
from tests.sim.scenarios import run_seed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seeds", type=int, default=1000)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    failures: list[str] = []
    per: Counter[str] = Counter()
    events = 0
    for seed in range(args.start, args.start + args.seeds):
        try:
            r = run_seed(seed)
        except InvariantError as e:
            failures.append(str(e))
            print(f"FAIL {e}", file=sys.stderr)
            continue
        per[r.scenario] += 1
        events += r.events
        if args.verbose:
            print(f"seed {seed} {r.scenario} v={r.voters} o={r.observers} "
                  f"events={r.events} committed={r.committed} sim={r.sim_ms}ms "
                  f"trace={r.trace_hash}")
    dt = time.monotonic() - t0
    print(f"{args.seeds - len(failures)}/{args.seeds} seeds passed in {dt:.1f}s "
          f"({events} events); {dict(per)}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
