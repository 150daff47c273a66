"""Controller operations the admin API needs that ControllerService does not offer yet.

They run through ControllerService._run, so they are serialised with every other metadata
change and answer only once their records are committed. What should move into
broker/controller/service.py later, as methods next to create_topics:
  * alter_partition_reassignments (here all-or-nothing; the Kafka handler will want the
    per-partition form, which is `_reassign(..., atomic=False)`),
  * elect_leaders,
  * incremental_alter_configs with atomic=True (any refused resource: nothing is written),
    which is what `validate_only` + the real call do today in two steps.

`service` is the node's ControllerChannel (broker/controller/channel.py). When no local
controller is active, the operations go through the channel to the active controller:
elections as they are; configs validated first, then applied (a change between the two is
not excluded); reassignments per partition (the all-or-nothing check needs the controller's
image, which is remote). The handler and admin tests' node holds a ControllerService itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from broker.controller.channel import ControllerChannel
from broker.controller.requests import (
    AlterConfigsResult,
    ControllerResult,
    ElectionType,
    ElectLeadersResult,
    IncrementalAlterConfigsResource,
    ReassignmentResult,
)
from broker.controller.service import ControllerService
from broker.metadata.image import MetadataImage


def _all_or_nothing(result: ControllerResult[Any], failed: bool) -> ControllerResult[Any]:
    return ControllerResult([], result.response) if failed else result


class ControllerOps:
    def __init__(self, service: ControllerChannel | ControllerService) -> None:
        self.service = service

    def _local(self) -> ControllerService | None:
        """The service to run closures on: this node's, if it is the active controller."""
        if isinstance(self.service, ControllerService):
            return self.service
        local = self.service.local
        if local is not None and local.quorum.is_leader:
            return local
        return None

    async def alter_partition_reassignments(
        self, items: Sequence[tuple[str, int, Sequence[int] | None]],
    ) -> list[ReassignmentResult]:
        """Start (target replicas) or cancel (None) reassignments; if any item is refused,
        nothing is written and every result is returned (the refused ones carry errors)."""
        service = self._local()
        if service is None:
            result: list[ReassignmentResult] = \
                await self.service.alter_partition_reassignments(items)
            return result
        ctl = service.controller

        def op(image: MetadataImage) -> ControllerResult[list[ReassignmentResult]]:
            result = ctl.alter_partition_reassignments(image, items)
            return _all_or_nothing(result, any(r.error is not ErrorCode.none
                                               for r in result.response))

        return await service._run(op)

    async def elect_leaders(
        self, election_type: ElectionType, partitions: Sequence[tuple[str, int]] | None,
    ) -> list[ElectLeadersResult]:
        """Per-partition elections (a partition that needs none is not an error)."""
        service = self._local()
        if service is None:
            elected: list[ElectLeadersResult] = \
                await self.service.elect_leaders(election_type, partitions)
            return elected
        ctl = service.controller
        return await service._run(
            lambda image: ctl.elect_leaders(image, election_type, partitions))

    async def incremental_alter_configs(
        self, resources: Sequence[IncrementalAlterConfigsResource], *, validate_only: bool,
    ) -> list[AlterConfigsResult]:
        service = self._local()
        if service is None:
            checked: list[AlterConfigsResult] = await self.service.incremental_alter_configs(
                resources, validate_only=True)
            if validate_only or any(r.error is not ErrorCode.none for r in checked):
                return checked
            applied: list[AlterConfigsResult] = await self.service.incremental_alter_configs(
                resources, validate_only=False)
            return applied
        ctl = service.controller

        def op(image: MetadataImage) -> ControllerResult[list[AlterConfigsResult]]:
            result = ctl.incremental_alter_configs(image, resources, validate_only)
            return _all_or_nothing(result, any(r.error is not ErrorCode.none
                                               for r in result.response))

        return await service._run(op)
