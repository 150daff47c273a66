"""The connection quota core (broker/quotas/connections.py): counts per ip, listener and
broker, creation rates per listener and broker (delay), per-ip connection_creation_rate
quotas (close after the throttle time, not counted)."""

from __future__ import annotations

import pytest

from broker.config import ConfigError
from broker.config.loading import build_config
from broker.config.types import parse_ip_overrides
from broker.quotas.connections import (
    Admit,
    ConnectionLimits,
    ConnectionQuotas,
    Refuse,
    connection_limits,
    ip_connection_rate,
)
from broker.quotas.core import CONNECTION_CREATION_RATE, entity

A, B = "10.0.0.1", "10.0.0.2"


def test_per_ip_limit_and_overrides_close_at_once_and_free_on_close() -> None:
    q = ConnectionQuotas(ConnectionLimits(max_per_ip=2, per_ip_overrides={B: 0}))
    assert q.admit("PLAINTEXT", A, 0, {}) == Admit()
    assert q.admit("PLAINTEXT", A, 0, {}) == Admit()
    third = q.admit("PLAINTEXT", A, 0, {})
    assert isinstance(third, Refuse) and third.close_after_ms == 0
    assert "max.connections.per.ip" in third.reason
    assert isinstance(q.admit("PLAINTEXT", B, 0, {}), Refuse)  # override 0
    q.closed("PLAINTEXT", A)
    assert q.admit("PLAINTEXT", A, 0, {}) == Admit()
    assert q.per_ip == {A: 2} and q.total == 2 and q.refused == 2


def test_broker_and_listener_max_connections_spare_the_exempt_listeners() -> None:
    q = ConnectionQuotas(ConnectionLimits(max_connections=2,
                                          listener_max_connections={"CLIENT": 1},
                                          exempt_listeners=frozenset({"BROKER"})))
    assert q.admit("CLIENT", A, 0, {}) == Admit()
    refused = q.admit("CLIENT", B, 0, {})
    assert isinstance(refused, Refuse) and "listener CLIENT" in refused.reason
    assert q.admit("OTHER", B, 0, {}) == Admit()
    assert isinstance(q.admit("OTHER", B, 0, {}), Refuse)  # broker-wide 2 reached
    for _ in range(3):  # the inter-broker listener is not held to max.connections
        assert q.admit("BROKER", A, 0, {}) == Admit()


def test_creation_rates_delay_by_kafkas_throttle_time() -> None:
    q = ConnectionQuotas(ConnectionLimits(max_creation_rate=2, window_num=2, window_ms=1000,
                                          exempt_listeners=frozenset({"BROKER"})))
    # 2/s over at least one window: the first two connections fit
    assert q.admit("CLIENT", A, 0, {}) == Admit()
    assert q.admit("CLIENT", A, 0, {}) == Admit()
    third = q.admit("CLIENT", A, 0, {})
    # 3 over 1 s against 2/s: (3 - 2) / 2 x 1000 ms
    assert third == Admit(500)
    assert q.admit("BROKER", A, 0, {}) == Admit()  # exempt from the broker-wide rate
    q = ConnectionQuotas(ConnectionLimits(listener_creation_rates={"CLIENT": 1},
                                          window_num=2, window_ms=1000))
    assert q.admit("CLIENT", A, 0, {}) == Admit()
    assert q.admit("CLIENT", A, 0, {}) == Admit(1000)
    # bounded by the quota window set (window_num x window_ms), as Kafka bounds it
    delays = [q.admit("CLIENT", A, 0, {}) for _ in range(10)]
    assert delays[-1] == Admit(2000)
    assert q.admit("OTHER", A, 0, {}) == Admit()


def test_ip_quota_closes_after_the_throttle_time_and_does_not_count() -> None:
    quotas = {entity(ip=A): {CONNECTION_CREATION_RATE: 2.0},
              entity(ip=None): {CONNECTION_CREATION_RATE: 100.0}}
    assert ip_connection_rate(quotas, A) == 2.0
    assert ip_connection_rate(quotas, B) == 100.0
    assert ip_connection_rate({}, A) is None
    q = ConnectionQuotas(ConnectionLimits(window_num=2, window_ms=1000))
    assert q.admit("CLIENT", A, 0, quotas) == Admit()
    assert q.admit("CLIENT", A, 0, quotas) == Admit()
    third = q.admit("CLIENT", A, 0, quotas)
    assert isinstance(third, Refuse) and third.close_after_ms == 500
    assert q.per_ip == {A: 2}
    # the refused one was taken back: later, within the rate again
    assert q.admit("CLIENT", A, 1500, quotas) == Admit()  # 3 in 1.5 s: 2/s
    assert q.admit("CLIENT", B, 0, quotas) == Admit()  # the default entity's 100/s


def test_overrides_and_listener_keys_from_the_config() -> None:
    assert parse_ip_overrides(" 10.0.0.1:5, host.example:0 ,") == {"10.0.0.1": 5,
                                                               "host.example": 0}
    for bad in ("10.0.0.1", "10.0.0.1:x", ":3", "a:-1"):
        with pytest.raises(ValueError):
            parse_ip_overrides(bad)
    raw = {"process.roles": "broker,controller", "node.id": "1",
           "controller.quorum.voters": "1@127.0.0.1:9093",
           "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
           "controller.listener.names": "CONTROLLER",
           "max.connections.per.ip.overrides": "127.0.0.1:3",
           "max.connection.creation.rate": "50",
           "listener.name.plaintext.max.connection.creation.rate": "7",
           "listener.name.plaintext.max.connections": "9"}
    cfg = build_config(raw)
    assert not [w for w in cfg.warnings if "max.conn" in w]
    lim = connection_limits(cfg)
    assert lim.per_ip_overrides == {"127.0.0.1": 3}
    assert lim.max_creation_rate == 50
    assert lim.listener_creation_rates == {"PLAINTEXT": 7}
    assert lim.listener_max_connections == {"PLAINTEXT": 9}
    assert lim.exempt_listeners == {"PLAINTEXT", "CONTROLLER"}
    with pytest.raises(ConfigError, match=r"max\.connections\.per\.ip\.overrides"):
        build_config({**raw, "max.connections.per.ip.overrides": "127.0.0.1"})
    with pytest.raises(ConfigError, match=r"listener\.name\.plaintext\.max\.connections"):
        build_config({**raw, "listener.name.plaintext.max.connections": "-1"})


def test_dynamic_broker_configs_override_the_static_limits() -> None:
    q = ConnectionQuotas(ConnectionLimits(max_per_ip=1))
    dynamic = {"max.connections.per.ip": "3", "max.connections.per.ip.overrides": f"{B}:0",
               "max.connection.creation.rate": "not a number"}
    for _ in range(3):
        assert q.admit("CLIENT", A, 0, {}, dynamic) == Admit()
    assert isinstance(q.admit("CLIENT", A, 0, {}, dynamic), Refuse)
    assert isinstance(q.admit("CLIENT", B, 0, {}, dynamic), Refuse)
    # without them the static limit holds again (A already has 3 > 1)
    assert isinstance(q.admit("CLIENT", A, 0, {}), Refuse)
    assert q.admit("CLIENT", B, 0, {}) == Admit()
    assert isinstance(q.admit("CLIENT", "10.0.0.9", 0, {},
                              {"max.connections": "4"}), Refuse)  # 4 open already
