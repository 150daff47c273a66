"""Shared helpers for the log tests (a plain module: tests/unit has no packages)."""

from __future__ import annotations

from broker.protocol.records import Record, build_batch


class FakeClock:
    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


def batch(
    n: int = 3,
    *,
    ts: int = 1_700_000_000_000,
    key: bytes | None = b"k",
    size: int = 10,
    tag: int = 0,
    **kw: object,
) -> bytes:
    return build_batch(
        [
            Record(timestamp=ts + i, key=key, value=(b"%d:%d:" % (tag, i)).ljust(size, b"x"))
            for i in range(n)
        ],
        **kw,  # type: ignore[arg-type]
    )
