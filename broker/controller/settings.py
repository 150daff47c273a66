"""The controller's settings, read once from the node's configuration. Every control manager
takes them; they live apart from controller.py so the managers need not import the
controller that holds them."""

from __future__ import annotations

from dataclasses import dataclass

from broker.config import NodeConfig


@dataclass(frozen=True)
class ControllerSettings:
    cluster_id: str = ""
    num_partitions: int = 1
    default_replication_factor: int = 1
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    delete_topic_enable: bool = True
    broker_session_timeout_ms: int = 9000
    # a newly active controller fences an unfenced broker that has not heartbeated to it
    # within twice this of its activation (cluster_control.py)
    broker_heartbeat_interval_ms: int = 2000
    # Skiff's: -1 waits for the session timeout after a disconnect, as Kafka does.
    broker_session_disconnect_timeout_ms: int = -1
    # KIP-835: the active controller appends a NoOp record this often (0: never), so that
    # every node can tell an idle quorum from a lagging one
    metadata_max_idle_interval_ms: int = 500
    node_config: NodeConfig | None = None  # for broker-level fallbacks in validation

    @staticmethod
    def from_config(cfg: NodeConfig, cluster_id: str) -> ControllerSettings:
        return ControllerSettings(
            cluster_id=cluster_id,
            num_partitions=cfg["num.partitions"],
            default_replication_factor=cfg["default.replication.factor"],
            min_insync_replicas=cfg["min.insync.replicas"],
            unclean_leader_election_enable=cfg["unclean.leader.election.enable"],
            delete_topic_enable=cfg["delete.topic.enable"],
            broker_session_timeout_ms=cfg["broker.session.timeout.ms"],
            broker_heartbeat_interval_ms=cfg["broker.heartbeat.interval.ms"],
            broker_session_disconnect_timeout_ms=cfg["broker.session.disconnect.timeout.ms"],
            metadata_max_idle_interval_ms=cfg["metadata.max.idle.interval.ms"],
            node_config=cfg,
        )
