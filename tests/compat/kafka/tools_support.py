"""What the Kafka-tool modules of tests/compat/kafka share: running a tool until it
succeeds (within a bound), and reading kafka-metadata-quorum's output."""

from __future__ import annotations

import json
import subprocess
import time
from typing import Any

from tests.support.kafka_ref import tool


def ok(script: str, *args: str, timeout: float = 120.0,
       input_text: str | None = None) -> subprocess.CompletedProcess[str]:
    """One run of a Kafka tool that must succeed."""
    proc = tool(script, *args, timeout=timeout, input_text=input_text)
    assert proc.returncode == 0, f"{script} {' '.join(args)} exited {proc.returncode}:\n" \
                                 f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def until_ok(script: str, *args: str, within_s: float = 90.0) -> subprocess.CompletedProcess[str]:
    """A tool run retried until it succeeds (e.g. add-controller while the new controller
    catches up: the leader answers REQUEST_TIMED_OUT until then, Kafka's behaviour too)."""
    deadline = time.monotonic() + within_s
    while True:
        proc = tool(script, *args, timeout=120)
        if proc.returncode == 0 or time.monotonic() > deadline:
            assert proc.returncode == 0, f"{script} {' '.join(args)} never succeeded:\n" \
                                         f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
            return proc
        time.sleep(1.0)


def quorum_status(stdout: str) -> dict[str, Any]:
    """`kafka-metadata-quorum describe --status`: `Key:   value` lines; the voter and observer
    lists are JSON."""
    out: dict[str, Any] = {}
    for line in stdout.splitlines():
        key, sep, value = line.partition(":")
        if not sep or not key or " " in key:
            continue
        value = value.strip()
        out[key] = json.loads(value) if key in ("CurrentVoters", "CurrentObservers") else value
    return out


def quorum_replication(stdout: str) -> tuple[list[str], list[dict[str, str]]]:
    """`kafka-metadata-quorum describe --replication`: a tab-separated table."""
    lines = [line for line in stdout.splitlines() if "\t" in line]
    header = [h.strip() for h in lines[0].split("\t") if h.strip()]
    rows = [dict(zip(header, (c.strip() for c in line.split("\t")), strict=False))
            for line in lines[1:]]
    return header, rows
