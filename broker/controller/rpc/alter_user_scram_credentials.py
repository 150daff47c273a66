# mypy: disable-error-code="no-any-return"
"""AlterUserScramCredentials (API 51), handled by broker/security/scram_admin. The codec both
the client-facing handler (broker/handlers/alter_user_scram_credentials.py) and the
controller listener use; the answer is of the request's version."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kio.schema.alter_user_scram_credentials.v0 import request as kreq
from kio.schema.errors import ErrorCode

from broker.controller.api import ControllerApi
from broker.controller.rpc._common import ControllerNode, on_active
from broker.errors import KafkaError
from broker.protocol.durations import NO_THROTTLE
from broker.protocol.kio_build import build, response_module
from broker.security.scram_admin import Deletion, Upsertion, UserResult

Q: Any = kreq

API_KEY = 51
VERSION = 0


def request(deletions: Sequence[Deletion],
            upsertions: Sequence[Upsertion]) -> kreq.AlterUserScramCredentialsRequest:
    return Q.AlterUserScramCredentialsRequest(
        deletions=tuple(Q.ScramCredentialDeletion(name=d.name, mechanism=d.mechanism)
                        for d in deletions),
        upsertions=tuple(Q.ScramCredentialUpsertion(
            name=u.name, mechanism=u.mechanism, iterations=u.iterations, salt=u.salt,
            salted_password=u.salted_password) for u in upsertions))


def parse(r: Any) -> tuple[list[Deletion], list[Upsertion]]:
    return ([Deletion(d.name, int(d.mechanism)) for d in r.deletions],
            [Upsertion(u.name, int(u.mechanism), int(u.iterations), bytes(u.salt),
                       bytes(u.salted_password)) for u in r.upsertions])


def response(request: Any, results: Sequence[UserResult]) -> Any:
    """The answer to `request`, of its version."""
    mod = response_module(request)
    return build(mod.AlterUserScramCredentialsResponse, throttle_time=NO_THROTTLE, results=tuple(
        build(mod.AlterUserScramCredentialsResult, user=x.user, error_code=x.error,
              error_message=x.message) for x in results))


def results_of(r: Any) -> list[UserResult]:
    return [UserResult(x.user, x.error_code, x.error_message) for x in r.results]


def error_code_of(r: Any) -> ErrorCode:
    return next((x.error_code for x in r.results if x.error_code is ErrorCode.not_controller),
                ErrorCode.none)


def failed(r: Any, code: ErrorCode, message: str | None) -> Any:
    """Every user of `r` answered `code`, once each."""
    users = dict.fromkeys([x.name for x in (*r.deletions, *r.upsertions)])
    return response(r, [UserResult(u, code, message) for u in users])


def error_response(ctx: Any, r: Any, code: ErrorCode) -> Any:
    return failed(r, code, None)


async def serve(controller: ControllerApi, r: Any) -> Any:
    """The answer to `r` from `controller`, for the handler and the controller listener."""
    try:
        return response(r, await controller.alter_user_scram_credentials(*parse(r)))
    except KafkaError as exc:
        return failed(r, exc.error_code, exc.message or None)


async def handle(node: ControllerNode, ctx: Any, r: Any) -> Any:
    return await on_active(node, r, serve, failed)
