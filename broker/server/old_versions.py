"""Which clients still send the API versions Kafka 4.0 removed (KIP-896).

Skiff serves them (as Kafka 3.9 did) unless `skiff.min.api.versions=kafka4`; operators moving a
fleet want to know who sends them. Each (client id, address, api, version) is logged once at
info, the first time it is seen; the set of those already logged is bounded so a flood of
distinct client ids cannot grow it without limit (past the bound, nothing more is logged).
"""

from __future__ import annotations

from typing import Final

from broker.protocol import api

MAX_REMEMBERED: Final = 10_000


def is_removed_in_kafka4(api_key: int, version: int) -> bool:
    floor = api.kafka4_min_version(api_key)
    return floor is not None and version < floor


class OldVersionLog:
    __slots__ = ("_seen", "limit")

    def __init__(self, limit: int = MAX_REMEMBERED) -> None:
        self._seen: set[tuple[str | None, str, int, int]] = set()
        self.limit = limit

    def first_time(self, client_id: str | None, host: str, api_key: int, version: int) -> bool:
        """True when this is an old version not logged yet for this client and address."""
        if not is_removed_in_kafka4(api_key, version):
            return False
        key = (client_id, host, api_key, version)
        if key in self._seen or len(self._seen) >= self.limit:
            return False
        self._seen.add(key)
        return True
