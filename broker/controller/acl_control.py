"""AclControlManager: CreateAcls and DeleteAcls on the controller (Kafka's AclControlManager).

Pure: (image, ACLs or filters) -> AccessControlEntry / RemoveAccessControlEntry records and
one result per item, in request order.
  CreateAcls: an ACL Kafka refuses (authorizer.validate_new_acl) is INVALID_REQUEST with
    Kafka's message; a CIDR host (KIP-1276) below metadata.version 4.4-IV1 is
    UNSUPPORTED_VERSION, an invalid CIDR INVALID_REQUEST (AclControlManager's wording);
    an ACL equal to one already present (or earlier in the request) is
    answered as created and writes nothing; every other ACL gets a new random id.
  DeleteAcls: a filter with an UNKNOWN part is INVALID_REQUEST; otherwise every present ACL
    it matches is removed and listed in its result (an ACL matched by an earlier filter of
    the same request is listed there only).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from broker.controller.control_base import ControlManagerBase
from broker.controller.requests import ApiError, ControllerResult
from broker.metadata import records as rec
from broker.metadata.features import (
    CIDR_ACL_METADATA_VERSION,
    METADATA_VERSION,
    metadata_version_name,
)
from broker.metadata.image import MetadataImage
from broker.security.authorizer import (
    AclBinding,
    AclFilter,
    cidr_problem,
    is_cidr,
    validate_new_acl,
)


@dataclass(frozen=True, slots=True)
class AclDeletionResult:
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    matching: tuple[AclBinding, ...] = field(default_factory=tuple)


class AclControlManager(ControlManagerBase):
    def _new_acl_id(self, taken: set[uuid.UUID]) -> uuid.UUID:
        while True:
            u = uuid.UUID(int=self.rng.getrandbits(128), version=4)
            if u.int not in (0, 1) and u not in taken:
                return u

    def create_acls(self, image: MetadataImage,
                    bindings: Sequence[AclBinding]) -> ControllerResult[list[ApiError]]:
        present = set(image.acls.values())
        taken = set(image.acls)
        records: list[Any] = []
        results: list[ApiError] = []
        cidr_supported = image.finalized_level(METADATA_VERSION) >= CIDR_ACL_METADATA_VERSION
        for b in bindings:
            problem = validate_new_acl(b)
            if problem is not None:
                results.append(ApiError(ErrorCode.invalid_request, problem))
                continue
            if is_cidr(b.host):
                if not cidr_supported:
                    results.append(ApiError(
                        ErrorCode.unsupported_version, "CIDR-based ACL host patterns require "
                        f"metadata version {metadata_version_name(CIDR_ACL_METADATA_VERSION)} "
                        "or higher."))
                    continue
                invalid = cidr_problem(b.host)
                if invalid is not None:
                    results.append(ApiError(ErrorCode.invalid_request,
                                            f"Invalid CIDR notation '{b.host}': {invalid}"))
                    continue
            if b not in present:
                acl_id = self._new_acl_id(taken)
                taken.add(acl_id)
                present.add(b)
                records.append(rec.access_control_entry_record(acl_id, b))
            results.append(ApiError())
        return ControllerResult(records, results)

    def delete_acls(self, image: MetadataImage, filters: Sequence[AclFilter]
                    ) -> ControllerResult[list[AclDeletionResult]]:
        removed: set[uuid.UUID] = set()
        records: list[Any] = []
        results: list[AclDeletionResult] = []
        for f in filters:
            unknown = f.unknown_part()
            if unknown is not None:
                results.append(AclDeletionResult(ErrorCode.invalid_request,
                                                 f"Unknown {unknown}."))
                continue
            matching: list[AclBinding] = []
            for acl_id, b in sorted(image.acls.items()):
                if acl_id in removed or not f.matches(b):
                    continue
                removed.add(acl_id)
                records.append(rec.remove_access_control_entry_record(acl_id))
                matching.append(b)
            results.append(AclDeletionResult(matching=tuple(matching)))
        return ControllerResult(records, results)
