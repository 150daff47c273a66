"""Partition replicas on this broker: roles, high watermark, produce and fetch paths."""

from broker.replication.partition import Partition, Role
from broker.replication.replica_manager import ReplicaManager

__all__ = ["Partition", "ReplicaManager", "Role"]
