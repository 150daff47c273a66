"""The KRaft controller APIs, one module per API, each written once.

Each module is the API's codec between kio messages and the dataclasses of
broker/controller/requests.py, used by up to three callers:
  * for the APIs clients send too (CreateTopics, DeleteTopics, CreatePartitions, the config,
    ACL, quota, SCRAM, feature, election, reassignment APIs and UnregisterBroker), the
    broker's Kafka handler (broker/handlers/<api>.py) parses a client's request of any
    version with it and answers in that version (`response(request, ...)`, built with
    broker/protocol/kio_build); where the broker checks nothing per item, the handler just
    calls `serve(node.controller, request)`, the API's one server;
  * the controller listener: `handle(node, ctx, request)` runs the same `serve` on this
    node's active ControllerService (NOT_CONTROLLER when it is not active,
    rpc/_common.on_active), or parses, calls and answers itself where the handler does more;
  * the broker side of the ControllerChannel: `request(...)` builds the kio request of
    `VERSION`, `error_code_of` tells a NOT_CONTROLLER answer (retry elsewhere) apart, and
    `reply_of`/`results_of` turns the answer back into dataclasses.
Only Skiff brokers call the controller listener, so it serves each API at `VERSION`.
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
    envelope,
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
    envelope,  # KIP-590: the delegation-token writes, as their client's principal
)

__all__ = ["CONTROLLER_RPCS"]
