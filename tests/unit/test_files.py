"""broker/util/files.py: atomic_write from several threads at once."""

from __future__ import annotations

import threading
from pathlib import Path

from broker.util.files import atomic_write


def test_concurrent_writers_of_one_file_never_fail_and_leave_a_whole_content(
    tmp_path: Path,
) -> None:
    # the background checkpoint thread and the event loop both write a log dir's checkpoints
    path = tmp_path / "recovery-point-offset-checkpoint"
    contents = [(f"writer {i}\n" * (200 + i)).encode() for i in range(4)]
    errors: list[BaseException] = []

    def write(data: bytes) -> None:
        try:
            for _ in range(300):
                atomic_write(path, data, fsync=False)
        except OSError as exc:  # what a racing rename raises
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(c,)) for c in contents]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert path.read_bytes() in contents
    assert not path.with_name(path.name + ".tmp").exists()
