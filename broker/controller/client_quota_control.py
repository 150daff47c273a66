"""ClientQuotaControlManager: AlterClientQuotas on the controller, and DescribeClientQuotas
over an image, as Kafka's ClientQuotaControlManager and ClientQuotasImage answer them.

Alter (pure: image + alterations -> ClientQuota records and one result per entity, in
request order). An entity's ops apply all together or not at all; the first problem is its
answer, INVALID_REQUEST with Kafka's message:
  empty entity, unknown or repeated entity type, ip combined with user/client-id,
  an ip name that is no IP address             (broker/quotas/core.validate_entity)
  the same key twice in one entity's ops
  a key that entity type does not take, a value <= 0, a fraction for a whole-number key
                                                (broker/quotas/core.validate_value)
Setting a key to the value it has and removing a key that is not set write nothing.

Describe: a filter of components (entity type, match type, match) and `strict`:
  EXACT (0)    the entity has that type with exactly that name
  DEFAULT (1)  the entity has that type's default entity (no name)
  ANY (2)      the entity has that type with a name (Kafka's MATCH_TYPE_SPECIFIED)
  strict       the entity has no other types than the filter's
A bad filter (empty or repeated type, unknown type, EXACT without a match, DEFAULT or ANY
with one, ip combined with user/client-id) fails the whole request with INVALID_REQUEST
(UNSUPPORTED_VERSION for an unknown type or match type, as Kafka does).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from broker.controller.requests import ControllerResult
from broker.metadata import records as rec
from broker.metadata.image import MetadataImage
from broker.quotas.core import (
    CLIENT_ID,
    ENTITY_TYPES,
    IP,
    USER,
    QuotaEntity,
    validate_entity,
    validate_value,
)

MATCH_EXACT = 0
MATCH_DEFAULT = 1
MATCH_ANY = 2


@dataclass(frozen=True, slots=True)
class QuotaOp:
    key: str
    value: float | None  # None: remove the key


@dataclass(frozen=True, slots=True)
class QuotaAlteration:
    entity: QuotaEntity
    ops: tuple[QuotaOp, ...]


@dataclass(frozen=True, slots=True)
class QuotaAlterResult:
    entity: QuotaEntity
    error: ErrorCode = ErrorCode.none
    message: str | None = None


@dataclass(frozen=True, slots=True)
class FilterComponent:
    entity_type: str
    match_type: int
    match: str | None = None


class DescribeError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _alteration_records(image: MetadataImage, a: QuotaAlteration
                        ) -> tuple[list[Any], str | None]:
    problem = validate_entity(a.entity)
    if problem is not None:
        return [], problem
    current = image.client_quotas.get(a.entity, {})
    seen: set[str] = set()
    out: list[Any] = []
    for op in a.ops:
        if op.key in seen:
            return [], f"Duplicate quota key {op.key} in the alteration of one entity"
        seen.add(op.key)
        if op.value is None:
            if op.key in current:
                out.append(rec.client_quota_record(a.entity, op.key, None))
            continue
        problem = validate_value(a.entity, op.key, op.value)
        if problem is not None:
            return [], problem
        if current.get(op.key) != op.value:
            out.append(rec.client_quota_record(a.entity, op.key, op.value))
    return out, None


class ClientQuotaControlManager:
    def alter_client_quotas(self, image: MetadataImage,
                            alterations: Sequence[QuotaAlteration],
                            validate_only: bool = False
                            ) -> ControllerResult[list[QuotaAlterResult]]:
        records: list[Any] = []
        results: list[QuotaAlterResult] = []
        for a in alterations:
            out, problem = _alteration_records(image, a)
            if problem is not None:
                results.append(QuotaAlterResult(a.entity, ErrorCode.invalid_request, problem))
                continue
            results.append(QuotaAlterResult(a.entity))
            if not validate_only:
                records.extend(out)
        return ControllerResult(records, results)


def describe_client_quotas(image: MetadataImage, components: Sequence[FilterComponent],
                           strict: bool) -> list[tuple[QuotaEntity, dict[str, float]]]:
    """The entities matching the filter and their quotas; raises DescribeError."""
    exact: dict[str, str | None] = {}
    specified: set[str] = set()
    for c in components:
        if not c.entity_type:
            raise DescribeError(ErrorCode.invalid_request, "Invalid empty entity type.")
        if c.entity_type in exact or c.entity_type in specified:
            raise DescribeError(ErrorCode.invalid_request,
                                f"Entity type {c.entity_type} cannot appear more than once "
                                "in the filter.")
        if c.entity_type not in ENTITY_TYPES:
            raise DescribeError(ErrorCode.unsupported_version,
                                f"Unsupported entity type {c.entity_type}")
        if c.match_type == MATCH_EXACT:
            if c.match is None:
                raise DescribeError(ErrorCode.invalid_request,
                                    "Request specified MATCH_TYPE_EXACT, but set match "
                                    "string to null.")
            exact[c.entity_type] = c.match
        elif c.match_type == MATCH_DEFAULT:
            if c.match is not None:
                raise DescribeError(ErrorCode.invalid_request,
                                    "Request specified MATCH_TYPE_DEFAULT, but also "
                                    "specified a match string.")
            exact[c.entity_type] = None
        elif c.match_type == MATCH_ANY:
            if c.match is not None:
                raise DescribeError(ErrorCode.invalid_request,
                                    "Request specified MATCH_TYPE_SPECIFIED, but also "
                                    "specified a match string.")
            specified.add(c.entity_type)
        else:
            raise DescribeError(ErrorCode.unsupported_version,
                                f"Unknown match type {c.match_type}")
    types = set(exact) | specified
    if IP in types and (USER in types or CLIENT_ID in types):
        raise DescribeError(ErrorCode.invalid_request,
                            "Invalid entity filter component combination, IP filter component "
                            "should not be used with user or clientId filter component.")
    out: list[tuple[QuotaEntity, dict[str, float]]] = []
    for entity, values in image.client_quotas.items():
        names = dict(entity)
        if strict and len(names) != len(types):
            continue
        if any(t not in names or names[t] != n for t, n in exact.items()):
            continue
        # MATCH_TYPE_SPECIFIED: the entity has that type, its default included (Kafka's
        # ClientQuotasImage checks containsKey; kafka-configs --describe --entity-type users
        # lists "the default user-principal" too)
        if any(t not in names for t in specified):
            continue
        out.append((entity, dict(values)))
    out.sort(key=lambda ev: [(t, n is not None, n or "") for t, n in ev[0]])
    return out

