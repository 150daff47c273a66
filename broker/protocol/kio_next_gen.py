"""Generate kio-style classes for the Kafka 4.4 API versions kio 0.6.5 (the newest) lacks.

kio 0.6.5 is generated from Kafka 4.1's message schemas. Kafka 4.4 serves three newer versions:
ApiVersions v5 (KIP-1242: ClusterId/NodeId in the request), TxnOffsetCommit v6 (KIP-1319: topic
ids) and DeleteGroups v3 (a per-group ErrorMessage). kio's own code generator (codegen/ in its
repository) needs pydantic 1 and Kafka's whole source tree; this is a small generator for the
field kinds these schemas use, written to kio's rules (codegen/parser.py, generate_schema.py):
snake_case names, ``ErrorCode`` for ErrorCode fields, ``i32Timedelta`` for ThrottleTimeMs, the
entity types of kio.schema.types, nested structs before their parent, tagged-field defaults.
The modules use only kio's runtime (kio.serial, kio.static, kio.schema.types), in kio's layout
``<api>/v<N>/{request,response}.py``, under ``broker/protocol/_kio_next/`` (committed).

    python -m broker.protocol.kio_next_gen [--jar PATH] [--out DIR]

The schemas are read from Kafka 4.4.0's kafka-clients jar (tests/java/pom.xml resolves it into
tests/java/target/kafka-libs/); the jar's sha256 is checked. The output is deterministic: a
second run writes identical files.
"""

from __future__ import annotations

import argparse
import builtins
import hashlib
import json
import re
import shutil
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

KAFKA_VERSION: Final = "4.4.0"
JAR_NAME: Final = f"kafka-clients-{KAFKA_VERSION}.jar"
JAR_SHA256: Final = "1ab07317eb6633241392449d329dbdc5d9251e6ffc4926860f42dd966e88bdf9"
_ROOT: Final = Path(__file__).resolve().parents[2]
DEFAULT_JAR: Final = _ROOT / "tests" / "java" / "target" / "kafka-libs" / JAR_NAME
OUT_DIR: Final = Path(__file__).resolve().parent / "_kio_next"

# kio schema package name -> (Kafka schema name, versions kio 0.6.5 has no class for)
NEXT_VERSIONS: Final[dict[str, tuple[str, tuple[int, ...]]]] = {
    "api_versions": ("ApiVersions", (5,)),
    "txn_offset_commit": ("TxnOffsetCommit", (6,)),
    "delete_groups": ("DeleteGroups", (3,)),
    "streams_group_heartbeat": ("StreamsGroupHeartbeat", (1,)),
    "streams_group_describe": ("StreamsGroupDescribe", (1,)),
    "streams_group_topology_description_update": ("StreamsGroupTopologyDescriptionUpdate", (0,)),
}

# kio's rules (codegen/parser.py)
_TIMEDELTA_NAMES: Final = frozenset({"ThrottleTimeMs", "TimeoutMs", "timeoutMs"})
_ERROR_CODE_NAMES: Final = frozenset({"ErrorCode", "PartitionErrorCode"})
_ENTITY_TYPES: Final = {
    "groupId": "GroupId", "topicName": "TopicName", "transactionalId": "TransactionalId",
    "producerId": "ProducerId", "brokerId": "BrokerId",
}
_INT_HINTS: Final = {"int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
                     "uint16": "u16"}
_PRIMITIVES: Final = {**_INT_HINTS, "string": "str", "bool": "bool", "uuid": "uuid.UUID",
                      "error_code": "ErrorCode", "timedelta_i32": "i32Timedelta",
                      "timedelta_i64": "i64Timedelta"}
_BUILTINS: Final = frozenset(dir(builtins))


def _matches(spec: str | None, version: int) -> bool:
    """Kafka's version spec: "none", "N", "N+", "N-M"."""
    if spec is None or spec == "none":
        return False
    if spec.endswith("+"):
        return version >= int(spec[:-1])
    if "-" in spec:
        lo, hi = spec.split("-")
        return int(lo) <= version <= int(hi)
    return version == int(spec)


def to_snake_case(value: str) -> str:
    """kio's codegen/case.py: "ClusterId" -> "cluster_id", "ISRReplicas" -> "isr_replicas"."""
    groups: list[str] = []
    current = ""
    for i, ch in enumerate(value):
        if not current:
            current = ch
            continue
        prev = current[-1]
        nxt = value[i + 1] if i + 1 < len(value) else ""
        if ((prev.isupper() and ch.isupper() and nxt.islower())
                or (prev.islower() and ch.isupper())
                or (prev.isdigit() and ch.isupper() and nxt.islower())):
            groups.append(current)
            current = ch
        else:
            current += ch
    groups.append(current)
    name = "_".join(groups).lower()
    return name + "_" if name in _BUILTINS else name


def _strip_comments(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not re.match(r"^\s*//", line))


@dataclass
class _Imports:
    uuid: bool = False
    datetime: bool = False
    error_code: bool = False
    types: set[str] = field(default_factory=set)
    primitives: set[str] = field(default_factory=lambda: {"i16"})


