"""What replication needs to know about other brokers, read from the metadata image:
where they listen (inter.broker.listener.name), their racks (KIP-392), and whether they
may join an ISR (registered, unfenced, not shutting down, at the broker epoch they
fetched with). The image getter is called on every use, so the answers follow metadata."""

from __future__ import annotations

from collections.abc import Callable

from broker.metadata.image import MetadataImage


class ClusterView:
    def __init__(self, image: Callable[[], MetadataImage], listener_name: str) -> None:
        self.image = image
        self.listener_name = listener_name

    def address_of(self, broker_id: int) -> tuple[str, int] | None:
        """A fenced leader still answers fetches until the controller moves its leaderships,
        so fenced brokers have addresses too."""
        reg = self.image().broker(broker_id)
        ep = None if reg is None else reg.endpoint(self.listener_name)
        return None if ep is None else (ep.host, ep.port)

    def rack_of(self, broker_id: int) -> str | None:
        reg = self.image().broker(broker_id)
        return None if reg is None else reg.rack

    def isr_eligible(self, broker_id: int, broker_epoch: int) -> bool:
        """Kafka's check before proposing an ISR expansion; -1 (an epoch the follower did
        not send, Fetch < v15) is not compared."""
        reg = self.image().broker(broker_id)
        return (
            reg is not None and not reg.fenced and not reg.in_controlled_shutdown
            and (broker_epoch < 0 or broker_epoch == reg.epoch)
        )
