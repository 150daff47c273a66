"""AlterUserScramCredentials on the controller, as Kafka's ScramControlManager checks it.

Pure: (image, deletions, upsertions) -> the records to append and one result per user,
in order of first appearance. A user's changes apply all together or not at all; the
first problem found for a user is its answer:
  empty name                          UNACCEPTABLE_CREDENTIAL
  mechanism other than 1/2            UNSUPPORTED_SASL_MECHANISM
  the same user twice (any mechanism) DUPLICATE_RESOURCE (checked first)
  iterations outside 4096..16384      UNACCEPTABLE_CREDENTIAL
  empty salt or salted password       UNACCEPTABLE_CREDENTIAL
  deleting a credential not present   RESOURCE_NOT_FOUND
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from broker.controller.requests import ControllerResult
from broker.metadata import records as rec
from broker.metadata.image import MetadataImage
from broker.security import scram


@dataclass(frozen=True, slots=True)
class Deletion:
    name: str
    mechanism: int


@dataclass(frozen=True, slots=True)
class Upsertion:
    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


@dataclass(frozen=True, slots=True)
class UserResult:
    user: str
    error: ErrorCode = ErrorCode.none
    message: str | None = None


def alter(image: MetadataImage, deletions: Sequence[Deletion],
          upsertions: Sequence[Upsertion]) -> ControllerResult[list[UserResult]]:
    order: list[str] = []
    problem: dict[str, tuple[ErrorCode, str]] = {}
    pending: dict[str, list[Any]] = {}

    def fail(user: str, code: ErrorCode, message: str) -> None:
        problem.setdefault(user, (code, message))

    changes: list[Deletion | Upsertion] = [*deletions, *upsertions]
    # Kafka's ScramControlManager keys a request's changes by user name alone, before any
    # other check: SCRAM-SHA-256 and SCRAM-SHA-512 for one user in one request is refused
    counts: dict[str, int] = {}
    for change in changes:
        counts[change.name] = counts.get(change.name, 0) + 1
    for user, n in counts.items():
        if n > 1:
            fail(user, ErrorCode.duplicate_resource,
                 "A user credential cannot be altered twice in the same request")
    for change in changes:
        user = change.name
        if user not in pending:
            order.append(user)
            pending[user] = []
        if not user:
            fail(user, ErrorCode.unacceptable_credential, "Username must not be empty")
            continue
        mechanism = rec.SCRAM_MECHANISM_NAMES.get(change.mechanism)
        if mechanism is None:
            fail(user, ErrorCode.unsupported_sasl_mechanism,
                 f"Unknown SCRAM mechanism {change.mechanism}")
            continue
        if isinstance(change, Upsertion):
            if change.iterations < scram.MIN_ITERATIONS:
                fail(user, ErrorCode.unacceptable_credential, "Too few iterations")
                continue
            if change.iterations > scram.MAX_ITERATIONS:
                fail(user, ErrorCode.unacceptable_credential, "Too many iterations")
                continue
            if not change.salt or not change.salted_password:
                fail(user, ErrorCode.unacceptable_credential,
                     "Salt and salted password must not be empty")
                continue
            cred = scram.credential_from_salted(mechanism, change.salted_password,
                                                change.salt, change.iterations)
            pending[user].append(rec.user_scram_credential_record(
                user, mechanism, cred.salt, cred.stored_key, cred.server_key, cred.iterations))
        else:
            if (mechanism, user) not in image.scram_credentials:
                fail(user, ErrorCode.resource_not_found,
                     "Attempt to delete a user credential that does not exist")
                continue
            pending[user].append(rec.remove_user_scram_credential_record(user, mechanism))
    records: list[Any] = []
    results: list[UserResult] = []
    for user in order:
        if user in problem:
            results.append(UserResult(user, *problem[user]))
        else:
            records.extend(pending[user])
            results.append(UserResult(user))
    return ControllerResult(records, results)


def describe(image: MetadataImage, users: Sequence[str] | None
             ) -> tuple[list[tuple[str, ErrorCode, str | None, list[tuple[int, int]]]],
                        ErrorCode]:
    """DescribeUserScramCredentials: (user, error, message, [(mechanism, iterations)]) per
    user; all users with credentials when `users` is None or empty."""
    by_user: dict[str, list[tuple[int, int]]] = {}
    for (mechanism, user), cred in sorted(image.scram_credentials.items(),
                                          key=lambda kv: (kv[0][1], kv[0][0])):
        by_user.setdefault(user, []).append(
            (rec.SCRAM_MECHANISM_CODES[mechanism], cred.iterations))
    if not users:
        return [(u, ErrorCode.none, None, infos) for u, infos in by_user.items()], \
            ErrorCode.none
    out: list[tuple[str, ErrorCode, str | None, list[tuple[int, int]]]] = []
    counts = {u: users.count(u) for u in users}
    for u in dict.fromkeys(users):
        if counts[u] > 1:
            out.append((u, ErrorCode.duplicate_resource,
                        "Cannot describe SCRAM credentials for the same user twice in a "
                        "single request", []))
        elif u not in by_user:
            out.append((u, ErrorCode.resource_not_found,
                        "Attempt to describe a user credential that does not exist", []))
        else:
            out.append((u, ErrorCode.none, None, by_user[u]))
    return out, ErrorCode.none
