"""How closely Skiff holds a librdkafka client to its byte-rate quota over 20 s: the figures
tests/compat/test_quotas.py asserted before they moved here (a loaded CI machine is not a
benchmark). The same loops as the tests, on two fresh `skiff dev` nodes: one with the default
sample windows (quota.window.num=11, quota.window.size.seconds=1) and one with 2 windows.

    python bench/quota_bench.py [--seconds 20]

Prints each rate as a ratio to the quota beside the bound the test once asserted: within 10%
with 2 windows; under 1.3x with the defaults from a fresh sensor (Kafka's SampledStat lets a
fresh client send quota.window.num - 1 windows at once; bench/quota_window_sim.py models it).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from broker.testing import quota_load as q  # noqa: E402
from broker.testing.node import SkiffNode  # noqa: E402


class _Node(SkiffNode):
    def __init__(self, data_dir: Path, windows: int | None) -> None:
        super().__init__(data_dir)
        self.windows = windows

    def command(self) -> list[str]:
        extra = [] if self.windows is None else ["--override", f"quota.window.num={self.windows}"]
        return [*super().command(), *extra]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=20.0)
    args = ap.parse_args(argv)
    rows: list[tuple[str, float, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for windows, label in ((2, "2 windows"), (None, "default windows")):
            node = _Node(Path(tmp) / label.replace(" ", "-"), windows)
            node.start()
            try:
                node.wait_ready()
                rate, _ = q.produce_for(node.bootstrap, args.seconds)
                rows.append((f"producer, {label}", rate / q.RATE,
                             "0.9-1.1" if windows else "0.9-1.3"))
                if windows is None:
                    rate, _, read_all = q.consume_for(node.bootstrap, args.seconds)
                    rows.append((f"consumer, {label}" + (" (read all!)" if read_all else ""),
                                 rate / q.RATE, "0.9-1.3"))
            finally:
                node.close()
    print(f"{'client under a 100 kB/s quota, ' + str(args.seconds) + ' s':44} "
          f"{'rate/quota':>10} {'old bound':>10}")
    for name, ratio, bound in rows:
        print(f"{name:44} {ratio:10.2f} {bound:>10}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
