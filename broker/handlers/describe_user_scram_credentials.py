"""DescribeUserScramCredentials (API 50), version 0: users and their SCRAM mechanisms and
iterations from this broker's metadata image (never salts or keys). DESCRIBE on the cluster
is checked before (broker/handlers/_authz.py: CLUSTER_AUTHORIZATION_FAILED)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.protocol.durations import NO_THROTTLE
from broker.protocol.kio_build import build, response_module
from broker.security import scram_admin

if TYPE_CHECKING:
    from broker.handlers.services import BrokerServices
    from broker.server import RequestContext

API_KEY = 50


async def handle(node: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    mod = response_module(request)
    users = None if request.users is None else [u.name for u in request.users]
    results, error = scram_admin.describe(node.metadata, users)
    return build(
        mod.DescribeUserScramCredentialsResponse, throttle_time=NO_THROTTLE, error_code=error,
        error_message=None, results=tuple(
            build(mod.DescribeUserScramCredentialsResult, user=u, error_code=code,
                  error_message=message, credential_infos=tuple(
                      build(mod.CredentialInfo, mechanism=m, iterations=i) for m, i in infos))
            for u, code, message, infos in results))


def error_response(ctx: Any, request: Any, code: ErrorCode) -> Any:
    """A refused request (CLUSTER_AUTHORIZATION_FAILED): the top-level error, and a result
    with it for each user named (no name), as Kafka's
    DescribeUserScramCredentialsRequest.getErrorResponse answers."""
    mod = response_module(request)
    return build(
        mod.DescribeUserScramCredentialsResponse, throttle_time=NO_THROTTLE, error_code=code,
        error_message=None, results=tuple(
            build(mod.DescribeUserScramCredentialsResult, user="", error_code=code,
                  error_message=None, credential_infos=())
            for _ in request.users or ()))
