"""Driving podman from the deploy tests: the engine check, the test-owned containers.conf,
the local base image, the Skiff image build and small helpers around `podman`.

Everything here works on a machine with no Docker engine and no reachable registry (CI),
through the files users have for the same hosts (docs/deploy.md):
  - CONTAINERS_CONF points podman at deploy/docker/containers.conf: runtime runc, and
    ulimits within the host's hard limits;
  - the base image the Dockerfile's FROM names is made by deploy/docker/base_image.sh
    (debootstrap + podman import, cached under $SKIFF_DEPLOY_CACHE);
  - the image is built by deploy/docker/build.sh, the documented command.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from broker.testing.ports import free_port as free_port
from broker.testing.ports import free_ports as free_ports

REPO_ROOT = Path(__file__).resolve().parents[2]
BASE_IMAGE = "docker.io/library/python:3.11-slim-bookworm"
IMAGE = "localhost/skiff:test"
BUILD_SCRIPT = REPO_ROOT / "deploy/docker/build.sh"
CONTAINERS_CONF = (REPO_ROOT / "deploy/docker/containers.conf").read_text()


def engine_problem() -> str | None:
    """Why no container can run here (None when podman can run one)."""
    if shutil.which("podman") is None:
        return "podman is not installed (tests/run.sh installs podman, buildah, runc)"
    try:
        info = subprocess.run(["podman", "info", "--format", "json"], capture_output=True,
                              text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return "`podman info` did not answer within 60 s"
    if info.returncode != 0:
        return f"`podman info` failed: {info.stderr.strip()[-300:]}"
    return None


def write_containers_conf(path: Path) -> Path:
    path.write_text(CONTAINERS_CONF)
    return path


def podman(*args: str, timeout: float = 120, check: bool = True,
           env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout,
                            env=env)
    if check and result.returncode != 0:
        raise RuntimeError(f"podman {' '.join(args)} failed ({result.returncode}):\n"
                           f"{result.stdout[-2000:]}\n{result.stderr[-3000:]}")
    return result


def ensure_base_image() -> None:
    if podman("image", "exists", BASE_IMAGE, check=False).returncode == 0:
        return
    result = subprocess.run(["bash", str(REPO_ROOT / "deploy/docker/base_image.sh"), BASE_IMAGE],
                            capture_output=True, text=True, timeout=1200)
    if result.returncode != 0:
        raise RuntimeError(f"base_image.sh failed:\n{result.stdout}\n{result.stderr}")


def build_image(tag: str = IMAGE) -> None:
    """The image built as docs/deploy.md tells users to build it: deploy/docker/build.sh."""
    env = {**os.environ, "ENGINE": "podman"}
    result = subprocess.run(["bash", str(BUILD_SCRIPT), tag], capture_output=True, text=True,
                            timeout=1200, env=env)
    if result.returncode != 0:
        raise RuntimeError(f"deploy/docker/build.sh failed ({result.returncode}):\n"
                           f"{result.stdout[-2000:]}\n{result.stderr[-3000:]}")


def image_inspect(tag: str = IMAGE) -> dict[str, Any]:
    return dict(json.loads(podman("image", "inspect", tag).stdout)[0])


def wait_healthy(admin_address: str, timeout: float = 90.0) -> float:
    """Poll `skiff health`'s check until SERVING; returns the seconds it took."""
    from broker.cli.health import check

    start = time.monotonic()
    last = ""
    while time.monotonic() - start < timeout:
        ok, last = check(admin_address, timeout=2.0)
        if ok:
            return time.monotonic() - start
        time.sleep(0.2)
    raise TimeoutError(f"{admin_address} not SERVING after {timeout:.0f}s (last: {last})")


def container_logs(name: str, tail: int = 60) -> str:
    result = podman("logs", "--tail", str(tail), name, check=False)
    return result.stdout + result.stderr


def remove(*names: str) -> None:
    if names:
        # -v: with the anonymous volume the image's VOLUME gives a container run without one
        podman("rm", "-f", "-v", "-t", "0", *names, check=False, timeout=120)


def run_detached(name: str, args: Sequence[str], image: str = IMAGE,
                 command: Sequence[str] = ()) -> str:
    return podman("run", "-d", "--name", name, *args, image, *command).stdout.strip()
