"""broker/native.py: the compiled modules are used only while they match their sources."""

from __future__ import annotations

import ast
import importlib
import importlib.machinery
import json
import os
import sys
from pathlib import Path

import pytest

from broker import native

SOURCES = ("broker/a.py", "broker/sub/b.py")


def tree(root: Path, *, compiled: bool = True, manifest: bool = True) -> None:
    for source in SOURCES:
        path = root / source
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"NAME = {source!r}\n")
        if compiled:
            path.with_name(f"{path.stem}.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")
    if manifest:
        (root / "broker" / native.MANIFEST_NAME).write_text(json.dumps(
            {s: native.source_digest(root / s) for s in SOURCES}))


def test_matching_sources_use_the_compiled_copies(tmp_path: Path) -> None:
    tree(tmp_path)
    assert native.check(tmp_path, SOURCES) == native.NativeStatus(True, "compiled (mypyc)")


def test_an_edited_source_turns_every_compiled_copy_off(tmp_path: Path) -> None:
    tree(tmp_path)
    with (tmp_path / "broker/sub/b.py").open("a") as f:
        f.write("# edited\n")
    status = native.check(tmp_path, SOURCES)
    assert not status.active
    assert "changed since compiled: broker/sub/b.py" in status.reason
    assert "pip install -e ." in status.reason


def test_no_manifest_or_no_compiled_copy_is_pure_python(tmp_path: Path) -> None:
    tree(tmp_path, manifest=False)
    status = native.check(tmp_path, SOURCES)
    assert not status.active and "built without compiling" in status.reason
    other = tmp_path / "other"
    tree(other, compiled=False)
    status = native.check(other, SOURCES)
    assert not status.active and status.reason.startswith("no compiled copy of broker/a.py")


def test_the_source_is_imported_even_beside_an_extension_module(tmp_path: Path) -> None:
    """What `activate` installs when the copies are stale: Python would otherwise load the
    (here unloadable) extension module before the source of the same name."""
    pkg = tmp_path / "skiff_native_probe"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "mod.py").write_text("ORIGIN = 'source'\n")
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    (pkg / f"mod{suffix}").write_bytes(b"not an ELF file")
    sys.path.insert(0, str(tmp_path))
    finder = native._SourceFirst({"skiff_native_probe.mod": pkg / "mod.py"})
    try:
        with pytest.raises(ImportError):
            importlib.import_module("skiff_native_probe.mod")
        sys.meta_path.insert(0, finder)
        assert importlib.import_module("skiff_native_probe.mod").ORIGIN == "source"
    finally:
        if finder in sys.meta_path:
            sys.meta_path.remove(finder)
        sys.path.remove(str(tmp_path))
        for name in ("skiff_native_probe.mod", "skiff_native_probe"):
            sys.modules.pop(name, None)


@pytest.mark.skipif(os.environ.get("EXPECT_COMPILED_MODULES") != "1",
                    reason="tests/run.sh sets EXPECT_COMPILED_MODULES=1 after compiling")
def test_the_suite_runs_the_compiled_modules() -> None:
    import broker.log.log
    import broker.server.server

    assert native.STATUS.active, native.STATUS.reason
    for module in (broker.log.log, broker.server.server):
        assert module.__file__ is not None and not module.__file__.endswith(".py")
    from broker.protocol.frames import native_senders_missing

    assert native_senders_missing() is None  # num.network.threads' sender threads


def _dataclass_fields(cls: ast.ClassDef) -> list[tuple[str, str | None]]:
    """(name, default source) of a dataclass's fields, in order; `field(default=X)` is X."""
    fields: list[tuple[str, str | None]] = []
    for stmt in cls.body:
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            continue
        value = stmt.value
        if isinstance(value, ast.Call) and ast.unparse(value.func) == "field":
            value = next((k.value for k in value.keywords if k.arg == "default"), None)
        fields.append((stmt.target.id, None if value is None else ast.unparse(value)))
    return fields


def _written_out_inits() -> list[tuple[str, ast.ClassDef, ast.FunctionDef]]:
    """Every dataclass of broker/ with an __init__ of its own (compiled or not: a module may
    leave the list and come back)."""
    root = Path(native.__file__).resolve().parents[1]
    found = []
    for path in sorted((root / "broker").rglob("*.py")):
        source = str(path.relative_to(root))
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef) and any(
                    "dataclass" in ast.unparse(d) for d in node.decorator_list):
                for stmt in node.body:
                    if isinstance(stmt, ast.FunctionDef) and stmt.name == "__init__":
                        found.append((source, node, stmt))
    return found


def test_written_out_dataclass_inits_match_their_fields() -> None:
    """A dataclass that writes out its __init__ (broker/native.py says why) takes
    every field, in order, with the field's default, and sets each: a field added later but
    left out of the __init__ would be unset on every instance."""
    inits = _written_out_inits()
    assert len(inits) >= 10, inits  # the per-request ones (c8368e0)
    for source, cls, init in inits:
        where = f"{source}: {cls.name}.__init__"
        args = init.args.args[1:]
        defaults: list[str | None] = [None] * (len(args) - len(init.args.defaults)) + [
            ast.unparse(d) for d in init.args.defaults]
        assert [(a.arg, d) for a, d in zip(args, defaults, strict=True)] == \
            _dataclass_fields(cls), where
        assigned = set()
        for stmt in init.body:
            if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Attribute):
                assigned.add(stmt.targets[0].attr)
            elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and \
                    ast.unparse(stmt.value.func) == "object.__setattr__":
                assigned.add(ast.literal_eval(stmt.value.args[1]))
        assert assigned == {a.arg for a in args}, where


# Reassigned at run time (EAGER_PENDING) or set by a test (PRODUCER_STATE_SCAN_BYTES): a
# Final name would be a C static that neither reaches.
NOT_FINAL = {"EAGER_PENDING", "PRODUCER_STATE_SCAN_BYTES"}


def test_the_compiled_modules_constants_are_final() -> None:
    """mypyc looks a module-level name up in the module's dict at every use unless it is
    Final (docs/benchmarks.md, "Server machinery per request")."""
    root = Path(__file__).resolve().parents[2]
    missing = []
    for source in native.COMPILED_SOURCES:
        for node in ast.parse((root / source).read_text()).body:
            if isinstance(node, ast.Assign):
                targets, annotation = node.targets, None
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                targets, annotation = [node.target], node.annotation
            else:
                continue
            final = annotation is not None and "Final" in ast.unparse(annotation)
            for target in targets:
                name = target.id if isinstance(target, ast.Name) else ""
                if name.lstrip("_")[:1].isupper() and name.upper() == name \
                        and name not in NOT_FINAL and not final \
                        and not ast.unparse(node.value).startswith("TypeVar("):
                    missing.append(f"{source}: {name}")
    assert not missing, missing
