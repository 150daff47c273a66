"""deploy/kubernetes: both overlays render with `kubectl kustomize`, pass
`kubernetes-validate --strict` for the oldest and newest Kubernetes versions claimed, hold
what a Kafka operator expects (probes, PDBs, security context...), carry properties Skiff
itself accepts, and the dev overlay's broker pod, taken from its StatefulSet, runs under
`podman kube play` and serves a Kafka client."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from broker.config import load_config, parse_properties
from broker.testing import engine
from broker.testing.engine import REPO_ROOT, podman
from tests.deploy.test_image import consume_all, produce

pytestmark = pytest.mark.timeout(600)

KUSTOMIZE_DIR = REPO_ROOT / "deploy" / "kubernetes"
OVERLAYS = ["dev", "prod"]
K8S_VERSIONS = ["1.27.0", "1.37.0"]  # gRPC probes are GA from 1.27; see base/kustomization


def tool(name: str) -> str:
    found = shutil.which(name) or str(Path(sys.executable).parent / name)
    if not Path(found).exists():
        pytest.fail(f"{name} is missing: it comes with the test extra")
    return found


def render(overlay: str) -> str:
    result = subprocess.run([tool("kubectl"), "kustomize", str(KUSTOMIZE_DIR / "overlays" /
                                                                overlay)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout


def docs(overlay: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(render(overlay)) if d]


def by_kind(items: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in items if d["kind"] == kind}


def validate(path: Path, version: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([tool("kubernetes-validate"), "--strict", "-k", version, "--quiet",
                           str(path)], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_validates_strictly(overlay: str, tmp_path: Path) -> None:
    rendered = tmp_path / f"{overlay}.yaml"
    rendered.write_text(render(overlay))
    for version in K8S_VERSIONS:
        result = validate(rendered, version)
        assert result.returncode == 0, f"{version}: {result.stdout}{result.stderr}"


def test_strict_validation_rejects_a_misspelled_field(tmp_path: Path) -> None:
    """The check above can fail: a field name with a typo is refused."""
    bad = tmp_path / "bad.yaml"
    bad.write_text(render("dev").replace("readOnlyRootFilesystem", "readOnlyRootFilesytem"))
    result = validate(bad, K8S_VERSIONS[-1])
    assert result.returncode != 0
    assert "readOnlyRootFilesytem" in result.stdout + result.stderr


def check_pod_template(sts: dict[str, Any]) -> None:
    spec = sts["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["grpc"] == {"port": 9094}, probe
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    sc = container["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False and sc["capabilities"]["drop"] == ["ALL"]
    assert sc["readOnlyRootFilesystem"] is True
    assert container["resources"]["requests"]["cpu"] and container["resources"]["limits"]
    assert "kill -TERM 1" in " ".join(container["lifecycle"]["preStop"]["exec"]["command"])
    assert spec["terminationGracePeriodSeconds"] >= 60
    assert spec["affinity"]["podAntiAffinity"]


def test_prod_shape() -> None:
    items = docs("prod")
    sets = by_kind(items, "StatefulSet")
    assert {n: s["spec"]["replicas"] for n, s in sets.items()} == {
        "skiff-controller": 3, "skiff-broker": 3}
    for sts in sets.values():
        check_pod_template(sts)
        assert "requiredDuringSchedulingIgnoredDuringExecution" in \
            sts["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
    services = by_kind(items, "Service")
    for headless in ("skiff-controller", "skiff-broker"):
        assert services[headless]["spec"]["clusterIP"] == "None"
        assert services[headless]["spec"]["publishNotReadyAddresses"] is True
        assert sets[headless]["spec"]["serviceName"] == headless
    assert services["skiff-bootstrap"]["spec"]["type"] == "ClusterIP"
    assert set(by_kind(items, "PodDisruptionBudget")) == {"skiff-controller", "skiff-broker"}


def test_dev_shape() -> None:
    items = docs("dev")
    sets = by_kind(items, "StatefulSet")
    assert list(sets) == ["skiff-broker"] and sets["skiff-broker"]["spec"]["replicas"] == 1
    check_pod_template(sets["skiff-broker"])
    assert "skiff-controller" not in by_kind(items, "Service")


def pod_env(sts: dict[str, Any], ordinal: int, namespace: str) -> dict[str, str]:
    """The SKIFF_* environment a pod of this StatefulSet gets: its env (with Kubernetes'
    $(VAR) expansion), the node id its command computes, and the cluster ConfigMap."""
    (container,) = sts["spec"]["template"]["spec"]["containers"]
    pod_name = f"{sts['metadata']['name']}-{ordinal}"
    env: dict[str, str] = {}
    for item in container["env"]:
        if "value" in item:
            env[item["name"]] = re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], item["value"])
        else:
            path = item["valueFrom"]["fieldRef"]["fieldPath"]
            env[item["name"]] = {"metadata.name": pod_name, "metadata.namespace": namespace}[path]
    command = container["command"][-1]
    offset = re.search(r"\$\(\( \$\{POD_NAME##\*-\} \+ (\d+) \)\)", command)
    env["SKIFF_NODE_ID"] = str(ordinal + (int(offset.group(1)) if offset else 0))
    return {k: v for k, v in env.items() if k.startswith("SKIFF_")}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_rendered_properties_are_accepted_by_skiff(overlay: str, tmp_path: Path) -> None:
    """Each StatefulSet's properties file, with the environment its pods get, loads
    through Skiff's own config checks (no error, no unknown key)."""
    items = docs(overlay)
    config = next(d for d in items if d["metadata"]["name"].startswith("skiff-config"))
    for sts in by_kind(items, "StatefulSet").values():
        (container,) = sts["spec"]["template"]["spec"]["containers"]
        prop_file = re.search(r"/etc/skiff/conf/(\S+\.properties)", container["command"][-1])
        assert prop_file is not None
        path = tmp_path / prop_file.group(1)
        path.write_text(config["data"][prop_file.group(1)])
        for ordinal in range(sts["spec"]["replicas"]):
            warnings: list[str] = []
            cfg = load_config(path, {}, pod_env(sts, ordinal, "kafka"), warn=warnings.append)
            assert warnings == []
            voters = {v.node_id for v in cfg.voters}
            if cfg.is_controller:
                assert cfg.node_id in voters
            if cfg.is_broker:
                host = f"{sts['metadata']['name']}-{ordinal}.skiff-broker.kafka.svc"
                assert [str(a) for a in cfg.advertised_listeners
                        if a.name == "PLAINTEXT"] == [f"PLAINTEXT://{host}:9092"]
    assert parse_properties(config["data"]["broker.properties"])


