"""Skiff's build. pyproject.toml holds the metadata; this adds the compiled modules.

With a C compiler and Python's headers, the modules listed in broker/native.py are compiled
with mypyc (a part of mypy, the type checker the project already runs) into extension
modules next to their sources, and broker/_compiled.json records the sources compiled.
SKIFF_COMPILE: "1" compiles or fails the build, "0" never compiles, unset compiles when it
can, and says on stderr when it cannot or when the compiler failed (the install then stays
plain Python). The node logs which it runs (broker/native.py).
"""

from __future__ import annotations

import json
import os
import runpy
import shutil
import sys
import sysconfig
from pathlib import Path
from typing import Any

from setuptools import Extension, setup

ROOT = Path(__file__).resolve().parent
native = runpy.run_path(str(ROOT / "broker" / "native.py"))
SOURCES: tuple[str, ...] = native["COMPILED_SOURCES"]
MANIFEST = ROOT / "broker" / native["MANIFEST_NAME"]


def cannot_compile() -> str | None:
    compiler = (os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()[0]
    if not shutil.which(compiler):
        return f"no C compiler ({compiler}; apt-get install gcc)"
    if not (Path(sysconfig.get_paths()["include"]) / "Python.h").exists():
        return "no Python.h for this interpreter (apt-get install python3-dev)"
    return None


def ext_modules() -> list[Any]:
    mode = os.environ.get("SKIFF_COMPILE", "auto")
    if mode not in ("auto", "0", "1"):
        sys.exit(f"SKIFF_COMPILE={mode!r}: use 1 (compile), 0 (pure Python) or leave it unset")
    MANIFEST.unlink(missing_ok=True)
    # Compiled copies of earlier builds go first: a module that has left the list would
    # otherwise keep importing its old extension module (broker/native.py guards only the
    # modules listed).
    for stale in ROOT.glob("broker/**/*.so"):
        stale.unlink()
    if mode == "0":
        return []
    why = cannot_compile()
    if why is not None:
        if mode == "1":
            sys.exit(f"SKIFF_COMPILE=1, but {why}")
        print(f"skiff: the modules of broker/native.py stay pure Python: {why}", file=sys.stderr)
        return []
    from mypyc.build import mypycify

    os.chdir(ROOT)
    # The build's own mypy settings, not pyproject's strict ones: pip builds in an isolated
    # environment where the dependencies are absent (their types are then Any), and only the
    # listed modules' errors matter (`mypy broker raft pipeline` checks the rest in CI).
    options = ["--config-file", os.devnull, "--ignore-missing-imports",
               "--follow-imports=silent"]
    modules = mypycify([*options, *SOURCES], opt_level="3", group_name="skiff_native")
    # The native threads that send large answers (num.network.threads); without them the
    # event loop sends every answer, and the server says so when it starts.
    modules.append(Extension("broker.protocol._sendpool", ["broker/protocol/_sendpool.c"],
                             extra_compile_args=["-O2"]))
    if mode == "auto":
        # a compiler that fails leaves the install plain Python rather than failing it: the
        # missing extension modules then make broker/native.py load the sources
        for module in modules:
            module.optional = True
    MANIFEST.write_text(json.dumps(
        {s: native["source_digest"](ROOT / s) for s in SOURCES}, indent=1) + "\n")
    return list(modules)


setup(ext_modules=ext_modules())
