"""The KRaft controller APIs on the controller listener, one module per API.

Each module converts both ways between the kio message of one version (`VERSION`) and the
dataclasses of broker/controller/requests.py:
  * controller side: `handle(node, ctx, request)` parses, calls the node's active
    ControllerService (NOT_CONTROLLER when this node's controller is not active) and answers;
  * broker side (ControllerChannel): `request(...)` builds the kio request, `error_code_of`
    tells a NOT_CONTROLLER answer (retry elsewhere) apart, and `reply_of`/`results_of`
    turns the answer back into dataclasses.
Only Skiff brokers call this listener, so each API is served at the one version they send.
"""

from __future__ import annotations

from types import ModuleType

from broker.controller.rpc import (
    allocate_producer_ids,
    alter_client_quotas,
    alter_configs,
    alter_partition,
    alter_partition_reassignments,
    alter_user_scram_credentials,
    assign_replicas_to_dirs,
    broker_heartbeat,
    broker_registration,
    controller_registration,
    create_acls,
    create_partitions,
    create_topics,
    delete_acls,
    delete_topics,
    elect_leaders,
    incremental_alter_configs,
    list_partition_reassignments,
    unregister_broker,
    update_features,
)

CONTROLLER_RPCS: tuple[ModuleType, ...] = (
    broker_registration,
    broker_heartbeat,
    alter_partition,
    allocate_producer_ids,
    create_topics,
    delete_topics,
    create_partitions,
    alter_configs,
    incremental_alter_configs,
    elect_leaders,
    alter_partition_reassignments,
    list_partition_reassignments,
    alter_user_scram_credentials,
    create_acls,
    delete_acls,
    alter_client_quotas,
    unregister_broker,
    assign_replicas_to_dirs,  # KIP-858
    update_features,
    controller_registration,
)

__all__ = ["CONTROLLER_RPCS"]
