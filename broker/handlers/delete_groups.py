"""DeleteGroups (API 42): delete Empty groups with their committed offsets; a share group
with its share-partitions' state in the share coordinator (NON_EMPTY_GROUP while it has
members), before the other kinds, as Kafka chains them.

v3 (Kafka 4.4; its class is generated into broker/protocol/_kio_next) carries a per-group
ErrorMessage: null on success, else Kafka's message for the error (Errors.message(), which the
Java Admin puts in the exception it raises)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.errors import KafkaError
from broker.group.shell import service_of
from broker.handlers._authz import Op, Res, allowed
from broker.handlers._context import GroupsBroker
from broker.protocol.durations import NO_THROTTLE
from broker.protocol.kio_build import build, response_module

if TYPE_CHECKING:
    from broker.server import RequestContext

API_KEY = 42

# Kafka's Errors.message() for the errors DeleteGroups answers
_MESSAGES: dict[ErrorCode, str] = {
    ErrorCode.group_id_not_found: "The group id does not exist.",
    ErrorCode.non_empty_group: "The group is not empty.",
    ErrorCode.group_authorization_failed: "Group authorization failed.",
    ErrorCode.invalid_group_id: "The configured groupId is invalid.",
    ErrorCode.not_coordinator: "This is not the correct coordinator.",
    ErrorCode.coordinator_not_available: "The coordinator is not available.",
    ErrorCode.coordinator_load_in_progress:
        "The coordinator is loading and hence can't process requests.",
}


def error_message(code: ErrorCode) -> str | None:
    if code == ErrorCode.none:
        return None
    return _MESSAGES.get(code, code.name.upper())


async def handle(node: GroupsBroker, ctx: RequestContext, request: Any) -> Any:
    names = [str(g) for g in request.groups_names]
    may = [n for n in names if allowed(node, ctx, Op.DELETE, Res.GROUP, n)]
    results = {n: ErrorCode.group_authorization_failed for n in names}
    share = node.share_groups
    if share is not None:
        for n in list(may):
            try:
                share.coordinated(n)
            except KafkaError:
                continue
            deleted = await share.delete_group(n)
            if deleted is not None:
                results[n] = deleted
                may.remove(n)
    if may:
        try:
            results.update(await service_of(node).delete_groups(may))
        except KafkaError as exc:
            results.update({n: exc.error_code for n in may})
    mod = response_module(request)
    return build(mod.DeleteGroupsResponse, throttle_time=NO_THROTTLE, results=tuple(
        build(mod.DeletableGroupResult, group_id=g, error_code=results[str(g)],
              error_message=error_message(results[str(g)]))
        for g in request.groups_names))
