"""SIGUSR1's task dump (broker/cli/server.py) on both event loops: under uvloop a task
waiting in uvloop's own Cython code (a server's serve_forever) has a frame whose line is
None, and Task.print_stack died on it with a TypeError in linecache, printing nothing."""

from __future__ import annotations

import asyncio
import io
import os
import signal
import sys

import pytest

from broker.cli.server import _dump_tasks, dump_tasks


async def _tasks_then_dump() -> str:
    async def sleeper() -> None:
        await asyncio.sleep(30)

    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    tasks = [asyncio.create_task(sleeper(), name="sleeper"),
             asyncio.create_task(server.serve_forever(), name="serve_forever")]
    await asyncio.sleep(0.05)
    out = io.StringIO()
    try:
        assert dump_tasks(out) == 3
        # and as the signal handler runs it, on this loop, into stderr
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGUSR1, _dump_tasks)
        os.kill(os.getpid(), signal.SIGUSR1)
        await asyncio.sleep(0.1)
        loop.remove_signal_handler(signal.SIGUSR1)
    finally:
        for t in tasks:
            t.cancel()
        server.close()
        await asyncio.gather(*tasks, return_exceptions=True)
    return out.getvalue()


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_the_task_dump_works_on_both_loops(loop: str, capfd: pytest.CaptureFixture[str]) -> None:
    if loop == "uvloop":
        uvloop = pytest.importorskip("uvloop")
        text = uvloop.run(_tasks_then_dump())
    else:
        text = asyncio.run(_tasks_then_dump())
    assert "--- task sleeper" in text and "--- task serve_forever" in text
    assert "await asyncio.sleep(30)" in text  # source lines where there are any
    assert "in sleeper" in text and "in serve_forever" in text
    err = capfd.readouterr().err
    assert "--- task sleeper" in err and "--- task serve_forever" in err, err
    assert "Traceback" not in err and "TypeError" not in err, err
    sys.stderr.flush()