def _render_field(f: dict[str, Any], version: int, imports: _Imports) -> str:
    name = f["name"]
    ftype: str = f["type"]
    tag = f.get("tag") if _matches(f.get("taggedVersions"), version) else None
    nullable = _matches(f.get("nullableVersions"), version)
    default = f.get("default")
    if ftype not in _PRIMITIVES and not ftype.startswith("[]"):
        # a struct: kio gives a nullable one a None default and a required one none
        if nullable:
            return _line(to_snake_case(name), f"{ftype} | None", ["default=None"])
        return _line(to_snake_case(name), ftype, [])
    if ftype.startswith("[]") and ftype[2:] not in _PRIMITIVES:
        # an array of structs: the nested class is rendered by the caller
        hint = f"tuple[{ftype[2:]}, ...]"
        if nullable:
            hint += " | None"
        kwargs: list[str] = []
        if tag is not None:
            kwargs.append(f"metadata={{'tag': {tag}}}")
            kwargs.append("default=()")
        return _line(to_snake_case(name), hint, kwargs)
    array = ftype.startswith("[]")
    kind = ftype[2:] if array else ftype
    py_name = to_snake_case(name)
    if not array and name in _ERROR_CODE_NAMES:
        kind = "error_code"
        imports.error_code = True
    elif not array and (name in _TIMEDELTA_NAMES or name.endswith("Ms")) and kind in (
            "int32", "int64"):
        # kio's rule: a duration in milliseconds is a timedelta named without "Ms"
        kind = "timedelta_i32" if kind == "int32" else "timedelta_i64"
        py_name = to_snake_case(name.removesuffix("Ms"))
        imports.primitives.add(_PRIMITIVES[kind])
    if kind not in _PRIMITIVES:
        raise SystemExit(f"{name}: field type {ftype!r} is not handled by this generator")
    custom = _ENTITY_TYPES.get(f.get("entityType", "")) if kind in ("string", "int64",
                                                                      "int32") else None
    if custom is not None:
        imports.types.add(custom)
        hint = custom
    else:
        hint = _PRIMITIVES[kind]
        if kind in _INT_HINTS:
            imports.primitives.add(_INT_HINTS[kind])
        if kind == "uuid":
            imports.uuid = True
    tagged_optional = tag is not None and f.get("ignorable") and default is None
    if not array and (kind == "uuid" or (kind not in _INT_HINTS and (nullable or tagged_optional))):
        hint += " | None"
    metadata = {"kafka_type": kind}
    if tag is not None:
        metadata["tag"] = tag
    kwargs = [f"metadata={metadata!r}"]
    if array:
        hint = f"tuple[{hint}, ...]"
        kwargs.append("default=None" if default == "null" else "default=()")
    elif default is not None:
        imports.datetime |= kind.startswith("timedelta")
        kwargs.append(f"default={_default(kind, default, custom)}")
    elif tag is not None and f.get("ignorable"):
        kwargs.append("default=" + ("ErrorCode.none" if kind == "error_code" else
                                    f"{_INT_HINTS[kind]}(0)" if kind in _INT_HINTS else "None"))
    return _line(py_name, hint, kwargs)


def _default(kind: str, default: object, custom: str | None) -> str:
    if default == "null":
        return "None"
    if kind == "string":
        return f"{custom}({default!r})" if custom else repr(default)
    if kind in _INT_HINTS:
        value = int(str(default), 0)
        return f"{custom or _INT_HINTS[kind]}({value})"
    if kind == "bool":
        text = str(default).capitalize()
        assert text in ("True", "False"), default
        return text
    if kind == "error_code":
        return f"ErrorCode({default})"
    if kind in ("timedelta_i32", "timedelta_i64"):
        hint = _PRIMITIVES[kind]
        return f"{hint}.parse(datetime.timedelta(milliseconds={int(str(default), 0)}))"
    raise SystemExit(f"no default rule for a {kind} field: {default!r}")


def _line(py_name: str, hint: str, kwargs: list[str]) -> str:
    if not kwargs:
        return f"    {py_name}: {hint}\n"
    return f"    {py_name}: {hint} = field({', '.join(kwargs)})\n"


def _render_struct(name: str, fields: list[dict[str, Any]], entity: str, version: int,
                   header: str, schema: dict[str, Any], imports: _Imports,
                   out: list[str], rendered: set[str]) -> None:
    """Renders `name` after the structs its fields use: inline ones and the schema's
    commonStructs (each class once per module, as kio)."""
    rendered.add(name)
    common = {c["name"]: c for c in schema.get("commonStructs", ())}
    body: list[str] = []
    for f in fields:
        if not _matches(f.get("versions") or f.get("taggedVersions"), version):
            continue
        struct = f["type"].removeprefix("[]")
        if "fields" in f:
            _render_struct(struct, f["fields"], "nested", version, header, schema, imports,
                           out, rendered)
        elif struct in common and struct not in rendered:
            _render_struct(struct, common[struct]["fields"], "nested", version, header, schema,
                           imports, out, rendered)
        body.append(_render_field(f, version, imports))
        if f.get("about"):
            body.append(f'    """{f["about"]}"""\n')
    flexible = _matches(schema["flexibleVersions"], version)
    out.append(
        "\n\n@dataclass(frozen=True, slots=True, kw_only=True)\n"
        f"class {name}:\n"
        f"    __type__: ClassVar = EntityType.{entity}\n"
        f"    __version__: ClassVar[i16] = i16({version})\n"
        f"    __flexible__: ClassVar[bool] = {flexible}\n"
        f"    __api_key__: ClassVar[i16] = i16({schema['apiKey']})\n"
        f"    __header_schema__: ClassVar[type[{header}]] = {header}\n"
        + "".join(body)
    )


