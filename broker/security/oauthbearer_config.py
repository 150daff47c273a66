"""OAUTHBEARER settings of a SASL listener, from Kafka's keys.

Which validator (Kafka's server callback handler), per listener:
`listener.name.<l>.oauthbearer.sasl.server.callback.handler.class` (the only form Kafka
reads; `sasl.server.callback.handler.class` elsewhere is refused at start):

* unset, or OAuthBearerUnsecuredValidatorCallbackHandler: unsecured tokens, configured by
  the `unsecuredValidator*` options of the listener's JAAS entry
  `listener.name.<l>.oauthbearer.sasl.jaas.config` (an OAuthBearerLoginModule entry, which
  Kafka requires too);
* OAuthBearerValidatorCallbackHandler: signed JWTs, configured by the `sasl.oauthbearer.*`
  keys, each read as `listener.name.<l>.oauthbearer.<key>`, `listener.name.<l>.<key>`, then
  `<key>` (Kafka's prefix overrides). As in Kafka 4.4, `sasl.oauthbearer.jwks.endpoint.url`
  is required, and so are `sasl.oauthbearer.expected.audience` (or
  `sasl.oauthbearer.allow.unverified.audience=true`) and `sasl.oauthbearer.expected.issuer`
  (or `sasl.oauthbearer.allow.unverified.issuer=true`);
* any other class is refused: Skiff cannot run Java callback handlers.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from broker.config import ConfigError, NodeConfig
from broker.config.definitions import BROKER_CONFIGS
from broker.security import oauthbearer as ob
from broker.security.jaas import JaasError, parse_jaas
from broker.security.sasl import Mechanism

HANDLER_KEY = "sasl.server.callback.handler.class"


def _original(cfg: NodeConfig, key: str) -> str | None:
    for k, v in cfg.originals.items():
        if k.lower() == key.lower():
            return v
    return None


def setting(cfg: NodeConfig, listener: str, key: str) -> tuple[str, Any]:
    """(the key it came from, the parsed value) of a broker key for this listener's
    OAUTHBEARER: `listener.name.<l>.oauthbearer.<key>`, `listener.name.<l>.<key>`, `<key>`."""
    base = f"listener.name.{listener.lower()}."
    for name in (f"{base}oauthbearer.{key}", f"{base}{key}"):
        raw = _original(cfg, name)
        if raw is not None:
            try:
                return name, BROKER_CONFIGS[key].parse(raw)
            except ConfigError as e:
                raise ConfigError(name, e.value, e.expected) from None
    return key, cfg[key]


def _jaas_options(cfg: NodeConfig, listener: str) -> dict[str, str]:
    key = f"listener.name.{listener.lower()}.oauthbearer.sasl.jaas.config"
    text = _original(cfg, key)
    if text is None:
        raise ConfigError(key, None, f"an {ob.LOGIN_MODULE} entry (OAUTHBEARER is enabled on "
                          f"listener {listener}; Kafka needs this JAAS entry too)")
    try:
        entry = parse_jaas(text)
    except JaasError as e:
        raise ConfigError(key, "[hidden]", str(e)) from None
    if entry.module != ob.LOGIN_MODULE:
        raise ConfigError(key, entry.module, f"an {ob.LOGIN_MODULE} entry for OAUTHBEARER")
    return entry.options


def validator_for(cfg: NodeConfig, listener: str) -> ob.Validator:
    """The listener's token validator; ConfigError for a setting Skiff cannot honour."""
    options = _jaas_options(cfg, listener)
    # Only the listener-and-mechanism form, as Kafka (the others are refused at start).
    handler_key = f"listener.name.{listener.lower()}.oauthbearer.{HANDLER_KEY}"
    handler = (_original(cfg, handler_key) or "").strip()
    if handler and handler not in ob.HANDLERS:
        raise ConfigError(handler_key, handler,
                          f"{ob.SECURED_HANDLER} (signed JWTs checked against "
                          f"sasl.oauthbearer.jwks.endpoint.url), {ob.UNSECURED_HANDLER} or "
                          "unset (unsecured tokens, for development): Skiff cannot run other "
                          "callback handler classes and will not start with one it ignores")
    if not handler or handler == ob.UNSECURED_HANDLER:
        jaas_key = f"listener.name.{listener.lower()}.oauthbearer.sasl.jaas.config"
        try:
            return ob.UnsecuredValidator.from_options(options)
        except ValueError as e:
            raise ConfigError(jaas_key, "[hidden]", f"valid unsecuredValidator options ({e})"
                              ) from None
    return _jwt_validator(cfg, listener)


def _jwt_validator(cfg: NodeConfig, listener: str) -> ob.JwtValidator:
    def get(key: str) -> tuple[str, Any]:
        return setting(cfg, listener, key)

    url_key, url = get("sasl.oauthbearer.jwks.endpoint.url")
    if not url:
        raise ConfigError(url_key, None, "the OAuth/OIDC provider's JWKS endpoint URL (file:, "
                          f"http: or https:) for listener {listener}: "
                          f"{ob.SECURED_HANDLER} verifies JWT signatures with its keys")
    _, audience = get("sasl.oauthbearer.expected.audience")
    _, allow_any_audience = get("sasl.oauthbearer.allow.unverified.audience")
    _, issuer = get("sasl.oauthbearer.expected.issuer")
    _, allow_any_issuer = get("sasl.oauthbearer.allow.unverified.issuer")
    if not audience and not allow_any_audience:
        raise ConfigError("sasl.oauthbearer.expected.audience", None,
                          "the audience(s) that identify this cluster, so that the token's "
                          "audience (\"aud\") claim can be verified, or "
                          "sasl.oauthbearer.allow.unverified.audience=true to accept tokens "
                          "regardless of their audience (as Kafka 4.4 requires)")
    if not issuer and not allow_any_issuer:
        raise ConfigError("sasl.oauthbearer.expected.issuer", None,
                          "the issuer URL of the OAuth/OIDC provider that signs the tokens, or "
                          "sasl.oauthbearer.allow.unverified.issuer=true to accept tokens "
                          "regardless of their issuer (as Kafka 4.4 requires)")
    _, refresh_ms = get("sasl.oauthbearer.jwks.endpoint.refresh.ms")
    _, backoff_ms = get("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms")
    _, backoff_max_ms = get("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms")
    try:
        jwks = ob.Jwks(str(url), int(refresh_ms), int(backoff_ms), int(backoff_max_ms))
    except ob.JwksError as e:
        raise ConfigError(url_key, url, f"a readable JWK set ({e})") from None
    _, sub_claim = get("sasl.oauthbearer.sub.claim.name")
    _, scope_claim = get("sasl.oauthbearer.scope.claim.name")
    _, skew = get("sasl.oauthbearer.clock.skew.seconds")
    return ob.JwtValidator(jwks, tuple(audience or ()), issuer or None, str(sub_claim),
                           str(scope_claim), int(skew))


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def mechanism_factory(cfg: NodeConfig, listener: str) -> Callable[[], Mechanism]:
    validator = validator_for(cfg, listener)
    return lambda: ob.OAuthBearerServer(validator, _now_ms)