def test_dev_broker_pod_runs_under_podman_kube_play(skiff_image: str) -> None:
    """The dev overlay's StatefulSet pod template, as a Pod named like its first replica,
    with only what differs outside a cluster: the image name of this build, host ports, an
    advertised address the host reaches, the namespace (podman has no metadata.namespace),
    and a named volume for the claim."""
    items = docs("dev")
    sts = by_kind(items, "StatefulSet")["skiff-broker"]
    spec = sts["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    suffix = uuid.uuid4().hex[:8]
    volume = f"skiff-kube-{suffix}"
    spec["volumes"].append({"name": "data", "persistentVolumeClaim": {"claimName": volume}})
    container["image"] = skiff_image
    host_ports = dict(zip((9092, 9093, 9094, 9095), engine.free_ports(4), strict=True))
    for port in container["ports"]:  # podman publishes every containerPort: choose free ones
        port["hostPort"] = host_ports[port["containerPort"]]
    bootstrap = f"localhost:{host_ports[9092]}"
    for item in container["env"]:
        if item["name"] == "POD_NAMESPACE":
            item.pop("valueFrom")
            item["value"] = "default"
        if item["name"] == "SKIFF_ADVERTISED_LISTENERS":
            item["value"] = f"PLAINTEXT://{bootstrap}"
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "skiff-broker-0",
                        "labels": sts["spec"]["template"]["metadata"]["labels"]},
           "spec": spec}
    configmaps = [d for d in items if d["kind"] == "ConfigMap"]
    play = Path(engine.REPO_ROOT / ".pytest_cache" / f"kube-play-{suffix}.yaml")
    play.parent.mkdir(exist_ok=True)
    play.write_text(yaml.safe_dump_all([*configmaps, pod]))
    try:
        podman("kube", "play", str(play), timeout=300)
        try:
            engine.wait_healthy(f"127.0.0.1:{host_ports[9094]}")  # what the grpc probes ask
        except TimeoutError:
            pytest.fail(engine.container_logs("skiff-broker-0-skiff"))
        meta = podman("exec", "skiff-broker-0-skiff", "cat",
                      "/var/lib/skiff/data/meta.properties").stdout
        assert "node.id=100" in meta  # 100 + the ordinal of skiff-broker-0
        topic = f"kube-{suffix}"
        acked = produce(bootstrap, topic, 100)
        assert sorted(consume_all(bootstrap, topic, 100)) == sorted(acked)
    finally:
        podman("kube", "down", str(play), check=False, timeout=300)
        podman("pod", "rm", "-f", "skiff-broker-0", check=False)
        for name in [volume, *(c["metadata"]["name"] for c in configmaps)]:
            podman("volume", "rm", "-f", name, check=False)  # kube play's configMap volumes too
        play.unlink(missing_ok=True)
