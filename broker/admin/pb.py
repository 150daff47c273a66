"""The generated admin-API modules (compiled from proto/skiff/admin/v1 by broker.util.protogen)."""

from __future__ import annotations

from typing import Any

from broker.util import protogen

_V1 = "skiff.admin.v1."

cluster: Any = protogen.load(_V1 + "cluster_pb2")
cluster_grpc: Any = protogen.load(_V1 + "cluster_pb2_grpc")
topics: Any = protogen.load(_V1 + "topics_pb2")
topics_grpc: Any = protogen.load(_V1 + "topics_pb2_grpc")
partitions: Any = protogen.load(_V1 + "partitions_pb2")
partitions_grpc: Any = protogen.load(_V1 + "partitions_pb2_grpc")
groups: Any = protogen.load(_V1 + "groups_pb2")
groups_grpc: Any = protogen.load(_V1 + "groups_pb2_grpc")
configs: Any = protogen.load(_V1 + "configs_pb2")
configs_grpc: Any = protogen.load(_V1 + "configs_pb2_grpc")
transactions: Any = protogen.load(_V1 + "transactions_pb2")
transactions_grpc: Any = protogen.load(_V1 + "transactions_pb2_grpc")
quotas: Any = protogen.load(_V1 + "quotas_pb2")
quotas_grpc: Any = protogen.load(_V1 + "quotas_pb2_grpc")
records: Any = protogen.load(_V1 + "records_pb2")
records_grpc: Any = protogen.load(_V1 + "records_pb2_grpc")
acls: Any = protogen.load(_V1 + "acls_pb2")
acls_grpc: Any = protogen.load(_V1 + "acls_pb2_grpc")
features: Any = protogen.load(_V1 + "features_pb2")
features_grpc: Any = protogen.load(_V1 + "features_pb2_grpc")
meta: Any = protogen.load("skiff.metadata.v1.records_pb2")

# Every admin service's full name, for health and reflection.
SERVICE_NAMES: tuple[str, ...] = tuple(
    svc.full_name
    for mod in (cluster, topics, partitions, groups, configs, quotas, records, transactions,
                acls, features)
    for svc in mod.DESCRIPTOR.services_by_name.values()
)
