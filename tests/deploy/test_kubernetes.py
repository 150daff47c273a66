"""deploy/kubernetes: every overlay (dev, prod, secure, external) renders with `kubectl
kustomize`, passes `kubernetes-validate --strict` for the oldest and newest Kubernetes
versions claimed, holds what a Kafka operator expects (probes, readiness on the ISR, PDBs,
security context, Secrets for TLS and SASL, a NodePort per broker, a cluster id made once
per cluster), starts its pods' commands as Kubernetes would into properties, TLS, SASL and a
formatted storage that Skiff itself accepts, and the dev overlay's broker pod, taken from
its StatefulSet, runs under `podman kube play` and serves a Kafka client."""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from broker.admin.readiness import READINESS_SERVICE
from broker.cli.health import check
from broker.config import load_config, parse_properties
from broker.testing import engine
from broker.testing.engine import REPO_ROOT, podman
from tests.deploy.test_image import consume_all, produce

pytestmark = pytest.mark.timeout(600)

KUSTOMIZE_DIR = REPO_ROOT / "deploy" / "kubernetes"
OVERLAYS = ["dev", "prod", "secure", "external"]
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
    for probe in ("startupProbe", "livenessProbe"):
        assert container[probe]["grpc"] == {"port": 9094}, probe  # the node's status
    # brokers: ready when unfenced with their replicas in sync (broker/admin/readiness.py)
    readiness = ({"port": 9094, "service": READINESS_SERVICE}
                 if sts["metadata"]["name"] == "skiff-broker" else {"port": 9094})
    assert container["readinessProbe"]["grpc"] == readiness
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


HOST_IP = "192.0.2.7"  # status.hostIP of the pods (TEST-NET-1)
# The Secrets the secure overlay's pods read, as an operator would create them: the TLS
# files are real (made in the test), the passwords these.
INTER_BROKER_PASSWORD = "ib-s3cret"
SASL_USERS = "# clients\nSCRAM-SHA-512=[name=alice,password=alice-secret]\n"


def cluster_secret_of(items: list[dict[str, Any]]) -> dict[str, str]:
    """What the cluster-id Job's own command (`skiff kube cluster-secret ...`) puts in the
    Secret: its arguments parsed by Skiff's parser, the Secret made by the same function."""
    from broker.cli.kube import cluster_secret
    from broker.cli.main import build_parser

    job = by_kind(items, "Job")["skiff-cluster-id"]
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["command"][0] == "skiff"
    args = build_parser().parse_args(container["command"][1:])
    secret = cluster_secret(args.name, args.initial_controllers, args.controller_address)
    assert secret["metadata"]["name"] == "skiff-cluster"
    return dict(secret["stringData"])


def expand(value: str, env: dict[str, str]) -> str:
    """Kubernetes' `$(VAR)` in an env value: from the entries before it; else left as is."""
    return re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), value)


