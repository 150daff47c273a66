"""Kafka's rules for topic names (org.apache.kafka.common.internals.Topic)."""

from __future__ import annotations

import re

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
METADATA_TOPIC = "__cluster_metadata"


def topic_name_error(name: str | None) -> str | None:
    """Why `name` is not a legal topic name, or None when it is."""
    # Kafka 4.4's Topic.validate: "Topic name is invalid: <reason>"
    if name is None or name == "":
        return "Topic name is invalid: the empty string is not allowed"
    if name in (".", ".."):
        return f"Topic name is invalid: '{name}' is not allowed"
    if len(name) > MAX_NAME_LENGTH:
        return f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, " \
            f"topic name: {name}"
    if not _LEGAL.fullmatch(name):
        return (f"Topic name is invalid: '{name}' contains one or more characters other than "
                "ASCII alphanumerics, '.', '_' and '-'")
    if name == METADATA_TOPIC:
        return f"Topic name {name} is reserved for the metadata log"
    return None


def collision_key(name: str) -> str:
    """'.' and '_' collide in metric names, so Kafka forbids topics differing only there."""
    return name.replace(".", "_")


def has_collision_chars(name: str) -> bool:
    return "." in name or "_" in name
