"""QuotaService: client quotas, described from this node's image and altered through the
controller channel with the same operation as AlterClientQuotas (API 49): the channel goes
to the active controller wherever it is, so no gRPC forwarding is needed."""

from __future__ import annotations

from typing import Any

import grpc
from kio.schema.errors import ErrorCode

from broker.admin.errors import AdminError, S, rpc_errors
from broker.admin.pb import quotas, quotas_grpc
from broker.admin.services import AdminServices
from broker.controller.client_quota_control import (
    DescribeError,
    FilterComponent,
    QuotaAlteration,
    QuotaOp,
    describe_client_quotas,
)
from broker.errors import KafkaError
from broker.quotas.core import QuotaEntity, entity_text, make_entity


def _entity(parts: Any) -> QuotaEntity:
    return make_entity((p.entity_type, p.entity_name if p.HasField("entity_name") else None)
                       for p in parts)


def _parts(entity: QuotaEntity) -> list[Any]:
    return [quotas.QuotaEntityPart(entity_type=t, **({} if n is None else {"entity_name": n}))
            for t, n in entity]


class QuotaService(quotas_grpc.QuotaServiceServicer):  # type: ignore[misc]
    def __init__(self, node: AdminServices) -> None:
        self.node = node

    @rpc_errors
    async def DescribeQuotas(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        components = [FilterComponent(c.entity_type, int(c.match_type),
                                      c.match if c.HasField("match") else None)
                      for c in request.components]
        try:
            found = describe_client_quotas(self.node.metadata, components, request.strict)
        except DescribeError as exc:
            raise KafkaError(exc.code, exc.message) from None
        return quotas.DescribeQuotasResponse(entries=[
            quotas.QuotaEntry(entity=_parts(e), values=values) for e, values in found])

    @rpc_errors
    async def AlterQuotas(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        if not request.alterations:
            raise AdminError(S.INVALID_ARGUMENT, "no quota alterations given")
        alterations = [
            QuotaAlteration(_entity(a.entity), tuple(
                QuotaOp(o.key, o.value if o.HasField("value") else None) for o in a.ops))
            for a in request.alterations]
        # Check everything first (the controller answers per entity): all or nothing.
        for validate in ((True,) if request.validate_only else (True, False)):
            results = await self.node.controller.alter_client_quotas(alterations, validate)
            for r in results:
                if r.error is not ErrorCode.none:
                    raise KafkaError(r.error, f"{entity_text(r.entity) or '(empty entity)'}: "
                                              f"{r.message or r.error.name}")
        return quotas.AlterQuotasResponse()
