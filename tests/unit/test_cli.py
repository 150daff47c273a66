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
