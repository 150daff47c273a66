"""`skiff health [--bootstrap HOST:PORT] [--service NAME]`: asks a node's gRPC health service.

The admin server carries the standard `grpc.health.v1.Health` service: NOT_SERVING while
the node starts (before it is registered and unfenced) and while it stops, SERVING in
between. This command is what a container HEALTHCHECK, a Compose healthcheck or a script
runs: exit 0 when the node answers SERVING, 1 otherwise (not serving, unreachable, no answer
in time), with one line on stdout (the status) or stderr (why not). Kubernetes probes ask
the same service with their native `grpc:` probe. `--service skiff.readiness` asks the
node's readiness instead (broker/admin/readiness.py: a broker unfenced with its replicas in
the ISR), what the brokers' readiness probe asks.

The address is `--bootstrap`, else $SKIFF_ADMIN, else 127.0.0.1:9094 (as for `skiff admin`).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from broker.cli.admin.common import DEFAULT_BOOTSTRAP, ENV_BOOTSTRAP

EXIT_SERVING = 0
EXIT_NOT_SERVING = 1


def add_parser(sub: Any) -> None:
    p = sub.add_parser("health", help="exit 0 if the node's gRPC health service says SERVING")
    p.add_argument("--bootstrap", "-b", default=None, metavar="HOST:PORT",
                   help=f"the node's admin address (default ${ENV_BOOTSTRAP} or "
                        f"{DEFAULT_BOOTSTRAP})")
    p.add_argument("--service", default="",
                   help="the health service name to ask about ('' = the whole node)")
    p.add_argument("--timeout", type=float, default=3.0,
                   help="seconds to wait for an answer (default 3)")
    p.add_argument("--quiet", "-q", action="store_true", help="print nothing, only exit")
    # a TLS admin listener (admin.ssl.*); health needs no authentication
    p.add_argument("--ssl-ca", metavar="PEM", help="CA certificates of the admin listener")
    p.add_argument("--ssl-cert", metavar="PEM", help="client certificate chain (mTLS)")
    p.add_argument("--ssl-key", metavar="PEM", help="client private key (mTLS)")
    p.set_defaults(handler=run)


def check(address: str, service: str = "", timeout: float = 3.0,
          tls: tuple[bytes | None, bytes | None, bytes | None] | None = None
          ) -> tuple[bool, str]:
    """(serving?, the status name or why there is no status) for one health Check call.
    `tls`: (CA, client key, client chain) PEM bytes for a TLS admin listener."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    channel = grpc.insecure_channel(address) if tls is None else grpc.secure_channel(
        address, grpc.ssl_channel_credentials(*tls))
    with channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            reply = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout)
        except grpc.RpcError as exc:
            code = exc.code()
            details = (exc.details() or "").replace("\n", " ")
            return False, f"{code.name if code else 'UNKNOWN'}: {details}"
    name = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
    return reply.status == health_pb2.HealthCheckResponse.SERVING, name


def run(args: argparse.Namespace) -> int:
    address = args.bootstrap or os.environ.get(ENV_BOOTSTRAP) or DEFAULT_BOOTSTRAP
    tls = None
    if args.ssl_ca or args.ssl_cert:
        def read(path: str | None) -> bytes | None:
            if not path:
                return None
            with open(path, "rb") as f:
                return f.read()
        tls = (read(args.ssl_ca), read(args.ssl_key), read(args.ssl_cert))
    serving, status = check(address, args.service, args.timeout, tls)
    if not args.quiet:
        if serving:
            print(status)
        else:
            print(f"skiff: {address} is not healthy: {status}", file=sys.stderr)
    return EXIT_SERVING if serving else EXIT_NOT_SERVING
