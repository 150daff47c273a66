"""The pure DelegationTokenControlManager: records and answers from (image, request, now_ms),
replayed into the next image; the expiry sweep runs once per check interval and removes
only the tokens past their expiry or max timestamp."""

from __future__ import annotations

from broker.controller.delegation_token_control import DelegationTokenControlManager
from broker.metadata.delta import apply_records
from broker.metadata.image import MetadataImage
from broker.metadata.snapshot import decode_snapshot, encode_snapshot
from broker.security.delegation_token import DelegationTokenSettings, create_hmac

S = DelegationTokenSettings(secret_key="k", max_lifetime_ms=10_000, expiry_time_ms=4_000,
                            expiry_check_interval_ms=1_000)


def test_create_renew_expire_and_sweep() -> None:
    m = DelegationTokenControlManager(S)
    image = MetadataImage()
    a = m.create(image, "User:alice", None, ["User:bob"], -1, 1_000, "tokA")
    assert (a.response.issue_ms, a.response.expiry_ms, a.response.max_ms) == (1_000, 5_000,
                                                                            11_000)
    assert a.response.hmac == create_hmac("tokA", "k")
    image = apply_records(image, a.records)
    b = m.create(image, "User:alice", "User:carol", [], 2_000, 1_000, "tokB")
    assert (b.response.owner, b.response.expiry_ms, b.response.max_ms) == ("User:carol", 3_000,
                                                                          3_000)
    image = apply_records(image, b.records)
    assert set(image.delegation_tokens) == {"tokA", "tokB"}
    # a snapshot carries the tokens
    again = decode_snapshot(encode_snapshot(image))
    assert again.delegation_tokens == image.delegation_tokens

    r = m.renew(image, "User:bob", create_hmac("tokA", "k"), 100_000, 2_000)
    assert r.response.expiry_ms == 6_000  # capped by expiry.time.ms
    image = apply_records(image, r.records)
    assert image.delegation_tokens["tokA"].expiry_ms == 6_000
    # the requester of carol's token is not its owner nor a renewer
    assert m.renew(image, "User:alice", create_hmac("tokB", "k"), -1, 2_000).response.error \
        .name == "delegation_token_owner_mismatch"

    assert m.sweep(image, 2_000) == []  # the first call starts the clock
    assert m.sweep(image, 2_500) == []  # within the interval
    gone = m.sweep(image, 3_500)        # tokB expired at 3_000
    assert [r.remove_delegation_token.token_id for r in gone] == ["tokB"]
    image = apply_records(image, gone)
    assert set(image.delegation_tokens) == {"tokA"}

    e = m.expire(image, "User:alice", create_hmac("tokA", "k"), -1, 4_000)
    assert e.response.expiry_ms == 4_000
    image = apply_records(image, e.records)
    assert image.delegation_tokens == {}


def test_disabled_without_a_secret_key() -> None:
    m = DelegationTokenControlManager(DelegationTokenSettings())
    out = m.create(MetadataImage(), "User:alice", None, [], -1, 0, "t")
    assert out.records == [] and out.response.error.name == "delegation_token_auth_disabled"
    assert m.renew(MetadataImage(), "User:alice", b"x", -1, 0).response.error.name == \
        "delegation_token_auth_disabled"


def test_the_active_controllers_tick_removes_expired_tokens() -> None:
    import asyncio

    from tests.unit.controller.rpc.rpc_support import ControllerNode

    async def go() -> None:
        node = ControllerNode(**{"delegation.token.secret.key": "k",
                                 "delegation.token.expiry.check.interval.ms": "1"})
        service = node.controller_service
        assert service is not None
        short = await service.create_delegation_token("User:alice", None, [], 1)
        long = await service.create_delegation_token("User:alice", None, [], 600_000)
        await service.tick()  # starts the expiry check's clock
        await asyncio.sleep(0.01)
        await service.tick()
        assert set(node.metadata.delegation_tokens) == {long.token_id}
        assert short.token_id not in node.metadata.delegation_tokens

    asyncio.run(go())
