"""What the Kafka handlers share about client quotas (broker/quotas/core.py): who a request
counts against and the clock the sample windows run on."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from broker.protocol.api import API_VERSIONS
from broker.quotas.core import ClientQuotaManager, QuotaMap, resolve, user_of

if TYPE_CHECKING:
    from broker.handlers.services import BrokerServices
    from broker.server import RequestContext


def who(ctx: RequestContext) -> tuple[str, str]:
    """(user, client-id) of the request, as Kafka's quota managers take them."""
    return user_of(ctx.principal), ctx.client_id or ""


def now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class RequestTimeQuota:
    """request_percentage for the server (broker.server.dispatch.RequestQuota): a handler's
    time on the event loop counts as Kafka counts a request's IO-thread time, in percent
    of one thread per second. ApiVersions is exempt (Kafka exempts it too)."""

    def __init__(self, quotas: Callable[[], QuotaMap], manager: ClientQuotaManager) -> None:
        self.quotas = quotas
        self.manager = manager
        self._seen: QuotaMap | None = None  # the quota map last looked at...
        self._any = False  # ...and whether any entity in it sets the key

    def applies(self, ctx: RequestContext) -> bool:
        quotas = self.quotas()
        if quotas is not self._seen:  # a new image's quotas: look once
            self._seen, self._any = quotas, any(self.manager.key in v for v in quotas.values())
        if not self._any or ctx.api_key == API_VERSIONS:
            return False
        user, client_id = who(ctx)
        return resolve(quotas, user, client_id, self.manager.key) is not None

    def record(self, ctx: RequestContext, busy_s: float) -> int:
        user, client_id = who(ctx)
        return self.manager.record(self.quotas(), user, client_id, busy_s * 100.0, now_ms())


THROTTLING_QUOTA_EXCEEDED_MESSAGE: Final = "The throttling quota has been exceeded."


class MutationQuota:
    """controller_mutation_rate (KIP-599) over one CreateTopics, CreatePartitions or
    DeleteTopics request: the partitions created or deleted count as mutations.

    Strict (CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+): a topic asked for
    while the quota is already exceeded is refused with THROTTLING_QUOTA_EXCEEDED, and one
    admitted is counted even when it takes the rate over (Kafka's
    StrictControllerMutationQuota). Permissive (older clients, which do not know the error):
    every topic is admitted and counted; only the throttle time holds the client back.
    Kafka measures this on the controller; Skiff on the broker the request arrives at."""

    def __init__(self, node: BrokerServices, ctx: RequestContext, strict: bool) -> None:
        self.manager = node.quotas.controller_mutation
        self.quotas = node.metadata.client_quotas
        self.user, self.client_id = who(ctx)
        self.strict = strict

    def admit(self, mutations: int) -> bool:
        now = now_ms()
        if self.strict and self.manager.would_throttle_ms(
                self.quotas, self.user, self.client_id, now) > 0:
            return False
        self.manager.record(self.quotas, self.user, self.client_id, mutations, now)
        return True

    def throttle_ms(self) -> int:
        return self.manager.would_throttle_ms(self.quotas, self.user, self.client_id, now_ms())
