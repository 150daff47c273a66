"""The broker's registration and heartbeat loop (broker/node.py) against a scripted
controller: a live broker that is fenced again, or whose heartbeats are refused with
STALE_BROKER_EPOCH (its registration replaced), gets back to unfenced by itself within a
few heartbeat intervals (issue 17)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from kio.schema.errors import ErrorCode

from broker.config import build_config
from broker.controller import BrokerHeartbeatRequest, BrokerRegistrationRequest
from broker.controller.requests import BrokerHeartbeatReply, BrokerRegistrationReply
from broker.node import Node, RegistrationTimedOut
from tests.support.timings import note

HEARTBEAT_MS = 50


class ScriptedController:
    """Registrations get epochs 1, 2, ...; heartbeats follow `script` (then unfenced)."""

    def __init__(self, script: list[BrokerHeartbeatReply]) -> None:
        self.script = list(script)
        self.registrations: list[BrokerRegistrationRequest] = []
        self.beats: list[BrokerHeartbeatRequest] = []
        self.epoch = 0
        self.heartbeat_connection_closed: asyncio.Future[None] | None = None

    async def register_broker(self, req: BrokerRegistrationRequest) -> BrokerRegistrationReply:
        self.registrations.append(req)
        self.epoch += 1
        return BrokerRegistrationReply(broker_epoch=self.epoch)

    async def broker_heartbeat(self, req: BrokerHeartbeatRequest) -> BrokerHeartbeatReply:
        self.beats.append(req)
        if req.broker_epoch != self.epoch:
            return BrokerHeartbeatReply(ErrorCode.stale_broker_epoch, "stale")
        if self.script:
            return self.script.pop(0)
        return BrokerHeartbeatReply(is_caught_up=True, is_fenced=False)


def make_node(controller: ScriptedController, heartbeat_ms: int = HEARTBEAT_MS,
              **extra: str) -> Node:
    cfg = build_config({
        "process.roles": "broker,controller", "node.id": "1",
        "controller.quorum.voters": "1@127.0.0.1:19093",
        "listeners": "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093",
        "controller.listener.names": "CONTROLLER", "log.dirs": "/nonexistent/skiff",
        "broker.heartbeat.interval.ms": str(heartbeat_ms),
        "broker.session.timeout.ms": str(3 * heartbeat_ms),
        **{k.replace("_", "."): v for k, v in extra.items()},
    }, warn=lambda m: None)
    node = Node(cfg)
    node.cluster_id = "c"
    node.controller = controller  # type: ignore[assignment]
    node.publisher = SimpleNamespace(image=SimpleNamespace(offset=7))  # type: ignore[assignment]
    return node


async def run_until(node: Node, pred: Any, within_s: float) -> float:
    task = asyncio.create_task(node._broker_lifecycle())
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    try:
        while not pred():
            assert loop.time() - t0 < within_s, "not within the bound"
            await asyncio.sleep(0.005)
        return loop.time() - t0
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def test_a_broker_fenced_again_heartbeats_quickly_until_unfenced() -> None:
    fenced = BrokerHeartbeatReply(is_caught_up=True, is_fenced=True)
    unfenced = BrokerHeartbeatReply(is_caught_up=True, is_fenced=False)
    ctl = ScriptedController([unfenced, fenced, fenced, unfenced])
    node = make_node(ctl)

    async def go() -> None:
        await run_until(node, lambda: len(ctl.beats) >= 5, 5 * HEARTBEAT_MS / 1000 + 1)

    asyncio.run(go())
    assert node.ready.is_set() and node.broker_epoch == 1
    assert len(ctl.registrations) == 1


def test_stale_broker_epoch_makes_the_broker_register_again() -> None:
    ctl = ScriptedController([])
    node = make_node(ctl)

    async def go() -> float:
        await run_until(node, node.ready.is_set, 2)
        # the controller replaced the registration (e.g. a retried registration got a
        # second epoch): heartbeats with epoch 1 are now STALE_BROKER_EPOCH
        ctl.epoch = 5
        node.ready.clear()
        return await run_until(node, lambda: node.broker_epoch == 6 and bool(
            ctl.beats) and ctl.beats[-1].broker_epoch == 6, 5 * HEARTBEAT_MS / 1000 + 1)

    took = asyncio.run(go())
    assert len(ctl.registrations) == 2
    again = ctl.registrations[-1]
    assert again.incarnation_id == ctl.registrations[0].incarnation_id
    assert took < 5 * HEARTBEAT_MS / 1000 + 1


class FailingController(ScriptedController):
    """Raises an unexpected error (not a KafkaError) on some calls."""

    def __init__(self, fail_beats: set[int], fail_registrations: set[int]) -> None:
        super().__init__([])
        self.fail_beats = fail_beats
        self.fail_registrations = fail_registrations
        self.calls = 0
        self.reg_calls = 0

    async def register_broker(self, req: BrokerRegistrationRequest) -> BrokerRegistrationReply:
        self.reg_calls += 1
        if self.reg_calls in self.fail_registrations:
            raise ConnectionResetError("connection reset by peer")
        return await super().register_broker(req)

    async def broker_heartbeat(self, req: BrokerHeartbeatRequest) -> BrokerHeartbeatReply:
        self.calls += 1
        if self.calls in self.fail_beats:
            raise RuntimeError("an unexpected error in one heartbeat")
        return await super().broker_heartbeat(req)


def test_an_unexpected_error_does_not_end_the_heartbeats() -> None:
    """A heartbeat or registration that fails with something other than a KafkaError (a bug,
    an unforeseen socket error) must not end the lifecycle task: a broker whose heartbeats
    stopped stays fenced for good once its session expires."""
    ctl = FailingController(fail_beats={1, 3, 4}, fail_registrations={1})
    node = make_node(ctl)

    async def go() -> None:
        await run_until(node, lambda: len(ctl.beats) >= 3, 20 * HEARTBEAT_MS / 1000 + 1)

    asyncio.run(go())
    assert node.ready.is_set() and node.broker_epoch == 1
    assert ctl.calls >= 6 and ctl.reg_calls == 2


class ClosingController(ScriptedController):
    """Remote-like: each answered heartbeat came on a connection whose close is a future."""

    async def broker_heartbeat(self, req: BrokerHeartbeatRequest) -> BrokerHeartbeatReply:
        self.heartbeat_connection_closed = asyncio.get_running_loop().create_future()
        return await super().broker_heartbeat(req)


def test_a_closed_heartbeat_connection_makes_the_broker_heartbeat_at_once() -> None:
    """The controller fences a broker whose heartbeat connection closed and that has not
    heartbeated since, after broker.session.disconnect.timeout.ms (750 ms by default, less
    than the 2 s heartbeat interval): a live broker must not wait out its interval."""
    interval_s = 10.0
    ctl = ClosingController([])
    node = make_node(ctl, heartbeat_ms=int(interval_s * 1000))

    async def go() -> float:
        task = asyncio.create_task(node._broker_lifecycle())
        loop = asyncio.get_running_loop()
        try:
            await asyncio.wait_for(node.ready.wait(), 2)
            await asyncio.sleep(0.1)
            assert len(ctl.beats) == 1, "one heartbeat per interval while it is connected"
            closed = ctl.heartbeat_connection_closed
            assert closed is not None
            closed.set_result(None)
            t0 = loop.time()
            while len(ctl.beats) < 2:
                assert loop.time() - t0 < 2, "no heartbeat after the connection closed"
                await asyncio.sleep(0.005)
            took = loop.time() - t0
            await asyncio.sleep(0.1)
            assert len(ctl.beats) == 2, "then one per interval again"
            return took
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    took = asyncio.run(go())
    # at once, not after the 10 s interval (the loop above bounds it by 2 s)
    note("broker_lifecycle: heartbeat after the connection closed", took, 0.5)


def test_a_new_metadata_leader_makes_the_broker_heartbeat_at_once() -> None:
    """A newly active controller fences an unfenced broker that has not heartbeated to it
    within 2 x broker.heartbeat.interval.ms of its activation (issue 31 point 3): the broker
    heartbeats as soon as Raft tells it of a new leader, not at its next interval. An
    election under way (leader -1) is no reason to."""
    interval_s = 10.0
    ctl = ScriptedController([])
    node = make_node(ctl, heartbeat_ms=int(interval_s * 1000))

    async def go() -> float:
        task = asyncio.create_task(node._broker_lifecycle())
        loop = asyncio.get_running_loop()
        try:
            await asyncio.wait_for(node.ready.wait(), 2)
            await asyncio.sleep(0.1)
            assert len(ctl.beats) == 1
            node._metadata_leader_changed(-1, 6)  # no leader yet
            await asyncio.sleep(0.2)
            assert len(ctl.beats) == 1, "no heartbeat while there is no leader"
            node._metadata_leader_changed(2, 6)
            t0 = loop.time()
            while len(ctl.beats) < 2:
                assert loop.time() - t0 < 2, "no heartbeat after the leader changed"
                await asyncio.sleep(0.005)
            took = loop.time() - t0
            await asyncio.sleep(0.1)
            assert len(ctl.beats) == 2, "then one per interval again"
            return took
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    took = asyncio.run(go())
    # at once, not at the 10 s interval (the loop above bounds it by 2 s)
    note("broker_lifecycle: heartbeat after a new metadata leader", took, 0.5)


class RefusingController(ScriptedController):
    """Refuses every registration, as a controller quorum that never takes this broker."""

    async def register_broker(self, req: BrokerRegistrationRequest) -> BrokerRegistrationReply:
        self.registrations.append(req)
        return BrokerRegistrationReply(ErrorCode.duplicate_broker_registration, "taken")


def test_a_first_registration_that_never_succeeds_stops_the_broker() -> None:
    """initial.broker.registration.timeout.ms: Kafka's broker shuts down when its first
    registration has not succeeded by then; Skiff's lifecycle gives up and start() raises."""
    ctl = RefusingController([])
    node = make_node(ctl, initial_broker_registration_timeout_ms="300")

    async def go() -> float:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        await asyncio.wait_for(node._broker_lifecycle(), 5)
        return loop.time() - t0

    took = asyncio.run(go())
    assert isinstance(node.startup_failure, RegistrationTimedOut)
    message = str(node.startup_failure)
    assert "initial.broker.registration.timeout.ms (300 ms)" in message, message
    assert "DUPLICATE_BROKER_REGISTRATION" in message, message
    assert 0.25 <= took < 2, took
    assert len(ctl.registrations) >= 3 and not node.ready.is_set()
