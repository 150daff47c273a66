"""Authorizer and principal builder plugins: loading, refusals, and how decisions and
principals reach Skiff (broker/security/plugins.py)."""

from __future__ import annotations

from typing import Any

import pytest

from broker.config import ConfigError
from broker.security import plugins
from broker.security.authorizer import (
    EMPTY_INDEX,
    AclOperation,
    AuthorizerSettings,
    ResourceType,
    authorize,
    authorize_any,
    authorized_operations,
)

EX = "broker.security.examples.token_claims"


class Exploding(plugins.Authorizer):
    def authorize(self, context: Any, action: Any) -> bool:
        raise RuntimeError("boom")


class NoMethods:
    pass


def test_class_names_in_both_forms() -> None:
    assert plugins.load_class("k", f"{EX}:PrivateTopicAuthorizer").__name__ == \
        "PrivateTopicAuthorizer"
    assert plugins.load_class("k", f"{EX}.ClaimPrincipalBuilder").__name__ == \
        "ClaimPrincipalBuilder"


@pytest.mark.parametrize(("name", "why"), [
    ("no_such_pkg.mod:Thing", "cannot be imported: ModuleNotFoundError"),
    (f"{EX}:Missing", "cannot be imported: AttributeError"),
    ("org.apache.kafka.server.MyAuthorizer", "looks like a Java class"),
    ("Thing", "package.module:Class"),
    (f"{__name__}:NoMethods", "authorize() method"),
])
def test_refused_authorizers(name: str, why: str) -> None:
    with pytest.raises(ConfigError, match=r"authorizer\.class\.name") as e:
        AuthorizerSettings.from_values(name, "", False)
    assert why in str(e.value)


def test_kafka_names_keep_the_builtins() -> None:
    s = AuthorizerSettings.from_values(
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer", "", False, {})
    assert s.enabled and s.plugin is None
    assert plugins.principal_builder_class(plugins.DEFAULT_PRINCIPAL_BUILDER) is None
    with pytest.raises(ConfigError, match=r"principal\.builder\.class"):
        plugins.principal_builder_class(f"{__name__}:NoMethods")


def test_plugin_decides_with_the_standard_decision_at_hand() -> None:
    s = AuthorizerSettings.from_values(f"{EX}:PrivateTopicAuthorizer", "", True,
                                       {"plugin.private.topic.prefix": "p."})
    assert s.enabled and s.plugin is not None

    def ok(principal: str, topic: str, op: AclOperation = AclOperation.WRITE) -> bool:
        return authorize(s, EMPTY_INDEX, principal, "h", op, ResourceType.TOPIC, topic)

    assert ok("User:bob", "p.bob.x") and not ok("User:eve", "p.bob.x")
    assert ok("User:eve", "shared")  # the StandardAuthorizer: allow.everyone.if.no.acl.found
    strict = AuthorizerSettings.from_values(f"{EX}:PrivateTopicAuthorizer", "", False, {})
    assert not authorize(strict, EMPTY_INDEX, "User:eve", "h", AclOperation.WRITE,
                         ResourceType.TOPIC, "shared")
    assert authorize_any(s, EMPTY_INDEX, "User:eve", "h", AclOperation.WRITE,
                         ResourceType.TOPIC)
    bits = authorized_operations(s, EMPTY_INDEX, "User:eve", "h", ResourceType.TOPIC, "p.bob.x")
    assert bits == 0


def test_a_failing_plugin_denies() -> None:
    s = AuthorizerSettings.from_values(f"{__name__}:Exploding", "", True, {})
    assert not authorize(s, EMPTY_INDEX, "User:a", "h", AclOperation.READ,
                         ResourceType.TOPIC, "t")


class _Cfg:
    def __init__(self, values: dict[str, str]) -> None:
        self.originals = values
        self.security_protocol_map = {"OAUTH": "SASL_SSL"}

    def get(self, key: str, default: Any = None) -> Any:
        return self.originals.get(key, default)


class BadBuilder(plugins.PrincipalBuilder):
    def build(self, context: plugins.AuthenticationContext) -> str:
        return "no-colon"


def test_principal_builder_hook() -> None:
    cfg = _Cfg({"principal.builder.class": f"{EX}:ClaimPrincipalBuilder",
                "plugin.principal.claim": "email"})
    hook = plugins.principal_builder_for(cfg, "oauth")
    assert hook is not None and hook.protocol == "SASL_SSL"
    assert hook.principal("10.0.0.1", "User:u-1", sasl_mechanism="OAUTHBEARER",
                          token_claims={"email": "a@b"}) == "User:a@b"
    assert hook.principal("10.0.0.1", "User:u-1") == "User:u-1"
    assert plugins.principal_builder_for(_Cfg({}), "oauth") is None
    bad = plugins.principal_builder_for(
        _Cfg({"principal.builder.class": f"{__name__}:BadBuilder"}), "oauth")
    assert bad is not None
    with pytest.raises(plugins.PrincipalError, match="not a principal"):
        bad.principal("h", "User:x")


def test_plugin_keys_pass_through_config() -> None:
    from broker.config.loading import build_config

    cfg = build_config({"process.roles": "broker,controller", "node.id": "1",
                        "controller.quorum.voters": "1@127.0.0.1:9093",
                        "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
                        "controller.listener.names": "CONTROLLER", "log.dirs": "/tmp/x",
                        "authorizer.class.name": f"{EX}:PrivateTopicAuthorizer",
                        "plugin.private.topic.prefix": "mine."})
    assert cfg.originals["plugin.private.topic.prefix"] == "mine."
    with pytest.raises(ConfigError, match=r"authorizer\.class\.name"):
        build_config({**cfg.originals, "authorizer.class.name": "nope.nope:X"})
