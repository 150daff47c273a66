"""Which of Skiff's modules run compiled (mypyc), and a guard against stale compiled copies.

With a C compiler at install time, setup.py compiles the modules on the produce path below
with mypyc into extension modules next to their sources, and writes `_compiled.json`: the
SHA-256 of each source it compiled. Python imports an extension module before a source file
of the same name, so an edited source would be shadowed by its old compiled copy. `activate`
(run by `import broker`, before any of these modules is imported) therefore compares the
sources with the manifest: if the manifest is missing or any source changed, every module of
the list is loaded from its source (all of them: compiled modules call each other's native
code directly) and `STATUS` says why; the node's `node_starting` log line carries it.

What compiling asks of these modules: no class of theirs is subclassed or has its methods
replaced outside them (tests included), and a dataclass built per request or per partition
writes out its `__init__`: the one `dataclass` generates stays interpreted code, three times
slower than a compiled one (the class keeps its eq, repr, `replace` and, where frozen, its
refusal of assignment).

This module imports only the standard library: setup.py reads the list from it.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

# The produce path's Python: framing, request headers and contexts, dispatch, the Produce
# handler, the replica and log appends, producer state, quotas and request metrics, and the
# answer's encoding (docs/benchmarks.md, "The produce path compiled with mypyc" and "The
# fetch path and the per-request helpers compiled too"). Left out: broker/log/files.py
# (compiled, appends failed with EBADF; its io.FileIO subclass is the likely cause, not
# pursued), broker/txn/verification.py (tests replace its verifier's methods), and the
# consumer's path (the Fetch handler, its encoder and codec, fetch sessions, the response
# chunks' writer): with those compiled, one CI run had two group tests whose consumers
# stalled, not reproduced since and not explained; they gave fetch ~1.05x.
COMPILED_SOURCES: tuple[str, ...] = (
    "broker/protocol/frame_reader.py",
    "broker/protocol/headers.py",
    "broker/protocol/produce_encoder.py",
    "broker/protocol/records.py",
    "broker/log/index.py",
    "broker/log/log.py",
    "broker/log/segment.py",
    "broker/log/validator.py",
    "broker/replication/partition.py",
    "broker/replication/producer_state.py",
    "broker/replication/replica_manager.py",
    "broker/handlers/produce.py",
    "broker/server/server.py",
    "broker/protocol/wire.py",
    "broker/protocol/nulls.py",
    "broker/protocol/api.py",
    "broker/server/dispatch.py",
    "broker/server/context.py",
    "broker/server/old_versions.py",
    "broker/metrics/stats.py",
    "broker/quotas/core.py",
    "broker/handlers/_quotas.py",
    "broker/handlers/_authz.py",
    "broker/log/epoch_cache.py",
)
MANIFEST_NAME = "_compiled.json"


@dataclass(frozen=True)
class NativeStatus:
    active: bool  # the compiled copies are the ones imported
    reason: str  # why not, or "compiled (mypyc)"


STATUS = NativeStatus(False, "not checked")


def module_name(source: str) -> str:
    return source.removesuffix(".py").replace("/", ".")


def source_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def check(root: Path, sources: Sequence[str] = COMPILED_SOURCES) -> NativeStatus:
    """Whether the compiled copies under `root` (the directory holding `broker/`) match
    their sources."""
    manifest = root / "broker" / MANIFEST_NAME
    try:
        built: dict[str, str] = json.loads(manifest.read_text())
    except FileNotFoundError:
        return NativeStatus(False, "built without compiling (no C compiler, or SKIFF_COMPILE=0)")
    except (OSError, ValueError) as exc:
        return NativeStatus(False, f"unreadable {manifest}: {exc}")
    changed = []
    for source in sources:
        path = root / source
        if built.get(source) != source_digest(path):
            changed.append(source)
        elif not any(path.parent.glob(f"{path.stem}.*.so")):
            return NativeStatus(False, f"no compiled copy of {source} (the compiler failed "
                                       "at install; `pip install -v -e .` shows why)")
    if changed:
        return NativeStatus(False, f"changed since compiled: {', '.join(changed)}; "
                                   "`pip install -e .` compiles them again")
    return NativeStatus(True, "compiled (mypyc)")


class _SourceFirst(importlib.abc.MetaPathFinder):
    """Loads the listed modules from their .py files, whatever sits beside them."""

    def __init__(self, paths: dict[str, Path]) -> None:
        self.paths = paths

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        source = self.paths.get(fullname)
        if source is None:
            return None
        return importlib.util.spec_from_file_location(fullname, source)


def activate() -> NativeStatus:
    """Run once, by `import broker`: see the top of this module."""
    global STATUS
    root = Path(__file__).resolve().parent.parent
    STATUS = check(root)
    if not STATUS.active:
        sys.meta_path.insert(0, _SourceFirst(
            {module_name(s): root / s for s in COMPILED_SOURCES}))
    return STATUS
