"""What the share-group handlers check before they touch a share-partition or its state."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from broker.coordinator.services import NodeSettings
from broker.handlers._authz import Op, Res, allowed
from broker.share.shell import DISABLED_MESSAGE, share_enabled

if TYPE_CHECKING:
    from broker.server import RequestContext


def refusal(node: NodeSettings, ctx: RequestContext, group_id: str,
            member_id: str) -> tuple[ErrorCode, str | None] | None:
    """The whole request's error and message, or None when it may go on: share groups
    enabled (share.version), READ on the group, a group id and a member id."""
    if not share_enabled(node):
        return ErrorCode.unsupported_version, DISABLED_MESSAGE
    if not allowed(node, ctx, Op.READ, Res.GROUP, group_id):
        return ErrorCode.group_authorization_failed, None
    if not group_id or not member_id:
        return ErrorCode.invalid_request, "GroupId and MemberId must be set."
    return None


def offsets_refusal(node: NodeSettings, ctx: RequestContext, group_id: str,
                    op: Op) -> tuple[ErrorCode, str | None] | None:
    """The same for AlterShareGroupOffsets (READ on the group) and DeleteShareGroupOffsets
    (DELETE): share groups enabled, `op` on the group, a group id."""
    if not share_enabled(node):
        return ErrorCode.unsupported_version, DISABLED_MESSAGE
    if not allowed(node, ctx, op, Res.GROUP, group_id):
        return ErrorCode.group_authorization_failed, None
    if not group_id:
        return ErrorCode.invalid_group_id, None
    return None
