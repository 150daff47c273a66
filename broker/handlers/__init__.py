"""One module per Kafka API, each with API_KEY and ``async def handle(node, ctx, request)``.

`BROKER_HANDLERS` lists the modules the client listener serves; the node builds its
Dispatcher from it (`broker_dispatcher()`). Add a module here when its API is implemented:
the server advertises only APIs that have a handler.
"""

from __future__ import annotations

from types import ModuleType

from broker.handlers import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    add_raft_voter,
    alter_client_quotas,
    alter_configs,
    alter_partition_reassignments,
    alter_replica_log_dirs,
    alter_share_group_offsets,
    alter_user_scram_credentials,
    api_versions,
    consumer_group_describe,
    consumer_group_heartbeat,
    create_acls,
    create_delegation_token,
    create_partitions,
    create_topics,
    delete_acls,
    delete_groups,
    delete_records,
    delete_share_group_offsets,
    delete_share_group_state,
    delete_topics,
    describe_acls,
    describe_client_quotas,
    describe_cluster,
    describe_configs,
    describe_delegation_token,
    describe_groups,
    describe_log_dirs,
    describe_producers,
    describe_quorum,
    describe_share_group_offsets,
    describe_topic_partitions,
    describe_transactions,
    describe_user_scram_credentials,
    elect_leaders,
    end_txn,
    expire_delegation_token,
    fetch,
    find_coordinator,
    get_telemetry_subscriptions,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    initialize_share_group_state,
    join_group,
    leave_group,
    list_config_resources,
    list_groups,
    list_offsets,
    list_partition_reassignments,
    list_transactions,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    produce,
    push_telemetry,
    read_share_group_state,
    read_share_group_state_summary,
    remove_raft_voter,
    renew_delegation_token,
    share_acknowledge,
    share_fetch,
    share_group_describe,
    share_group_heartbeat,
    streams_group_describe,
    streams_group_heartbeat,
    streams_group_topology_description_update,
    sync_group,
    txn_offset_commit,
    unregister_broker,
    update_features,
    write_share_group_state,
    write_txn_markers,
)
from broker.server.dispatch import Dispatcher

BROKER_HANDLERS: tuple[ModuleType, ...] = (
    api_versions,
    produce,
    fetch,
    list_offsets,
    delete_records,
    describe_log_dirs,
    describe_client_quotas,
    metadata,
    create_topics,
    delete_topics,
    create_partitions,
    describe_configs,
    alter_configs,
    incremental_alter_configs,
    describe_cluster,
    describe_quorum,  # sent on to the metadata quorum's leader
    init_producer_id,
    offset_for_leader_epoch,
    elect_leaders,
    alter_partition_reassignments,
    list_partition_reassignments,
    # consumer groups
    find_coordinator,
    join_group,
    sync_group,
    heartbeat,
    leave_group,
    offset_commit,
    offset_fetch,
    offset_delete,
    list_groups,
    describe_groups,
    delete_groups,
    consumer_group_heartbeat,
    consumer_group_describe,
    # streams groups (KIP-1071, broker/group/streams.py)
    streams_group_heartbeat,
    streams_group_describe,
    streams_group_topology_description_update,  # KIP-1331
    # share groups (KIP-932, broker/share)
    share_group_heartbeat,
    share_group_describe,
    share_fetch,
    share_acknowledge,
    describe_share_group_offsets,
    alter_share_group_offsets,
    delete_share_group_offsets,
    # the share coordinator's state APIs (KIP-932, broker/share/coordinator_shell.py)
    initialize_share_group_state,
    read_share_group_state,
    write_share_group_state,
    delete_share_group_state,
    read_share_group_state_summary,
    # transactions: the coordinator's side (issue 22)
    add_partitions_to_txn,
    add_offsets_to_txn,
    end_txn,
    txn_offset_commit,
    describe_transactions,
    list_transactions,
    # client telemetry (KIP-714)
    get_telemetry_subscriptions,
    push_telemetry,
    describe_user_scram_credentials,  # broker/security: SCRAM users
    alter_user_scram_credentials,
    create_delegation_token,  # delegation tokens (broker/security/delegation_token.py)
    renew_delegation_token,
    expire_delegation_token,
    describe_delegation_token,
    describe_acls,  # ACLs (broker/security/authorizer.py)
    create_acls,
    delete_acls,
    # transactions, the log side (issue 22)
    write_txn_markers,
    describe_producers,
    alter_client_quotas,  # client quotas (broker/quotas)
    describe_topic_partitions,  # KIP-966
    unregister_broker,  # KIP-631, sent on to the controller
    list_config_resources,  # KIP-1142
    alter_replica_log_dirs,  # JBOD (KIP-113, KIP-858)
    update_features,  # KIP-584, sent on to the controller
    add_raft_voter,  # KIP-853, sent on to the quorum leader
    remove_raft_voter,
)


def broker_dispatcher(modules: tuple[ModuleType, ...] = BROKER_HANDLERS) -> Dispatcher:
    """The client listener's dispatcher, the whole-request authorization checks
    (broker/handlers/_authz.py) in front of the handlers that need them."""
    from broker.handlers._authz import guarded_dispatcher

    return guarded_dispatcher(modules)
