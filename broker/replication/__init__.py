"""Partition replicas on this broker: roles, high watermark, produce and fetch paths,
replica fetchers and ISR changes.

Wiring in a node (the ISR changes go to the active controller through `alter_partition`):

    view = ClusterView(lambda: node.metadata, config.inter_broker_listener_name)
    replicas = ReplicaManager(
        node_id, logs, clock, settings=ReplicationSettings.from_config(config),
        alter_partition=channel.alter_partition, broker_epoch=lambda: node.broker_epoch,
        rack_of=view.rack_of, isr_eligible=view.isr_eligible)
    fetchers = ReplicaFetcherManager(replicas, address_of=view.address_of)
    replicas.start(); fetchers.start()           # inside the running event loop
    ...
    await fetchers.stop(); await replicas.stop()  # before the partitions are closed
"""

from broker.replication.cluster_view import ClusterView
from broker.replication.fetcher import ReplicaFetcherManager
from broker.replication.partition import Partition, Role
from broker.replication.replica_manager import ReplicaManager, ReplicationSettings

__all__ = [
    "ClusterView",
    "Partition",
    "ReplicaFetcherManager",
    "ReplicaManager",
    "ReplicationSettings",
    "Role",
]
