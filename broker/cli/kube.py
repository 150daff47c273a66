"""`skiff kube cluster-secret`: the Secret every pod of a Kubernetes deployment reads its
cluster identity from, made once per cluster by a Job (deploy/kubernetes/base/cluster-id.yaml).

The Secret holds `SKIFF_CLUSTER_ID` (a new random cluster id, `skiff storage random-uuid`)
and, with `--initial-controllers N`, `SKIFF_INITIAL_CONTROLLERS`: the KIP-853 initial voter
set `0@<address of 0>:<directory id>,...` with a new metadata directory id for each of the
first N controllers, which `server start --auto-format` formats them with (a controller not
in it formats to join later, with `skiff quorum add-controller`). Nothing here is a
literal shared by every user: each cluster gets its own ids, and a Secret that already
exists is kept (the Job may run again; the cluster's id must not change).

The Kubernetes API is reached as every in-cluster client does: https://$KUBERNETES_SERVICE_HOST
:$KUBERNETES_SERVICE_PORT with the pod's service account token and CA, in the pod's namespace.
The Job's service account may create and read Secrets in that namespace, nothing more.
"""

from __future__ import annotations

import argparse
import json
import os
import ssl
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from broker.protocol.kafka_uuid import random_kafka_uuid

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
CLUSTER_ID_KEY = "SKIFF_CLUSTER_ID"
INITIAL_CONTROLLERS_KEY = "SKIFF_INITIAL_CONTROLLERS"


def add_parser(sub: Any) -> None:
    p = sub.add_parser("kube", help="Kubernetes helpers (the cluster-id Secret)")
    ksub = p.add_subparsers(dest="kube_command", metavar="COMMAND")
    s = ksub.add_parser("cluster-secret",
                        help="create the Secret holding a new cluster id (kept if it exists)")
    s.add_argument("--name", default="skiff-cluster", help="the Secret's name")
    s.add_argument("--namespace", default=None,
                   help="default: the pod's own (from its service account)")
    s.add_argument("--initial-controllers", type=int, default=0, metavar="N",
                   help="also the KIP-853 initial voter set of controllers 0..N-1")
    s.add_argument("--controller-address", default="skiff-controller-{}.skiff-controller:9093",
                   metavar="TEMPLATE",
                   help="controller N's host:port, {} standing for N (default %(default)s)")
    s.add_argument("--api-server", default=None, metavar="URL",
                   help="default: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT")
    s.add_argument("--service-account-dir", default=str(SERVICE_ACCOUNT), metavar="DIR",
                   help="token, ca.crt and namespace of the pod's service account")
    p.set_defaults(handler=run)


def cluster_secret(name: str, initial_controllers: int, controller_address: str,
                   new_id: Callable[[], str] = random_kafka_uuid) -> dict[str, Any]:
    """The Secret's manifest, with new ids from `new_id`."""
    data = {CLUSTER_ID_KEY: new_id()}
    if initial_controllers > 0:
        if "{}" not in controller_address:
            raise ValueError(f"--controller-address {controller_address!r} has no {{}} for "
                             "the controller's ordinal")
        data[INITIAL_CONTROLLERS_KEY] = ",".join(
            f"{i}@{controller_address.format(i)}:{new_id()}"
            for i in range(initial_controllers))
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "labels": {"app.kubernetes.io/name": "skiff",
                                                  "app.kubernetes.io/part-of": "skiff"}},
            "stringData": data}


def create_secret(api: str, namespace: str, token: str, manifest: dict[str, Any],
                  context: ssl.SSLContext | None) -> bool:
    """POST the Secret; True if created, False if one of that name exists (409)."""
    request = urllib.request.Request(
        f"{api.rstrip('/')}/api/v1/namespaces/{namespace}/secrets",
        data=json.dumps(manifest).encode(), method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json",
                 "Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30, context=context):
            return True
    except urllib.error.HTTPError as exc:
        if exc.code == 409:
            return False
        raise


def run(args: argparse.Namespace) -> int:
    if args.kube_command != "cluster-secret":
        print("usage: skiff kube cluster-secret [--name NAME] ...", file=sys.stderr)
        return 2
    sa = Path(args.service_account_dir)
    try:
        manifest = cluster_secret(args.name, args.initial_controllers, args.controller_address)
        namespace = args.namespace or (sa / "namespace").read_text().strip()
        token = (sa / "token").read_text().strip()
        api = args.api_server
        if api is None:
            host, port = (os.environ.get("KUBERNETES_SERVICE_HOST"),
                          os.environ.get("KUBERNETES_SERVICE_PORT", "443"))
            if not host:
                raise ValueError("not inside Kubernetes (no KUBERNETES_SERVICE_HOST): "
                                 "give --api-server")
            api = f"https://{host}:{port}"
        context = None
        if api.startswith("https:"):
            ca = sa / "ca.crt"
            context = ssl.create_default_context(cafile=str(ca) if ca.exists() else None)
        created = create_secret(api, namespace, token, manifest, context)
    except (OSError, ValueError, urllib.error.URLError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if created:
        print(f"created Secret {namespace}/{args.name} with a new cluster id "
              f"{manifest['stringData'][CLUSTER_ID_KEY]}")
    else:
        print(f"Secret {namespace}/{args.name} exists: kept (its cluster id is the cluster's)")
    return 0
