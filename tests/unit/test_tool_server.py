"""The tool server (tests/java/src/skiff/tools/ToolServer.java, driven by
tests/support/kafka_ref.run_tool): one JVM runs Kafka's tools one call at a time and answers
what a forked `java <ToolClass> args` would have, exit code, stdout and stderr apart.

Most steps use ToolProbe (tests/java/src/skiff/tools/ToolProbe.java), a stand-in tool whose
arguments are steps: print, exit the ways Kafka's tools do, read stdin, start threads, add
shutdown hooks, sleep. Two runs of Kafka's own kafka-topics are compared with a forked JVM.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import pytest

from tests.support import kafka_ref
from tests.support.kafka_ref import run_java, run_tool, tool, tool_server_pids

PROBE = "skiff.tools.ToolProbe"

pytestmark = [pytest.mark.timeout(120)]


@pytest.fixture(autouse=True)
def server_path(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv(kafka_ref.TOOLS_FORK_ENV, raising=False)
    yield


def probe(*steps: str, input_text: str | None = None,
          timeout: float = 60.0) -> tuple[int, str, str]:
    proc = run_tool(PROBE, *steps, input_text=input_text, timeout=timeout)
    return proc.returncode, proc.stdout, proc.stderr


def test_output_exit_codes_and_reuse() -> None:
    assert probe("out:a", "err:b", "thread:t", "out:c") == (0, "a\nt\nc\n", "b\n")
    pids = tool_server_pids()
    assert len(pids) == 1
    # Kafka's Exit.exit and Exit.halt, System.exit: the code as the process status has it,
    # and nothing the thread would have printed after
    assert probe("out:a", "exit:3", "out:not printed") == (3, "a\n", "")
    assert probe("err:e", "halt:4") == (4, "", "e\n")
    assert probe("out:a", "sysexit:5", "out:not printed") == (5, "a\n", "")
    assert probe("exit:-1") == (255, "", "")
    assert tool_server_pids() == pids  # one JVM answered them all


def test_uncaught_exception_is_exit_1_with_the_trace() -> None:
    code, out, err = probe("out:a", "throw:boom")
    assert (code, out) == (1, "a\n")
    lines = err.splitlines()
    assert lines[0] == 'Exception in thread "main" java.lang.IllegalStateException: boom'
    assert lines[-1].strip().startswith(f"at {PROBE}.main(")  # nothing of the server below


def test_threads_hooks_stdin_and_properties() -> None:
    # main returns, its non-daemon thread still prints: the JVM waits for it
    assert probe("out:a", "late:L") == (0, "a\nL\n", "")
    # shutdown hooks run on exit and after main returns, not on halt
    assert probe("hook:H", "exit:2") == (2, "H\n", "")
    assert probe("rthook:R", "out:a") == (0, "a\nR\n", "")
    assert probe("hook:H", "halt:2") == (2, "", "")
    # stdin: the text given, else at EOF at once
    assert probe("stdin", input_text="x\ny\n") == (0, "in:x\nin:y\n", "")
    assert probe("stdin") == (0, "", "")
    # a system property a call sets is gone for the next call
    assert probe("prop:skiff.probe=1") == (0, "skiff.probe=null\n", "")
    assert probe("prop:skiff.probe=2") == (0, "skiff.probe=null\n", "")


def test_a_timeout_kills_the_server_and_the_next_call_gets_a_new_one() -> None:
    probe("out:warm")
    before = tool_server_pids()
    with pytest.raises(subprocess.TimeoutExpired):
        probe("out:a", "sleep:60000", timeout=1.0)
    for pid in before:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert probe("out:again") == (0, "again\n", "")
    assert not set(tool_server_pids()) & set(before)


def test_kafka_tools_answer_as_a_forked_jvm() -> None:
    """kafka-topics --version (exit 0) and an unknown option (Exit.exit(1) after the usage on
    stderr) from the server and from a forked JVM."""
    for args in (["--version"], ["--bootstrap-server", "127.0.0.1:1", "--frobnicate"]):
        served = tool("kafka-topics", *args)
        forked = run_java(kafka_ref.TOOLS["kafka-topics"], *args)
        assert (served.returncode, served.stdout, served.stderr) == \
            (forked.returncode, forked.stdout, forked.stderr)
    assert served.returncode == 1 and "frobnicate is not a recognized option" in served.stderr
