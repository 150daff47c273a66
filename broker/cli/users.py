"""`skiff users`: SCRAM users through any broker, as `kafka-configs.sh --entity-type users`.

    skiff users -b HOST:PORT [--command-config client.properties] list [--user U ...]
    skiff users -b HOST:PORT [...] add --user U --password P [--mechanism M] [--iterations N]
    skiff users -b HOST:PORT [...] delete --user U [--mechanism M]

The command config holds Kafka client properties: `security.protocol`, `ssl.truststore.*`
(PEM), `ssl.keystore.*` (PEM, for mTLS), `ssl.endpoint.identification.algorithm`,
`sasl.mechanism` and `sasl.jaas.config` (PlainLoginModule / ScramLoginModule with username
and password). Salting happens here; the broker only sees the salted password.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import sys
from dataclasses import fields
from typing import Any

from broker.config import ConfigError, parse_properties
from broker.security import scram


def add_parser(sub: Any) -> None:
    p = sub.add_parser("users", help="SCRAM users: list, add, delete (Kafka protocol)")
    p.add_argument("--bootstrap-server", "-b", required=True, metavar="HOST:PORT")
    p.add_argument("--command-config", metavar="FILE",
                   help="Kafka client properties (security.protocol, ssl.*, sasl.*)")
    usub = p.add_subparsers(dest="users_command", metavar="COMMAND")
    ls = usub.add_parser("list", help="users and their SCRAM mechanisms")
    ls.add_argument("--user", action="append", default=[])
    add = usub.add_parser("add", help="create or replace a SCRAM credential")
    add.add_argument("--user", required=True)
    add.add_argument("--password", required=True)
    add.add_argument("--mechanism", default="SCRAM-SHA-512", choices=list(scram.MECHANISMS))
    add.add_argument("--iterations", type=int, default=scram.DEFAULT_ITERATIONS)
    rm = usub.add_parser("delete", help="remove a SCRAM credential")
    rm.add_argument("--user", required=True)
    rm.add_argument("--mechanism", default="SCRAM-SHA-512", choices=list(scram.MECHANISMS))
    p.set_defaults(handler=run)


def client_security(props: dict[str, str]) -> Any:
    """A ConnectionSecurity (broker.protocol.transport) from Kafka client properties (None:
    PLAINTEXT)."""
    from broker.protocol.transport import ConnectionSecurity
    from broker.security.jaas import parse_jaas
    from broker.security.sasl_config import make_authenticator
    from broker.security.tls import SslSettings, client_context

    protocol = props.get("security.protocol", "PLAINTEXT").upper()
    if protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        raise ConfigError("security.protocol", protocol,
                          "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL")
    tls = None
    if protocol in ("SSL", "SASL_SSL"):
        values: dict[str, Any] = {}
        for f in fields(SslSettings):
            key = "ssl." + f.name.replace("_", ".")
            if key in props:
                raw = props[key]
                values[f.name] = tuple(x.strip() for x in raw.split(",")) \
                    if f.name in ("enabled_protocols", "cipher_suites") else raw
        tls = client_context(SslSettings("client", **values))
    authenticate = None
    if protocol.startswith("SASL_"):
        mechanism = props.get("sasl.mechanism", "GSSAPI")
        if "sasl.jaas.config" not in props:
            raise ConfigError("sasl.jaas.config", None, "username and password for SASL")
        options = parse_jaas(props["sasl.jaas.config"]).options
        if mechanism not in ("PLAIN", *scram.MECHANISMS):
            raise ConfigError("sasl.mechanism", mechanism, "PLAIN or SCRAM-SHA-256/512")
        authenticate = make_authenticator(mechanism, options.get("username", ""),
                                          options.get("password", ""))
    if tls is None and authenticate is None:
        return None
    return ConnectionSecurity(ssl=tls, authenticate=authenticate)


async def _run(args: argparse.Namespace, security: Any) -> int:
    from broker.metadata.records import SCRAM_MECHANISM_CODES, SCRAM_MECHANISM_NAMES
    from broker.protocol.transport import KafkaConnection

    host, _, port = args.bootstrap_server.rpartition(":")
    conn = KafkaConnection(host, int(port), "skiff-users", security=security)
    try:
        if args.users_command == "list":
            from kio.schema.describe_user_scram_credentials.v0 import request as dq

            q: Any = dq
            users = tuple(q.UserName(name=u) for u in args.user) if args.user else None
            resp = await conn.request(50, 0, q.DescribeUserScramCredentialsRequest(
                users=users), 30)
            code = 0 if int(resp.error_code) == 0 else 1
            for r in resp.results:
                if int(r.error_code) != 0:
                    print(f"{r.user}: {r.error_code.name} {r.error_message or ''}",
                          file=sys.stderr)
                    code = 1
                    continue
                infos = ", ".join(f"{SCRAM_MECHANISM_NAMES.get(int(c.mechanism), c.mechanism)}"
                                  f" (iterations {c.iterations})" for c in r.credential_infos)
                print(f"{r.user}: {infos}")
            return code
        from kio.schema.alter_user_scram_credentials.v0 import request as aq

        a: Any = aq
        code_of = SCRAM_MECHANISM_CODES[args.mechanism]
        if args.users_command == "add":
            salt = secrets.token_bytes(32)
            salted = scram.salted_password(args.mechanism, args.password, salt,
                                           args.iterations)
            req = a.AlterUserScramCredentialsRequest(deletions=(), upsertions=(
                a.ScramCredentialUpsertion(name=args.user, mechanism=code_of,
                                           iterations=args.iterations, salt=salt,
                                           salted_password=salted),))
        else:
            req = a.AlterUserScramCredentialsRequest(upsertions=(), deletions=(
                a.ScramCredentialDeletion(name=args.user, mechanism=code_of),))
        resp = await conn.request(51, 0, req, 30)
        bad = [r for r in resp.results if int(r.error_code) != 0]
        for r in bad:
            print(f"{r.user}: {r.error_code.name} {r.error_message or ''}", file=sys.stderr)
        if not bad:
            print(f"{args.users_command} {args.user} ({args.mechanism}): done")
        return 1 if bad else 0
    finally:
        await conn.close()


def run(args: argparse.Namespace) -> int:
    if args.users_command is None:
        print("usage: skiff users -b HOST:PORT {list,add,delete} ...", file=sys.stderr)
        return 2
    try:
        props: dict[str, str] = {}
        if args.command_config:
            with open(args.command_config, encoding="utf-8") as f:
                props = parse_properties(f.read())
        security = client_security(props)
        return asyncio.run(_run(args, security))
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except (OSError, ConnectionError, TimeoutError) as exc:
        print(f"error: {args.bootstrap_server}: {exc}", file=sys.stderr)
        return 1
