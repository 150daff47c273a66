"""Compile proto/ with grpc_tools.protoc at first import; generated code is never committed.

Output goes to broker/_generated/ (or a per-user cache dir when the package dir is
read-only), laid out by proto package path, so `skiff/metadata/v1/records.proto`
becomes the module `skiff.metadata.v1.records_pb2`. That directory is put on
sys.path because protoc's generated `_grpc.py` imports its `_pb2` absolutely.

Freshness is a stamp holding a hash of every .proto file's path and bytes (more
robust than mtimes across checkouts). Regeneration happens under an exclusive
file lock, into a temporary directory that is renamed into place, so concurrent
test processes either see the old complete tree or the new complete tree.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib
import os
import shutil
import sys
import tempfile
import threading
from pathlib import Path
from types import ModuleType

_BROKER_DIR = Path(__file__).resolve().parents[1]
PROTO_ROOT = _BROKER_DIR.parent / "proto"
_STAMP = ".proto-stamp"
_thread_lock = threading.Lock()
_ready: Path | None = None


def _proto_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.proto") if p.is_file())


def _digest(root: Path, files: list[Path]) -> str:
    h = hashlib.sha256()
    for p in files:
        h.update(p.relative_to(root).as_posix().encode())
        h.update(b"\0")
        h.update(p.read_bytes())
        h.update(b"\0")
    return h.hexdigest()


def _output_dir() -> Path:
    preferred = _BROKER_DIR / "_generated"
    if os.access(_BROKER_DIR, os.W_OK):
        return preferred
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "skiff"
    key = hashlib.sha256(str(_BROKER_DIR).encode()).hexdigest()[:16]
    return cache / f"generated-{key}"


def _is_fresh(out: Path, digest: str) -> bool:
    try:
        return (out / _STAMP).read_text() == digest
    except OSError:
        return False


def _compile(root: Path, files: list[Path], dest: Path) -> None:
    from grpc_tools import protoc

    include = Path(protoc.__file__).resolve().parent / "_proto"
    args = [
        "grpc_tools.protoc",
        f"-I{root}",
        f"-I{include}",
        f"--python_out={dest}",
        f"--pyi_out={dest}",
        f"--grpc_python_out={dest}",
        *[str(p) for p in files],
    ]
    rc = protoc.main(args)
    if rc != 0:
        raise RuntimeError(f"protoc failed (exit {rc}) compiling {root}")
    # Namespace packages would work, but explicit __init__.py files keep
    # importers (and mypy) from guessing.
    for d in [dest, *(p for p in dest.rglob("*") if p.is_dir())]:
        (d / "__init__.py").touch()


def _generate(root: Path, out: Path, digest: str, files: list[Path]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    lock_path = Path(tempfile.gettempdir()) / (
        "skiff-protogen-" + hashlib.sha256(str(out).encode()).hexdigest()[:16] + ".lock"
    )
    with open(lock_path, "a+") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            if _is_fresh(out, digest):
                return
            tmp = Path(tempfile.mkdtemp(prefix=".gen-", dir=out.parent))
            try:
                _compile(root, files, tmp)
                (tmp / _STAMP).write_text(digest)
                old: Path | None = None
                if out.exists():
                    old = out.parent / f".old-{os.getpid()}-{threading.get_ident()}"
                    os.rename(out, old)
                os.rename(tmp, out)
                if old is not None:
                    shutil.rmtree(old, ignore_errors=True)
            finally:
                if tmp.exists():
                    shutil.rmtree(tmp, ignore_errors=True)
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


def ensure() -> Path:
    """Make sure generated code is current and importable; return its directory."""
    global _ready
    if _ready is not None:
        return _ready
    with _thread_lock:
        if _ready is not None:
            return _ready
        out = _output_dir()
        if PROTO_ROOT.is_dir():
            files = _proto_files(PROTO_ROOT)
            digest = _digest(PROTO_ROOT, files)
            built = _BROKER_DIR / "_generated"
            if _is_fresh(built, digest):
                out = built  # generated at install time (a container image): maybe read-only
            elif not _is_fresh(out, digest):
                _generate(PROTO_ROOT, out, digest, files)
        elif not (out / _STAMP).exists():
            raise RuntimeError(f"no .proto sources at {PROTO_ROOT} and no generated code at {out}")
        if str(out) not in sys.path:
            sys.path.insert(0, str(out))
        _ready = out
        return out


def load(module: str) -> ModuleType:
    """Import a generated module by its proto path, e.g. 'skiff.metadata.v1.records_pb2'."""
    ensure()
    return importlib.import_module(module)

