"""broker.util.protogen compiles proto/ at first import, atomically, safe across processes."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import sys
from broker.util import protogen
m = protogen.load("skiff.metadata.v1.records_pb2")
print(sorted(f.name for f in m.Topic.DESCRIPTOR.fields))
"""


def _copy_tree(tmp: Path) -> Path:
    (tmp / "broker" / "util").mkdir(parents=True)
    (tmp / "broker" / "__init__.py").write_text("")
    (tmp / "broker" / "util" / "__init__.py").write_text("")
    shutil.copy(ROOT / "broker" / "util" / "protogen.py", tmp / "broker" / "util" / "protogen.py")
    shutil.copytree(ROOT / "proto", tmp / "proto")
    return tmp


def _run_many(tree: Path, n: int) -> list[str]:
    procs = [subprocess.Popen([sys.executable, "-c", PROBE], cwd=tree, env={
        "PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin", "HOME": str(tree)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(n)]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        outs.append(out.strip())
    return outs


def test_concurrent_first_import_and_regeneration(tmp_path: Path):
    tree = _copy_tree(tmp_path)
    outs = _run_many(tree, 4)
    assert set(outs) == {"['name', 'topic_id']"}
    gen = tree / "broker" / "_generated"
    assert (gen / "skiff" / "metadata" / "v1" / "records_pb2.py").exists()
    assert not list(tree.glob("broker/.gen-*")) and not list(tree.glob("broker/.old-*"))
    # a changed .proto is picked up by the next import, again by racing processes
    proto = tree / "proto" / "skiff" / "metadata" / "v1" / "records.proto"
    text = proto.read_text().replace("message Topic {\n  string name = 1;\n",
                                     "message Topic {\n  string name = 1;\n  int32 extra = 9;\n")
    assert "extra" in text
    proto.write_text(text)
    outs = _run_many(tree, 4)
    assert set(outs) == {"['extra', 'name', 'topic_id']"}
    assert not list(tree.glob("broker/.gen-*")) and not list(tree.glob("broker/.old-*"))


def test_generated_code_is_not_tracked_by_git():
    out = subprocess.run(["git", "check-ignore", "broker/_generated/x.py"], cwd=ROOT,
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0