def render_module(schema: dict[str, Any], version: int, source: str) -> str:
    """The kio-style module for one request or response schema at `version`."""
    if not _matches(schema["validVersions"], version):
        raise SystemExit(f"{schema['name']} has no version {version}")
    kind = schema["type"]
    flexible = _matches(schema["flexibleVersions"], version)
    if kind == "request":
        header_module = f"request_header.v{2 if flexible else 1}"
        header = "RequestHeader"
    else:
        # ApiVersions answers with header v0 at every version (its header cannot change)
        v = 1 if flexible and schema["apiKey"] != 18 else 0
        header_module = f"response_header.v{v}"
        header = "ResponseHeader"
    imports = _Imports()
    classes: list[str] = []
    _render_struct(schema["name"], schema["fields"], kind, version, header, schema, imports,
                   classes, set())
    lines = [
        f"# Generated by broker/protocol/kio_next_gen.py from Apache Kafka {KAFKA_VERSION}'s\n"
        f"# {source} (Apache-2.0). Do not edit.\n",
        f'"""\nGenerated from ``clients/src/main/resources/{source}``.\n"""\n\n',
    ]
    if imports.datetime or imports.uuid:
        lines.append("".join(f"import {m}\n" for m, used in (("datetime", imports.datetime),
                                                            ("uuid", imports.uuid)) if used)
                     + "\n")
    lines.append("from dataclasses import dataclass\nfrom dataclasses import field\n"
                 "from typing import ClassVar\n\n")
    kio_imports = []
    if imports.error_code:
        kio_imports.append("from kio.schema.errors import ErrorCode")
    kio_imports.append(f"from kio.schema.{header_module}.header import {header}")
    kio_imports += [f"from kio.schema.types import {t}" for t in sorted(imports.types)]
    kio_imports.append("from kio.static.constants import EntityType")
    kio_imports += [f"from kio.static.primitive import {p}" for p in sorted(imports.primitives)]
    lines.append("\n".join(kio_imports) + "\n")
    lines += classes
    return "".join(lines)


def load_schema(jar: zipfile.ZipFile, name: str) -> tuple[dict[str, Any], str]:
    source = f"common/message/{name}.json"
    return json.loads(_strip_comments(jar.read(source).decode())), source


def generate(jar_path: Path, out: Path) -> list[str]:
    """Write the package into `out` (replaced); returns the module paths written."""
    digest = hashlib.sha256(jar_path.read_bytes()).hexdigest()
    if digest != JAR_SHA256:
        raise SystemExit(f"{jar_path}: sha256 {digest}, expected {JAR_SHA256}")
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    written: list[str] = []
    (tmp / "__init__.py").write_text(
        '"""Generated: kio-style classes for the Kafka 4.4 API versions kio 0.6.5 lacks.\n\n'
        "Written by broker/protocol/kio_next_gen.py; do not edit. Layout is kio's own,\n"
        "``<api>/v<N>/{request,response}.py``; broker.protocol.api falls back to these classes.\n"
        '"""\n'
    )
    with zipfile.ZipFile(jar_path) as jar:
        for api, (kafka_name, versions) in sorted(NEXT_VERSIONS.items()):
            (tmp / api).mkdir()
            (tmp / api / "__init__.py").write_text(
                "# Generated by broker/protocol/kio_next_gen.py. Do not edit.\n")
            for v in versions:
                vdir = tmp / api / f"v{v}"
                vdir.mkdir()
                names = []
                for kind in ("request", "response"):
                    schema, source = load_schema(jar, f"{kafka_name}{kind.capitalize()}")
                    (vdir / f"{kind}.py").write_text(render_module(schema, v, source))
                    names.append(schema["name"])
                    written.append(f"{api}/v{v}/{kind}.py")
                (vdir / "__init__.py").write_text(
                    "# Generated by broker/protocol/kio_next_gen.py. Do not edit.\n"
                    f"from .request import {names[0]}\nfrom .response import {names[1]}\n\n"
                    f"__all__ = (\n    {names[0]!r},\n    {names[1]!r},\n)\n".replace("'", '"')
                )
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--jar", type=Path, default=DEFAULT_JAR, help=f"Kafka's {JAR_NAME}")
    parser.add_argument("--out", type=Path, default=OUT_DIR)
    args = parser.parse_args(argv)
    written = generate(args.jar, args.out)
    print(f"wrote {len(written)} modules to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
