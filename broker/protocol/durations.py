"""Kafka's duration fields as kio carries them (`datetime.timedelta`) and as the protocol
counts them (whole milliseconds): the zero throttle time of a response no quota delays,
and the two conversions."""

from __future__ import annotations

import datetime

# A response's throttle_time_ms when no quota throttles it; quotas (broker/quotas) set
# their own on the responses they delay.
NO_THROTTLE = datetime.timedelta(0)
_ONE_MS = datetime.timedelta(milliseconds=1)


def to_ms(value: datetime.timedelta | int | None, default: int = -1) -> int:
    """Whole milliseconds of a kio duration (or a plain int); `default` for None."""
    if value is None:
        return default
    if isinstance(value, datetime.timedelta):
        return value // _ONE_MS
    return int(value)


def duration(ms: int) -> datetime.timedelta:
    """A kio duration of `ms` milliseconds, never negative."""
    return datetime.timedelta(milliseconds=max(0, ms))
