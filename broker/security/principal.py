"""Principals: Kafka's `User:<name>` from a TLS peer certificate's subject.

`x500_name(subject)` prints a certificate subject (as Python's `getpeercert()` gives it)
the way Java's `X500Principal.getName()` does (RFC 2253: last RDN first, CN/OU/O/L/ST/C/
STREET/DC/UID by keyword, other attributes as `OID=#hex-DER`). `PrincipalMapper` applies
`ssl.principal.mapping.rules` (Kafka's SslPrincipalMapper): a comma-separated list of
`RULE:pattern/replacement/[LU]` and `DEFAULT`; the first rule whose pattern matches the
whole name gives the principal name; DEFAULT keeps the name as is; no match is an error.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

ANONYMOUS = "User:ANONYMOUS"

# Python's long attribute names -> RFC 2253 keywords Java prints.
_KEYWORDS = {
    "commonName": "CN", "countryName": "C", "localityName": "L",
    "stateOrProvinceName": "ST", "organizationName": "O", "organizationalUnitName": "OU",
    "streetAddress": "STREET", "domainComponent": "DC", "userId": "UID",
}
# Attributes Java prints by OID (value as #hex of its DER encoding).
_OIDS = {"emailAddress": ("1.2.840.113549.1.9.1", 0x16), "serialNumber": ("2.5.4.5", 0x13),
         "title": ("2.5.4.12", 0x0C), "givenName": ("2.5.4.42", 0x0C),
         "surname": ("2.5.4.4", 0x0C), "pseudonym": ("2.5.4.65", 0x0C),
         "generationQualifier": ("2.5.4.44", 0x0C), "dnQualifier": ("2.5.4.46", 0x13),
         "postalCode": ("2.5.4.17", 0x0C), "businessCategory": ("2.5.4.15", 0x0C)}

Subject = Sequence[Sequence[tuple[str, str]]]


def _escape(value: str) -> str:
    out = []
    for i, ch in enumerate(value):
        if ch in ',+"\\<>;' or (ch == "#" and i == 0) or (ch == " " and i in (0, len(value) - 1)):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def _der_hex(tag: int, value: str) -> str:
    data = value.encode("utf-8")
    n = len(data)
    if n < 0x80:
        length = bytes([n])
    else:
        body = n.to_bytes((n.bit_length() + 7) // 8, "big")
        length = bytes([0x80 | len(body)]) + body
    return "#" + (bytes([tag]) + length + data).hex()


def _attribute(name: str, value: str) -> str:
    if name in _KEYWORDS:
        return f"{_KEYWORDS[name]}={_escape(value)}"
    if name in _OIDS:
        oid, tag = _OIDS[name]
        return f"{oid}={_der_hex(tag, value)}"
    return f"{name}={_escape(value)}"


def x500_name(subject: Subject) -> str:
    return ",".join("+".join(_attribute(n, v) for n, v in rdn) for rdn in reversed(subject))


class MappingRuleError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""

    def apply(self, name: str) -> str | None:
        if self.pattern is None:
            return name
        m = self.pattern.fullmatch(name)
        if m is None:
            return None
        out = _expand(m, self.replacement)
        return out.lower() if self.case == "L" else out.upper() if self.case == "U" else out


def _expand(m: re.Match[str], replacement: str) -> str:
    """Java's Matcher replacement syntax: `$n` is group n, a backslash quotes a character."""
    out: list[str] = []
    i = 0
    while i < len(replacement):
        ch = replacement[i]
        if ch == "\\" and i + 1 < len(replacement):
            out.append(replacement[i + 1])
            i += 2
        elif ch == "$":
            j = i + 1
            while j < len(replacement) and replacement[j].isdigit():
                j += 1
            if j == i + 1:
                raise MappingRuleError(f"illegal group reference in {replacement!r}")
            out.append(m.group(int(replacement[i + 1:j])) or "")
            i = j
        else:
            out.append(ch)
            i += 1
    return "".join(out)


_PART = r"((?:\\.|[^\\/])*)"
_RULE = re.compile(rf"\s*(?:(DEFAULT)|RULE:{_PART}/{_PART}/([LU]?))\s*(?:,|\n|$)")


class PrincipalMapper:
    def __init__(self, rules: str = "DEFAULT") -> None:
        self.source = rules
        self.rules: list[_Rule] = []
        text = rules.strip()
        pos = 0
        while pos < len(text):
            m = _RULE.match(text, pos)
            if m is None or m.end() == pos:
                raise MappingRuleError(f"invalid rule at {text[pos:]!r} in {rules!r}")
            if m.group(1):
                self.rules.append(_Rule(None))
            else:
                try:
                    pattern = re.compile(m.group(2))
                except re.error as e:
                    raise MappingRuleError(f"invalid pattern {m.group(2)!r}: {e}") from None
                self.rules.append(_Rule(pattern, m.group(3), m.group(4)))
            pos = m.end()
        if not self.rules:
            raise MappingRuleError("no rules (use DEFAULT)")

    def name(self, distinguished_name: str) -> str:
        for rule in self.rules:
            out = rule.apply(distinguished_name)
            if out is not None:
                return out
        raise MappingRuleError(f"no rules apply to {distinguished_name}, rules {self.source}")

    def principal(self, subject: Subject | None) -> str:
        """`User:<mapped subject>`, or User:ANONYMOUS without a certificate."""
        if not subject:
            return ANONYMOUS
        return "User:" + self.name(x500_name(subject))
