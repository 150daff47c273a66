"""The sources of a node's config: java.util.Properties files, `--override key=value`
arguments and SKIFF_<KEY> environment variables (a double underscore stands for '_', a
triple one for '-')."""

from __future__ import annotations

import re
from collections.abc import Iterable

from broker.config.types import ConfigError

# -- java.util.Properties ------------------------------------------------------

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _logical_lines(text: str) -> Iterable[str]:
    lines = text.splitlines()
    i, n = 0, len(lines)
    while i < n:
        line = lines[i].lstrip(" \t\f")
        i += 1
        if not line or line[0] in "#!":
            continue
        parts = []
        while True:
            trailing = len(line) - len(line.rstrip("\\"))
            if trailing % 2 == 1:
                parts.append(line[:-1])
                if i >= n:
                    break
                line = lines[i].lstrip(" \t\f")
                i += 1
                continue
            parts.append(line)
            break
        yield "".join(parts)


def _unescape(s: str) -> str:
    out: list[str] = []
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        i += 1
        if i >= n:
            break
        c = s[i]
        if c == "u":
            hexdigits = s[i + 1:i + 5]
            if len(hexdigits) != 4 or not re.fullmatch(r"[0-9a-fA-F]{4}", hexdigits):
                raise ValueError(f"Malformed \\uxxxx encoding in {s!r}")
            out.append(chr(int(hexdigits, 16)))
            i += 5
            continue
        out.append(_ESCAPES.get(c, c))
        i += 1
    return "".join(out)


def parse_properties(text: str) -> dict[str, str]:
    """Parse java.util.Properties text: '#'/'!' comments, '=' ':' or whitespace separators,
    backslash escapes (\\t \\n \\uXXXX ...), and lines continued by a trailing backslash."""
    props: dict[str, str] = {}
    for line in _logical_lines(text):
        i, n = 0, len(line)
        while i < n:
            c = line[i]
            if c == "\\":
                i += 2
                continue
            if c in "=: \t\f":
                break
            i += 1
        key_raw = line[:min(i, n)]
        j = i
        while j < n and line[j] in " \t\f":
            j += 1
        if j < n and line[j] in "=:":
            j += 1
            while j < n and line[j] in " \t\f":
                j += 1
        props[_unescape(key_raw)] = _unescape(line[j:])
    return props


# SKIFF_* variables that are not node properties: the cluster id `server start
# --auto-format` writes with its initial controllers (KIP-853), and the admin address the
# CLI talks to.
ENV_NOT_CONFIG = frozenset({"SKIFF_CLUSTER_ID", "SKIFF_INITIAL_CONTROLLERS", "SKIFF_ADMIN",
                            "SKIFF_COMPILE"})  # the last is setup.py's


def env_key(key: str) -> str:
    return "SKIFF_" + key.upper().replace("_", "__").replace("-", "___").replace(".", "_")


def _key_from_env(name: str) -> str:
    body = name[len("SKIFF_"):].lower()
    return body.replace("___", "\0").replace("__", "\1").replace("_", ".").replace(
        "\0", "-").replace("\1", "_")


def parse_overrides(items: Iterable[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError("--override", item, "key=value")
        out[key.strip()] = value
    return out
