"""Kafka's Uuid in text: URL-safe base64 of the 16 bytes without padding (22 characters),
as Uuid.toString() prints it and Uuid.fromString() reads it."""

from __future__ import annotations

import base64
import uuid


def uuid_to_kafka(u: uuid.UUID) -> str:
    """Kafka's Uuid.toString(): URL-safe base64 of the 16 bytes, no padding (22 chars)."""
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


def kafka_to_uuid(s: str) -> uuid.UUID:
    """Kafka's Uuid.fromString(); ValueError unless 22 base64url chars giving 16 bytes."""
    if len(s) != 22:
        raise ValueError(f"Input string with prefix `{s[:22]}` is too long to be decoded as a "
                         "base64 UUID" if len(s) > 22 else
                         f"Input string `{s}` decoded as {len(s) * 6 // 8} bytes, which is not "
                         "equal to the expected 16 bytes of a base64-encoded UUID")
    try:
        raw = base64.urlsafe_b64decode(s + "==")
    except (ValueError, TypeError) as exc:
        raise ValueError(f"Input string `{s}` is not valid base64: {exc}") from None
    if len(raw) != 16 or uuid_to_kafka(uuid.UUID(bytes=raw)) != s:
        raise ValueError(f"Input string `{s}` is not a canonical base64-encoded UUID")
    return uuid.UUID(bytes=raw)


def random_kafka_uuid() -> str:
    """A random Uuid string as `kafka-storage.sh random-uuid` prints it (never zero, never the
    metadata topic id, never starting with '-')."""
    while True:
        u = uuid.uuid4()
        if u.int in (0, 1):
            continue
        s = uuid_to_kafka(u)
        if not s.startswith("-"):
            return s
