"""Latencies the tests observe but no longer bound from above (a loaded CI machine is not a
benchmark): `note(name, seconds, bound)` records one when TEST_TIMINGS_FILE names a file, and
bench/test_timings.py runs those tests and prints the figures against the bounds they once
asserted. The tests keep their lower bounds and ordering checks."""

from __future__ import annotations

import json
import os


def note(name: str, seconds: float, bound_s: float) -> None:
    path = os.environ.get("TEST_TIMINGS_FILE")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps({"name": name, "seconds": seconds, "bound_s": bound_s}) + "\n")
