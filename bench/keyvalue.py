"""KEY=VALUE settings on the benchmarks' command lines (a node's keys, a client's)."""

from __future__ import annotations

import argparse


def key_value(text: str) -> tuple[str, str]:
    """argparse `type=` of one KEY=VALUE: a bad pair is a usage error naming it."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"{text!r}: give KEY=VALUE")
    return key.strip(), value


def comma_key_values(text: str) -> dict[str, str]:
    """argparse `type=` of KEY=VALUE pairs joined by commas (empty: none)."""
    return dict(key_value(p) for p in text.split(",") if p)
