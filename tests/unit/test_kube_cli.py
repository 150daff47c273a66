"""`skiff kube cluster-secret` (the Job of deploy/kubernetes/base/cluster-id.yaml): it
creates the cluster's Secret with new ids through the Kubernetes API, as the pod's service
account, and keeps a Secret that exists. The API here is a small HTTP server that answers
as the API server does (201 Created, then 409 AlreadyExists)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

from broker.cli.kube import CLUSTER_ID_KEY, INITIAL_CONTROLLERS_KEY, cluster_secret
from broker.cli.main import main
from broker.metadata.storage import parse_initial_controllers
from broker.protocol.kafka_uuid import kafka_to_uuid


class FakeApi:
    def __init__(self) -> None:
        self.secrets: dict[tuple[str, str], dict[str, Any]] = {}
        self.requests: list[tuple[str, str, str | None]] = []


@pytest.fixture()
def api() -> Iterator[tuple[str, FakeApi]]:
    state = FakeApi()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state.requests.append(("POST", self.path, self.headers.get("Authorization")))
            namespace = self.path.split("/")[4]
            key = (namespace, body["metadata"]["name"])
            code = 409 if key in state.secrets else 201
            state.secrets.setdefault(key, body)
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", state
    finally:
        server.shutdown()
        server.server_close()


def service_account(tmp_path: Path) -> Path:
    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "token").write_text("the-token\n")
    (sa / "namespace").write_text("kafka\n")
    return sa


def test_the_secret_is_created_once_and_then_kept(
        api: tuple[str, FakeApi], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url, state = api
    args = ["kube", "cluster-secret", "--api-server", url, "--service-account-dir",
            str(service_account(tmp_path)), "--initial-controllers", "3"]
    assert main(args) == 0
    assert "created Secret kafka/skiff-cluster" in capsys.readouterr().out
    assert state.requests == [("POST", "/api/v1/namespaces/kafka/secrets", "Bearer the-token")]
    first = state.secrets[("kafka", "skiff-cluster")]["stringData"]
    kafka_to_uuid(first[CLUSTER_ID_KEY])
    voters = parse_initial_controllers(first[INITIAL_CONTROLLERS_KEY])
    assert [(i, h, p) for i, h, p, _d in voters] == [
        (i, f"skiff-controller-{i}.skiff-controller", 9093) for i in range(3)]
    assert len({d for *_x, d in voters}) == 3  # a directory id each
    # a second run (the Job again) keeps the Secret: the cluster's id must not change
    assert main(args) == 0
    assert "exists: kept" in capsys.readouterr().out
    assert state.secrets[("kafka", "skiff-cluster")]["stringData"] == first


def test_each_run_makes_new_ids() -> None:
    a, b = (cluster_secret("s", 1, "c-{}:9093")["stringData"] for _ in range(2))
    assert a[CLUSTER_ID_KEY] != b[CLUSTER_ID_KEY]
    assert a[INITIAL_CONTROLLERS_KEY] != b[INITIAL_CONTROLLERS_KEY]
    assert INITIAL_CONTROLLERS_KEY not in cluster_secret("s", 0, "c-{}:9093")["stringData"]


def test_outside_kubernetes_it_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert main(["kube", "cluster-secret", "--service-account-dir",
                 str(service_account(tmp_path))]) == 1
    assert "KUBERNETES_SERVICE_HOST" in capsys.readouterr().err
