"""Never downgrade: unsupported security settings stop the config from loading."""

from __future__ import annotations

import pytest

from broker.config import ConfigError, build_config
from broker.security.settings import is_security_key

COMBINED = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.quorum.voters": "1@127.0.0.1:9093",
    "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
    "controller.listener.names": "CONTROLLER",
    "log.dirs": "/tmp/skiff-a",
}


def test_security_keys_are_recognised() -> None:
    assert is_security_key("ssl.keystore.location")
    assert is_security_key("sasl.enabled.mechanisms")
    assert is_security_key("listener.name.external.ssl.client.auth")
    assert is_security_key("listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config")
    assert not is_security_key("listener.security.protocol.map")
    assert not is_security_key("log.dirs")


def test_unsupported_protocol_refused_by_listener_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check that kept SSL and SASL_* listeners from being served as PLAINTEXT while
    they were missing still guards the list of implemented protocols."""
    from broker.security import settings

    monkeypatch.setattr(settings, "SUPPORTED_PROTOCOLS", frozenset({"PLAINTEXT"}))
    raw = dict(COMBINED, **{
        "listeners": "EXTERNAL://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
        "listener.security.protocol.map": "EXTERNAL:SASL_SSL,CONTROLLER:PLAINTEXT"})
    with pytest.raises(ConfigError, match="listener EXTERNAL maps to SASL_SSL"):
        build_config(raw, warn=lambda m: None)


def test_sasl_gssapi_default_refused() -> None:
    from broker.security.sasl_config import check_sasl

    raw = dict(COMBINED, **{
        "listener.security.protocol.map": "PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT"})
    with pytest.raises(ConfigError, match="GSSAPI is not implemented"):
        check_sasl(build_config(raw, warn=lambda m: None))


@pytest.mark.parametrize("key", ["sasl.kerberos.service.name", "ssl.bogus.thing",
                                 "listener.name.plaintext.gssapi.sasl.jaas.config"])
def test_unknown_security_key_is_an_error(key: str) -> None:
    warnings: list[str] = []
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        build_config(dict(COMBINED, **{key: "x"}), warn=warnings.append)


def test_other_unknown_keys_stop_the_node_unless_they_come_from_the_environment() -> None:
    with pytest.raises(ConfigError, match=r"some\.future\.key"):
        build_config(dict(COMBINED, **{"some.future.key": "1"}), warn=lambda m: None)
    warnings: list[str] = []
    build_config(dict(COMBINED, **{"some.future.key": "1"}), {"some.future.key": "env"},
                 warn=warnings.append)
    assert any("some.future.key" in w for w in warnings)


def test_only_the_standard_authorizer_is_accepted() -> None:
    with pytest.raises(ConfigError, match=r"authorizer\.class\.name"):
        build_config(dict(COMBINED, **{
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}),
            warn=lambda m: None)
    cfg = build_config(dict(COMBINED, **{
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin;User:broker", "allow.everyone.if.no.acl.found": "true"}),
        warn=lambda m: None)
    assert cfg["super.users"] == "User:admin;User:broker"
    assert cfg["allow.everyone.if.no.acl.found"] is True
    build_config(dict(COMBINED, **{"authorizer.class.name": ""}), warn=lambda m: None)
    with pytest.raises(ConfigError, match=r"super\.users"):
        build_config(dict(COMBINED, **{"super.users": "admin"}), warn=lambda m: None)
