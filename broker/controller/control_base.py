"""What the control managers share: the controller's settings and seeded random source, and
the topic and broker policies read from the image (min ISR, unclean election, usable
brokers)."""

from __future__ import annotations

import random
from collections.abc import Callable

from broker.controller.settings import ControllerSettings
from broker.metadata.image import (
    MetadataImage,
)


class ControlManagerBase:
    """What every control manager reads: the settings and the controller's seeded random
    source (one for all managers, so a seed gives the same ids whatever manager draws)."""

    def __init__(self, settings: ControllerSettings, rng: random.Random) -> None:
        self.settings = settings
        self.rng = rng

    # -- helpers ------------------------------------------------------------------

    def _topic_min_isr(self, image: MetadataImage) -> Callable[[str], int]:
        def get(topic: str) -> int:
            v = image.topic_config(topic).get("min.insync.replicas")
            if v is None:
                v = image.broker_config().get("min.insync.replicas")
            try:
                return int(v) if v is not None else self.settings.min_insync_replicas
            except ValueError:
                return self.settings.min_insync_replicas
        return get

    def _topic_unclean(self, image: MetadataImage) -> Callable[[str], bool]:
        def get(topic: str) -> bool:
            v = image.topic_config(topic).get("unclean.leader.election.enable")
            if v is None:
                v = image.broker_config().get("unclean.leader.election.enable")
            if v is None:
                return self.settings.unclean_leader_election_enable
            return v.strip().lower() == "true"
        return get

    @staticmethod
    def usable_brokers(image: MetadataImage) -> dict[int, str | None]:
        """Brokers that may receive new replicas: registered, unfenced, not shutting down."""
        return {b: r.rack for b, r in image.brokers.items()
                if not r.fenced and not r.in_controlled_shutdown}

    @staticmethod
    def placeable_brokers(image: MetadataImage) -> dict[int, str | None]:
        """Brokers the replica placer may pick: usable ones with a directory that is not
        cordoned (KIP-1066, Kafka's BrokerHeartbeatManager.usableBrokers)."""
        return {b: r.rack for b, r in image.brokers.items()
                if not r.fenced and not r.in_controlled_shutdown and r.has_uncordoned_dirs}


    @staticmethod
    def _usable(image: MetadataImage) -> Callable[[int], bool]:
        def usable(b: int) -> bool:
            reg = image.brokers.get(b)
            return reg is not None and not reg.fenced and not reg.in_controlled_shutdown
        return usable
