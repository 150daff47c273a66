"""Which security settings this version supports, checked at startup.

Never downgrade: a listener whose security protocol is not implemented, or an `ssl.*` /
`sasl.*` key (broker-wide or `listener.name.<l>.` prefixed) that is not implemented, stops
the node with a message naming it, instead of being served as PLAINTEXT or ignored.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from broker.config.listeners import Listener
from broker.config.types import ConfigError

# Security protocols a listener may use today.
SUPPORTED_PROTOCOLS: frozenset[str] = frozenset({"PLAINTEXT", "SSL", "SASL_PLAINTEXT",
                                                  "SASL_SSL"})

_SECURITY_PREFIXES = ("ssl.", "sasl.")
JAAS_KEY = re.compile(r"listener\.name\.[^.]+\.(plain|scram-sha-256|scram-sha-512|oauthbearer)"
                      r"\.sasl\.jaas\.config")
# listener.name.<l>.oauthbearer.<sasl key>: Kafka's per-listener, per-mechanism overrides.
OAUTHBEARER_KEY = re.compile(r"listener\.name\.[^.]+\.oauthbearer\.(sasl\..+)")


def is_security_key(key: str) -> bool:
    """`ssl.*`, `sasl.*`, and their `listener.name.<l>.` forms (including
    `listener.name.<l>.<mechanism>.sasl.jaas.config`)."""
    if key.startswith(_SECURITY_PREFIXES):
        return True
    if key.startswith("listener.name."):
        rest = key[len("listener.name."):].partition(".")[2]
        return rest.startswith(_SECURITY_PREFIXES) or ".sasl." in f".{rest}"
    return False


def listener_key_base(key: str) -> str | None:
    """`ssl.client.auth` for `listener.name.<l>.ssl.client.auth`; None for other keys."""
    if not key.lower().startswith("listener.name."):
        return None
    rest = key[len("listener.name."):].partition(".")[2]
    return rest if rest.startswith(_SECURITY_PREFIXES) else None


def refuse_unsupported_keys(raw: Mapping[str, str],
                            known: Mapping[str, Any]) -> set[str]:
    """Raise ConfigError for a security key Skiff does not implement; return the
    `listener.name.<l>.` keys accepted (their values are checked as the base key's)."""
    accepted: set[str] = set()
    for key in sorted(raw):
        if JAAS_KEY.fullmatch(key.lower()):
            accepted.add(key)  # parsed when the listener's SASL settings are built
            continue
        m = OAUTHBEARER_KEY.fullmatch(key.lower())
        if m is not None and m.group(1) == "sasl.server.callback.handler.class":
            accepted.add(key)  # checked when the listener's SASL settings are built
            continue
        if m is not None and m.group(1) in known:
            try:  # same type and validation as the broker-wide key
                known[m.group(1)].parse(raw[key])
            except ConfigError as e:
                raise ConfigError(key, e.value, e.expected) from None
            accepted.add(key)
            continue
        base = listener_key_base(key)
        if base is not None and base in known:
            try:  # same type and validation as the broker-wide key
                known[base].parse(raw[key])
            except ConfigError as e:
                raise ConfigError(key, e.value, e.expected) from None
            accepted.add(key)
            continue
        if key not in known and is_security_key(key):
            raise ConfigError(key, raw[key],
                              "a supported setting: this version of Skiff does not implement "
                              f"{key} and will not start without it rather than ignore it "
                              "(see docs/security.md)")
    return accepted


def refuse_unsupported_listeners(key: str, listeners: Iterable[Listener]) -> None:
    for lst in listeners:
        if lst.security_protocol not in SUPPORTED_PROTOCOLS:
            raise ConfigError(key, str(lst),
                              f"a listener with a supported security protocol: listener "
                              f"{lst.name} maps to {lst.security_protocol}, which this version "
                              "of Skiff does not implement; it will not serve it as "
                              f"PLAINTEXT (supported: {', '.join(sorted(SUPPORTED_PROTOCOLS))})")
