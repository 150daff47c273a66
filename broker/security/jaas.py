"""Kafka's `sasl.jaas.config` values: `<LoginModule class> <flag> key="value" ... ;`.

Server side, PLAIN users come from PlainLoginModule's `user_<name>="<password>"` options;
client side (inter-broker), `username`/`password` of PlainLoginModule or ScramLoginModule.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
_FLAGS = ("required", "requisite", "sufficient", "optional")

_TOKEN = re.compile(r'\s*(?:([A-Za-z0-9_.$\-]+)\s*=\s*(?:"((?:\\.|[^"\\])*)"|([^\s;"]+))'
                    r"|([A-Za-z0-9_.$]+)|(;))")


class JaasError(ValueError):
    pass


@dataclass(frozen=True)
class JaasEntry:
    module: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)

    def plain_users(self) -> dict[str, str]:
        return {k[len("user_"):]: v for k, v in self.options.items() if k.startswith("user_")}


def parse_jaas(text: str) -> JaasEntry:
    """One login module entry (Kafka's sasl.jaas.config holds exactly one)."""
    pos = 0
    words: list[str] = []
    options: dict[str, str] = {}
    ended = False
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise JaasError(f"cannot parse sasl.jaas.config near {text[pos:pos + 30]!r}")
        pos = m.end()
        if ended:
            raise JaasError("sasl.jaas.config holds more than one login module entry")
        if m.group(5):
            ended = True
        elif m.group(1):
            if len(words) != 2:
                raise JaasError("a login module class and a control flag come first")
            value = m.group(2) if m.group(2) is not None else m.group(3)
            options[m.group(1)] = re.sub(r"\\(.)", r"\1", value)
        else:
            if options:
                raise JaasError("options after the control flag only")
            words.append(m.group(4))
    if not ended:
        raise JaasError("sasl.jaas.config must end with ';'")
    if len(words) != 2 or words[1] not in _FLAGS:
        raise JaasError(f"expected '<LoginModule> {'|'.join(_FLAGS)} options;'")
    return JaasEntry(words[0], words[1], options)
