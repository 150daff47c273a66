"""Forwarding admin writes (and quorum describes) to the active controller.

A write that reaches a node which is not the active controller (the controller service
raises NOT_CONTROLLER), or a quorum describe on a node that is not the metadata quorum's
leader (NOT_LEADER_OR_FOLLOWER; in KRaft the leader is the active controller), is sent on
as the same gRPC method with the same request to the controller's admin listener, and its
answer (or status) is relayed. The controller's admin address comes from
`address_of(controller_id)`; the default looks for an `ADMIN` endpoint in the controller's
broker registration (a node advertises its admin listener there). One hop only: a
forwarded request carries the `skiff-forwarded` metadata key and is never forwarded again.
Without an address the call fails UNAVAILABLE, naming the controller to ask.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import grpc
from google.protobuf import message_factory
from kio.schema.errors import ErrorCode

from broker.admin.auth import MECHANISM_KEY, PASSWORD_KEY, USER_KEY
from broker.admin.errors import AdminError, S
from broker.admin.services import AdminServices
from broker.errors import KafkaError

ADMIN_ENDPOINT = "ADMIN"
_AUTH_KEYS = (USER_KEY, PASSWORD_KEY, MECHANISM_KEY)
FORWARDED_KEY = "skiff-forwarded"


def controller_id(node: AdminServices) -> int:
    """The active controller (the metadata quorum's leader), -1 when unknown."""
    image = node.metadata
    if image.controller_id >= 0:
        return int(image.controller_id)
    return -1 if node.quorum is None else int(node.quorum.driver.leader_and_epoch[0])


def admin_endpoint_of(node: AdminServices) -> Callable[[int], str | None]:
    def address_of(broker_id: int) -> str | None:
        reg = node.metadata.broker(broker_id)
        ep = None if reg is None else reg.endpoint(ADMIN_ENDPOINT)
        return None if ep is None else f"{ep.host}:{ep.port}"
    return address_of


class Forwarder:
    def __init__(self, node: AdminServices,
                 address_of: Callable[[int], str | None] | None = None, *,
                 credentials: grpc.ChannelCredentials | None = None) -> None:
        """`credentials`: TLS for calls to other admin listeners (None: plaintext)."""
        self.node = node
        self.credentials = credentials
        self.address_of = address_of or admin_endpoint_of(node)
        self._channels: dict[str, grpc.aio.Channel] = {}

    async def forward(self, method: Any, request: Any, context: grpc.aio.ServicerContext,
                      cause: KafkaError) -> Any:
        if self.is_forwarded(context):
            raise cause
        cid = controller_id(self.node)
        if cid < 0:
            raise AdminError(S.UNAVAILABLE, f"node {self.node.node_id} is not the active "
                                            "controller and no controller is known now; retry")
        if cid == self.node.node_id:
            raise cause  # the views disagree for a moment (e.g. during an election)
        address = self.address_of(cid)
        if address is None:
            raise AdminError(S.UNAVAILABLE,
                             f"node {self.node.node_id} is not the active controller; node "
                             f"{cid} is, and its admin address is unknown here: send the "
                             "request to its admin listener")
        # the caller's credentials go along: the controller authenticates the caller again
        passed = tuple((k, v) for k, v in (context.invocation_metadata() or ())
                       if k in _AUTH_KEYS)
        return await self.call(address, method, request, context.time_remaining(), passed)

    def is_forwarded(self, context: grpc.aio.ServicerContext) -> bool:
        return any(k == FORWARDED_KEY for k, _ in context.invocation_metadata() or ())

    async def call(self, address: str, method: Any, request: Any,
                   timeout_s: float | None, metadata: tuple[tuple[str, str], ...] = ()) -> Any:
        """`method` (a MethodDescriptor) on the admin listener at `address`, marked as
        forwarded so that it is answered there and not sent on again."""
        channel = self._channels.get(address)
        if channel is None:
            channel = self._channels[address] = (
                grpc.aio.insecure_channel(address) if self.credentials is None
                else grpc.aio.secure_channel(address, self.credentials))
        output = message_factory.GetMessageClass(method.output_type)
        call = channel.unary_unary(
            f"/{method.containing_service.full_name}/{method.name}",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=output.FromString)
        try:
            return await call(request, timeout=timeout_s,
                              metadata=((FORWARDED_KEY, str(self.node.node_id)), *metadata))
        except grpc.aio.AioRpcError as exc:
            raise AdminError(exc.code(), exc.details() or exc.code().name) from None

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close()
        self._channels.clear()


F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


def forwards_writes(service: Any, on: ErrorCode = ErrorCode.not_controller
                    ) -> Callable[[F], F]:
    """Decorate an RPC of `service` (a generated module's service descriptor) that the
    active controller must answer: when it raises KafkaError `on`, forward it."""

    def decorate(fn: F) -> F:
        method = service.methods_by_name[fn.__name__]

        @functools.wraps(fn)
        async def wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext) -> Any:
            try:
                return await fn(self, request, context)
            except KafkaError as exc:
                forwarder: Forwarder | None = getattr(self, "forwarder", None)
                if exc.error_code is not on or forwarder is None:
                    raise
                return await forwarder.forward(method, request, context, exc)

        return wrapper  # type: ignore[return-value]

    return decorate
