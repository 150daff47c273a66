"""Session fixtures for the deploy tests: a working podman (or a skip saying why), the
image built once per session, and a podman API socket for testcontainers."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.testing import engine
from tests.support.requires import require_tool


@pytest.fixture(scope="session")
def podman_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """podman usable by this session, with the test-owned containers.conf; else skip."""
    problem = engine.engine_problem()
    if problem is not None:
        require_tool("podman", f"no container engine: {problem}", available=False)
    conf = engine.write_containers_conf(tmp_path_factory.mktemp("podman") / "containers.conf")
    old = os.environ.get("CONTAINERS_CONF")
    os.environ["CONTAINERS_CONF"] = str(conf)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("CONTAINERS_CONF", None)
        else:
            os.environ["CONTAINERS_CONF"] = old


@pytest.fixture(scope="session")
def skiff_image(podman_env: None) -> str:
    """The repository's Dockerfile built once per session (layers cached by podman)."""
    engine.ensure_base_image()
    engine.build_image(engine.IMAGE)
    return engine.IMAGE


@pytest.fixture(scope="session")
def docker_host(podman_env: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Docker-compatible API (podman system service) on a socket of this session, for
    testcontainers; DOCKER_HOST and the testcontainers settings point at it meanwhile."""
    sock = tmp_path_factory.mktemp("podman-api") / "podman.sock"
    url = f"unix://{sock}"
    log = open(sock.with_suffix(".log"), "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(["podman", "system", "service", "--time=0", url],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    saved = {k: os.environ.get(k) for k in (
        "DOCKER_HOST", "TESTCONTAINERS_RYUK_DISABLED", "TESTCONTAINERS_CONNECTION_MODE")}
    try:
        import docker

        deadline = time.monotonic() + 30
        while True:
            try:
                if sock.exists() and docker.DockerClient(base_url=url).ping():
                    break
            except Exception:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                require_tool("podman", "podman system service did not answer: "
                             + Path(log.name).read_text()[-500:], available=False)
            time.sleep(0.2)
        os.environ.update(DOCKER_HOST=url, TESTCONTAINERS_RYUK_DISABLED="true",
                          TESTCONTAINERS_CONNECTION_MODE="docker_host")
        yield url
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        log.close()
