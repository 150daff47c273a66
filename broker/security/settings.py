"""Which security settings this version supports, checked at startup.

Never downgrade: a listener whose security protocol is not implemented, or an `ssl.*` /
`sasl.*` key (broker-wide or `listener.name.<l>.` prefixed) that is not implemented, stops
the node with a message naming it, instead of being served as PLAINTEXT or ignored.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from broker.config import ConfigError, Listener

# Security protocols a listener may use today.
SUPPORTED_PROTOCOLS: frozenset[str] = frozenset({"PLAINTEXT"})

_SECURITY_PREFIXES = ("ssl.", "sasl.")


def is_security_key(key: str) -> bool:
    """`ssl.*`, `sasl.*`, and their `listener.name.<l>.` forms (including
    `listener.name.<l>.<mechanism>.sasl.jaas.config`)."""
    if key.startswith(_SECURITY_PREFIXES):
        return True
    if key.startswith("listener.name."):
        rest = key[len("listener.name."):].partition(".")[2]
        return rest.startswith(_SECURITY_PREFIXES) or ".sasl." in f".{rest}"
    return False


def refuse_unsupported_keys(raw: Mapping[str, str], known: Iterable[str]) -> None:
    known_set = set(known)
    for key in sorted(raw):
        if key not in known_set and is_security_key(key):
            raise ConfigError(key, raw[key],
                              "a supported setting: this version of Skiff does not implement "
                              f"{key} and will not start without it rather than ignore it "
                              "(see docs/security.md)")


def refuse_unsupported_listeners(key: str, listeners: Iterable[Listener]) -> None:
    for lst in listeners:
        if lst.security_protocol not in SUPPORTED_PROTOCOLS:
            raise ConfigError(key, str(lst),
                              f"a listener with a supported security protocol: listener "
                              f"{lst.name} maps to {lst.security_protocol}, which this version "
                              "of Skiff does not implement; it will not serve it as "
                              f"PLAINTEXT (supported: {', '.join(sorted(SUPPORTED_PROTOCOLS))})")