def pod_start(sts: dict[str, Any], ordinal: int, namespace: str,
              secrets: dict[str, dict[str, str]], root: Path) -> tuple[dict[str, str], list[str]]:
    """Run a pod's command as its container would (/bin/sh, the env Kubernetes gives it,
    with `$(VAR)` expanded from the entries before it only), with a `skiff` on PATH that
    records its environment and arguments instead of starting: returns the SKIFF_*
    environment and the arguments `skiff` got. Paths of mounted volumes are under `root`
    (mount()); `secrets`: name -> key -> value."""
    (container,) = sts["spec"]["template"]["spec"]["containers"]
    pod_name = f"{sts['metadata']['name']}-{ordinal}"
    env: dict[str, str] = {}
    for item in container.get("envFrom", []):
        env.update(secrets[item["secretRef"]["name"]])
    fields = {"metadata.name": pod_name, "metadata.namespace": namespace,
              "status.hostIP": HOST_IP}
    for item in container["env"]:
        if "value" in item:
            env[item["name"]] = expand(item["value"], env)
        elif "fieldRef" in item["valueFrom"]:
            env[item["name"]] = fields[item["valueFrom"]["fieldRef"]["fieldPath"]]
        else:
            ref = item["valueFrom"]["secretKeyRef"]
            env[item["name"]] = secrets[ref["name"]][ref["key"]]
    fake = root / "bin"
    fake.mkdir(exist_ok=True)
    out = root / f"start-{pod_name}.json"
    (fake / "skiff").write_text(
        f"#!{sys.executable}\nimport json, os, sys\n"
        f"json.dump({{'env': dict(os.environ), 'argv': sys.argv[1:]}}, open({str(out)!r}, 'w'))\n")
    (fake / "skiff").chmod(0o755)
    command = container["command"]
    assert command[:2] == ["/bin/sh", "-c"]
    result = subprocess.run(command, env={**env, "PATH": f"{fake}:/usr/bin:/bin"},
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    started = json.loads(out.read_text())
    argv = [a.replace("/etc/skiff/", f"{root}/etc/skiff/") for a in started["argv"]]
    return {k: v for k, v in started["env"].items() if k.startswith("SKIFF_")}, argv


def mount(sts: dict[str, Any], items: list[dict[str, Any]],
          secrets: dict[str, dict[str, str]], root: Path) -> None:
    """Write the files of the pod's ConfigMap and Secret volumes under root/<mountPath>;
    property values naming /etc/skiff/ are pointed there too."""
    spec = sts["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    configmaps = {d["metadata"]["name"]: d["data"] for d in items if d["kind"] == "ConfigMap"}
    for vm in container["volumeMounts"]:
        volume = volumes.get(vm["name"], {})
        if "configMap" in volume:
            data = configmaps[volume["configMap"]["name"]]
        elif "secret" in volume:
            data = secrets[volume["secret"]["secretName"]]
            if "items" in volume["secret"]:
                data = {i["path"]: data[i["key"]] for i in volume["secret"]["items"]}
        else:
            continue
        target = root / vm["mountPath"].lstrip("/")
        target.mkdir(parents=True, exist_ok=True)
        for name, text in data.items():
            (target / name).write_text(text.replace("/etc/skiff/", f"{root}/etc/skiff/"))


def tls_secret(tmp_path: Path) -> dict[str, str]:
    """skiff-tls as docs/deploy.md says to make it: the key followed by its chain, the CA."""
    from broker.testing.tls import add_server_certificate, have_openssl, make_pki

    if not have_openssl():
        pytest.fail("openssl is missing: tests/run.sh installs it")
    pki = make_pki(tmp_path / "pki")
    add_server_certificate(pki, "nodes", "DNS:*.skiff-broker.kafka.svc,DNS:*.skiff-controller")
    return {"tls-combined.pem": Path(pki.keystore("nodes")).read_text(),
            "ca.crt": Path(pki.ca).read_text()}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_rendered_properties_are_accepted_by_skiff(overlay: str, tmp_path: Path) -> None:
    """Each StatefulSet's pods, started as Kubernetes starts them (their command under
    /bin/sh with their env, Secrets and mounted files), give `skiff server start` a
    properties file and an environment that load through Skiff's own config checks (no
    error, no unknown key), TLS and SASL settings that build, and an --auto-format that
    formats the node's storage: the cluster id of the Job's Secret, the KIP-853 initial
    voters, SCRAM users."""
    from broker.cli.main import build_parser
    from broker.cli.server import auto_format, read_scram_file
    from broker.metadata.storage import (
        BOOTSTRAP_CHECKPOINT,
        parse_initial_controllers,
        read_bootstrap_voters,
        read_meta_properties,
    )
    from broker.security.sasl_config import check_sasl, jaas_for
    from broker.security.tls import check_tls

    items = docs(overlay)
    secrets = {"skiff-cluster": cluster_secret_of(items),
               "skiff-sasl": {"inter-broker-password": INTER_BROKER_PASSWORD,
                              "users": SASL_USERS}}
    if overlay == "secure":
        secrets["skiff-tls"] = tls_secret(tmp_path)
    cluster_id = secrets["skiff-cluster"]["SKIFF_CLUSTER_ID"]
    initial = parse_initial_controllers(secrets["skiff-cluster"]["SKIFF_INITIAL_CONTROLLERS"])
    assert [(i, h, p) for i, h, p, _d in initial] == [
        (i, f"skiff-controller-{i}.skiff-controller", 9093) for i in range(3)]
    for sts in by_kind(items, "StatefulSet").values():
        for ordinal in range(sts["spec"]["replicas"]):
            root = tmp_path / f"{sts['metadata']['name']}-{ordinal}"
            root.mkdir()
            mount(sts, items, secrets, root)
            env, argv = pod_start(sts, ordinal, "kafka", secrets, root)
            args = build_parser().parse_args(argv)
            assert (args.command, args.server_command, args.auto_format) == (
                "server", "start", True)
            warnings: list[str] = []
            cfg = load_config(args.config, [*args.override, f"log.dirs={root}/data"], env,
                              warn=warnings.append)
            assert warnings == []
            check_tls(cfg)
            check_sasl(cfg)
            if overlay == "dev":
                assert [v.node_id for v in cfg.voters] == [cfg.node_id]
            else:  # KIP-853: no fixed voter list, the quorum found through these
                assert cfg.voters == [] and cfg.bootstrap_servers == [
                    (f"skiff-controller-{i}.skiff-controller", 9093) for i in range(3)]
            if cfg.is_broker:
                host = f"{sts['metadata']['name']}-{ordinal}.skiff-broker.kafka.svc"
                want = {"dev": [f"PLAINTEXT://{host}:9092"],
                        "prod": [f"PLAINTEXT://{host}:9092"],
                        "secure": [f"SASL_SSL://{host}:9092"],
                        "external": [f"PLAINTEXT://{host}:9092",
                                     f"EXTERNAL://{HOST_IP}:{30092 + ordinal}"]}[overlay]
                assert [str(a) for a in cfg.advertised_listeners
                        if a.name not in cfg.controller_listener_names] == want
                assert cfg.node_id == 100 + ordinal
            else:  # what `skiff quorum add-controller` registers for it (KIP-853)
                assert cfg.node_id == ordinal
                assert [str(a) for a in cfg.advertised_listeners] == [
                    f"CONTROLLER://skiff-controller-{ordinal}.skiff-controller:9093"]
            if overlay == "secure" and cfg.is_broker:
                login = jaas_for(cfg, "SASL_SSL", "SCRAM-SHA-512")
                assert login is not None and login.options == {
                    "username": "skiff-broker", "password": INTER_BROKER_PASSWORD}
            scram = list(args.add_scram)
            for path in args.add_scram_file:
                scram += read_scram_file(path)
            auto_format(cfg, env.get("SKIFF_CLUSTER_ID"), add_scram=scram,
                        initial_controllers=args.initial_controllers
                        or env.get("SKIFF_INITIAL_CONTROLLERS"))
            meta = read_meta_properties(root / "data")
            assert meta is not None and meta.cluster_id == cluster_id
            assert meta.node_id == cfg.node_id
            if cfg.is_controller and overlay != "dev":
                voters = read_bootstrap_voters(root / "data")
                assert voters is not None and [v.node_id for v in voters] == [0, 1, 2]
                assert meta.directory_id == initial[ordinal][3]
            checkpoint = (root / "data" / BOOTSTRAP_CHECKPOINT).read_bytes()
            if overlay == "secure" and cfg.is_controller:
                assert b"skiff-broker" in checkpoint and b"alice" in checkpoint
            else:
                assert b"skiff-broker" not in checkpoint


def test_the_cluster_id_is_no_literal() -> None:
    """Every overlay takes the cluster id from the Secret the Job makes once per cluster,
    and no rendered manifest carries an id of its own."""
    for overlay in OVERLAYS:
        items = docs(overlay)
        job = by_kind(items, "Job")["skiff-cluster-id"]
        assert job["spec"]["template"]["spec"]["serviceAccountName"] == "skiff-cluster-id"
        (rule,) = by_kind(items, "Role")["skiff-cluster-id"]["rules"]
        assert rule["resources"] == ["secrets"] and rule["verbs"] == ["create"]
        for sts in by_kind(items, "StatefulSet").values():
            (container,) = sts["spec"]["template"]["spec"]["containers"]
            assert container["envFrom"] == [{"secretRef": {"name": "skiff-cluster"}}]
            assert "SKIFF_CLUSTER_ID" not in {e["name"] for e in container["env"]}
        assert "SKIFF_CLUSTER_ID=" not in render(overlay)
        assert not any("cluster.id" in str(d.get("data", {})) for d in items)


def test_secure_shape() -> None:
    """TLS files and SASL users come from Secrets (mounted read-only, never in the
    ConfigMap); every listener but the admin one (gRPC probes cannot do TLS) is TLS."""
    items = docs("secure")
    config = next(d for d in items if d["metadata"]["name"].startswith("skiff-config"))
    for name, text in config["data"].items():
        props = parse_properties(text)
        assert "PLAINTEXT" not in props["listener.security.protocol.map"], name
        assert not any("password" in k or "jaas" in k for k in props), name
    for sts in by_kind(items, "StatefulSet").values():
        check_pod_template(sts)
        spec = sts["spec"]["template"]["spec"]
        secret_volumes = {v["name"]: v["secret"]["secretName"] for v in spec["volumes"]
                          if "secret" in v}
        (container,) = spec["containers"]
        mounted = {m["name"]: m for m in container["volumeMounts"]}
        assert secret_volumes.get("tls") == "skiff-tls"
        for name in secret_volumes:
            assert mounted[name]["readOnly"] is True
    controller = by_kind(items, "StatefulSet")["skiff-controller"]
    assert "--add-scram-file /etc/skiff/sasl/users" in \
        controller["spec"]["template"]["spec"]["containers"][0]["command"][-1]


def test_external_shape() -> None:
    """A NodePort Service per broker, selecting that pod alone, on the port the broker
    advertises (30092 + ordinal, checked with the properties above)."""
    items = docs("external")
    sts = by_kind(items, "StatefulSet")["skiff-broker"]
    services = by_kind(items, "Service")
    for ordinal in range(sts["spec"]["replicas"]):
        svc = services[f"skiff-broker-{ordinal}-external"]["spec"]
        assert svc["type"] == "NodePort"
        assert svc["selector"] == {"statefulset.kubernetes.io/pod-name":
                                   f"skiff-broker-{ordinal}"}
        (port,) = svc["ports"]
        assert (port["targetPort"], port["nodePort"]) == (9096, 30092 + ordinal)
    (container,) = sts["spec"]["template"]["spec"]["containers"]
    assert {"name": "external", "containerPort": 9096} in container["ports"]


def test_dev_broker_pod_runs_under_podman_kube_play(skiff_image: str) -> None:
    """The dev overlay's StatefulSet pod template, as a Pod named like its first replica,
    with only what differs outside a cluster: the image name of this build, host ports, an
    advertised address the host reaches, the namespace (podman has no metadata.namespace),
    and a named volume for the claim. The skiff-cluster Secret is the one the overlay's
    Job makes (its command's arguments, the same function)."""
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
    cluster = cluster_secret_of(items)
    play = Path(engine.REPO_ROOT / ".pytest_cache" / f"kube-play-{suffix}.yaml")
    play.parent.mkdir(exist_ok=True)
    play.write_text(yaml.safe_dump_all([*configmaps, pod]))
    # podman 4.3 reads an envFrom secretRef from a podman secret holding the Secret's data
    # as a JSON object of base64 values (a Secret in the played YAML is stored as YAML,
    # which it then fails to read)
    secret_file = play.with_suffix(".secret.json")
    secret_file.write_text(json.dumps({k: base64.b64encode(v.encode()).decode()
                                       for k, v in cluster.items()}))
    podman("secret", "rm", "skiff-cluster", check=False)  # one a failed run left
    try:
        podman("secret", "create", "skiff-cluster", str(secret_file))
        podman("kube", "play", str(play), timeout=300)
        try:
            engine.wait_healthy(f"127.0.0.1:{host_ports[9094]}")  # what the grpc probes ask
        except TimeoutError:
            pytest.fail(engine.container_logs("skiff-broker-0-skiff"))
        meta = podman("exec", "skiff-broker-0-skiff", "cat",
                      "/var/lib/skiff/data/meta.properties").stdout
        assert "node.id=100" in meta  # 100 + the ordinal of skiff-broker-0
        assert f"cluster.id={cluster['SKIFF_CLUSTER_ID']}" in meta
        topic = f"kube-{suffix}"
        acked = produce(bootstrap, topic, 100)
        assert sorted(consume_all(bootstrap, topic, 100)) == sorted(acked)
        # what its readiness probe asks: a lone broker leads all its partitions
        deadline = time.monotonic() + 60
        while not check(f"127.0.0.1:{host_ports[9094]}", READINESS_SERVICE)[0]:
            assert time.monotonic() < deadline, "skiff.readiness never SERVING"
            time.sleep(0.5)
    finally:
        podman("kube", "down", str(play), check=False, timeout=300)
        podman("pod", "rm", "-f", "skiff-broker-0", check=False)
        podman("secret", "rm", "skiff-cluster", check=False)
        for name in [volume, *(c["metadata"]["name"] for c in configmaps)]:
            podman("volume", "rm", "-f", name, check=False)  # kube play's configMap volumes too
        play.unlink(missing_ok=True)
        secret_file.unlink(missing_ok=True)
