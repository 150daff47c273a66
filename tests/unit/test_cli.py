import subprocess
import sys

from broker.cli.main import main


def test_no_command_prints_usage_and_fails(capsys):
    assert main([]) == 2
    assert "usage: skiff" in capsys.readouterr().err


def test_entry_point_runs_as_a_process():
    out = subprocess.run(
        [sys.executable, "-m", "broker.cli.main", "--version"],
        capture_output=True, text=True, timeout=60, check=True,
    )
    assert out.stdout.strip() == "skiff 0.1.0"


def test_tools_dump_log_verifies_a_real_segment(tmp_path):
    import time

    from broker.log import LogConfig, LogManager
    from broker.protocol.records import Record, build_batch

    logs = LogManager([tmp_path], LogConfig(), lambda: int(time.time() * 1000))
    logs.load()
    plog = logs.get_or_create("t", 0)
    plog.append_as_leader(build_batch([Record(timestamp=1, key=b"k", value=b"hello")]), 0, 1)
    logs.shutdown()
    segment = tmp_path / "t-0" / "00000000000000000000.log"
    out = subprocess.run(
        [sys.executable, "-m", "broker.cli.main", "tools", "dump-log", str(segment), "--verify",
         "--print-data"], capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "hello" in out.stdout
    segment.write_bytes(segment.read_bytes()[:-3])
    out = subprocess.run(
        [sys.executable, "-m", "broker.cli.main", "tools", "dump-log", str(segment), "--verify"],
        capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 1


def test_skiff_dev_runs_a_worker_per_two_cpus_unless_told(monkeypatch):
    import os

    from broker.cli.server import DEV_MAX_WORKERS, dev_workers

    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1})
    assert dev_workers(None, {}) == "1"
    assert dev_workers("auto", {}) == "1"
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1, 2, 3})
    assert dev_workers(None, {}) == "2"
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1, 2, 3, 4, 5, 6})
    assert dev_workers(None, {}) == "3"
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(64)))
    assert dev_workers(None, {}) == str(DEV_MAX_WORKERS)
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {3})  # taskset -c 3
    assert dev_workers(None, {}) == "1"
    assert dev_workers("3", {}) == "3"  # --workers 3
    # the key's own setting is left to the config
    assert dev_workers(None, {"SKIFF_SKIFF_BROKER_WORKERS": "1"}) is None
    assert dev_workers(None, {}, ["skiff.broker.workers=1"]) is None
