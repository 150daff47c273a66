"""`SkiffContainer`: Skiff in a container for tests, the way `testcontainers.kafka` gives
Kafka users a `KafkaContainer`.

    from broker.testing.container import SkiffContainer

    with SkiffContainer("skiff:latest") as skiff:
        producer = Producer({"bootstrap.servers": skiff.get_bootstrap_server()})

It runs the image's default single combined node. Kafka clients connect twice (bootstrap,
then the advertised address), so the advertised listener must be what the test process
reaches: the container listens on the same port number it is published on, chosen free on
the host, and advertises the engine's host with it. `get_admin_address()` is the gRPC admin
API (and grpc.health.v1) on a mapped port; `start()` returns once the health service says
SERVING, bounded by `startup_timeout`.

Needs the `testcontainers` package (the project's `test` extra) and a Docker API (Docker,
or `podman system service` with DOCKER_HOST pointing at its socket).
"""

from __future__ import annotations

import time
from typing import Any

from testcontainers.core.container import DockerContainer

from broker.testing.ports import free_port

ADMIN_PORT = 9094
CONTROLLER_PORT = 9093


class SkiffContainer(DockerContainer):
    def __init__(self, image: str = "skiff:latest", port: int | None = None,
                 startup_timeout: float = 60.0, **kwargs: Any) -> None:
        super().__init__(image, **kwargs)
        self.port = port if port is not None else free_port()
        self.startup_timeout = startup_timeout
        self.with_bind_ports(self.port, self.port)
        self.with_exposed_ports(ADMIN_PORT)
        self.with_env("SKIFF_LISTENERS",
                      f"PLAINTEXT://:{self.port},CONTROLLER://:{CONTROLLER_PORT}")

    def _configure(self) -> None:
        self.with_env("SKIFF_ADVERTISED_LISTENERS",
                      f"PLAINTEXT://{self.get_container_host_ip()}:{self.port}")

    def get_bootstrap_server(self) -> str:
        return f"{self.get_container_host_ip()}:{self.port}"

    def get_admin_address(self) -> str:
        return f"{self.get_container_host_ip()}:{self.get_exposed_port(ADMIN_PORT)}"

    def start(self) -> SkiffContainer:
        super().start()
        self._wait_serving()
        return self

    def _wait_serving(self) -> None:
        from broker.cli.health import check

        deadline = time.monotonic() + self.startup_timeout
        status = "not asked yet"
        while time.monotonic() < deadline:
            self.reload()
            if self.status in ("exited", "dead"):
                break
            serving, status = check(self.get_admin_address(), timeout=2.0)
            if serving:
                return
            time.sleep(0.25)
        out, err = self.get_logs()
        raise TimeoutError(
            f"Skiff in {self.image} not SERVING after {self.startup_timeout:.0f}s "
            f"(container {self.status}; last health answer: {status})\n"
            f"{(out + err).decode(errors='replace')[-3000:]}")
