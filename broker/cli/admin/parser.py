"""The admin verbs' argument parsers, and running one: exit codes from the admin API's status."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any, TextIO

from broker.cli.admin.acls import (
    add_arguments as acl_arguments,
)
from broker.cli.admin.acls import (
    cmd_acls_add,
    cmd_acls_list,
    cmd_acls_remove,
)
from broker.cli.admin.cluster import (
    cmd_cluster_describe,
    cmd_cluster_unregister,
    cmd_quorum_add_controller,
    cmd_quorum_describe,
    cmd_quorum_remove_controller,
)
from broker.cli.admin.common import (
    DEFAULT_BOOTSTRAP,
    ENV_BOOTSTRAP,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    AdminCredentials,
    Client,
    UsageError,
)
from broker.cli.admin.configs import cmd_configs_delete, cmd_configs_get, cmd_configs_set
from broker.cli.admin.features import add_parsers as add_feature_parsers
from broker.cli.admin.groups import (
    cmd_groups_delete,
    cmd_groups_describe,
    cmd_groups_list,
    cmd_groups_reset,
)
from broker.cli.admin.partitions import (
    cmd_partitions_elect,
    cmd_partitions_reassign,
    cmd_partitions_reassignments,
)
from broker.cli.admin.quotas import add_entity_options, cmd_quotas_alter, cmd_quotas_describe
from broker.cli.admin.records import cmd_consume, cmd_produce
from broker.cli.admin.topics import (
    cmd_topics_alter,
    cmd_topics_create,
    cmd_topics_delete,
    cmd_topics_describe,
    cmd_topics_list,
)
from broker.cli.admin.transactions import (
    cmd_producers_describe,
    cmd_transactions_abort,
    cmd_transactions_describe,
    cmd_transactions_find_hanging,
    cmd_transactions_list,
)

# ---- the parser ----------------------------------------------------------------------------


def _common() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--bootstrap", default=None,
                   help=f"admin API address HOST:PORT (default ${ENV_BOOTSTRAP}, else "
                        f"{DEFAULT_BOOTSTRAP})")
    p.add_argument("--output", "-o", choices=["table", "json"], default="table")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds per call")
    # the admin plane's TLS and authentication (docs/security.md)
    p.add_argument("--ssl-ca", metavar="PEM", help="CA certificates of the admin listener")
    p.add_argument("--ssl-cert", metavar="PEM", help="client certificate chain (mTLS)")
    p.add_argument("--ssl-key", metavar="PEM", help="client private key (mTLS)")
    p.add_argument("--username", help="SCRAM user (skiff users)")
    p.add_argument("--password", help="its password (prefer --command-config)")
    p.add_argument("--command-config", metavar="FILE",
                   help="properties: ssl.ca.location, ssl.certificate.location, "
                        "ssl.key.location, username, password, sasl.mechanism")
    return p


def _target(p: argparse.ArgumentParser) -> None:
    p.add_argument("--topic")
    p.add_argument("--broker", type=int)
    p.add_argument("--broker-defaults", action="store_true",
                   help="the cluster-wide dynamic broker default")


def _group(p: argparse.ArgumentParser) -> None:
    """Every `groups` verb names its group the same way: GROUP, or --group GROUP."""
    p.add_argument("group", nargs="?", metavar="GROUP")
    p.add_argument("--group", dest="group_flag", metavar="GROUP",
                   help="the group (as kafka-consumer-groups takes it)")


def _verb(group: Any, name: str, fn: Callable[..., int], common: argparse.ArgumentParser,
          help: str) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = group.add_parser(name, parents=[common], help=help)
    p.set_defaults(handler=run, admin_fn=fn)
    return p


def add_parsers(sub: Any) -> None:
    common = _common()

    topics = sub.add_parser("topics", help="create, delete, list, describe, alter topics")
    tv = topics.add_subparsers(dest="verb", metavar="VERB", required=True)
    p = _verb(tv, "create", cmd_topics_create, common, "create a topic")
    p.add_argument("topic")
    p.add_argument("--partitions", type=int)
    p.add_argument("--replication-factor", type=int)
    p.add_argument("--replica-assignment", help="manual placement, e.g. 1:2,2:3")
    p.add_argument("--config", action="append", metavar="KEY=VALUE")
    p.add_argument("--validate-only", action="store_true")
    p = _verb(tv, "delete", cmd_topics_delete, common, "delete a topic")
    p.add_argument("topic", nargs="?")
    p.add_argument("--topic-id")
    p = _verb(tv, "list", cmd_topics_list, common, "list topics")
    p.add_argument("--include-internal", action="store_true")
    p = _verb(tv, "describe", cmd_topics_describe, common, "describe topics and partitions")
    p.add_argument("topics", nargs="*")
    p.add_argument("--include-internal", action="store_true")
    p = _verb(tv, "alter", cmd_topics_alter, common, "add partitions or change configs")
    p.add_argument("topic")
    p.add_argument("--partitions", type=int, help="the new partition count")
    p.add_argument("--replica-assignment", help="placement of the new partitions")
    p.add_argument("--config", action="append", metavar="KEY=VALUE")
    p.add_argument("--delete-config", action="append", metavar="KEY")
    p.add_argument("--validate-only", action="store_true")

    parts = sub.add_parser("partitions", help="reassign partitions, elect leaders")
    pv = parts.add_subparsers(dest="verb", metavar="VERB", required=True)
    p = _verb(pv, "reassign", cmd_partitions_reassign, common,
              "move partitions to other brokers (or --cancel)")
    p.add_argument("--topic")
    p.add_argument("--partition", type=int)
    p.add_argument("--replicas", help="target broker ids, e.g. 2,3,1")
    p.add_argument("--reassignment-json-file", help="Kafka's reassignment JSON")
    p.add_argument("--cancel", action="store_true")
    p.add_argument("--wait", action="store_true", help="wait until the data is copied")
    p.add_argument("--wait-timeout", type=float, default=300.0)
    p = _verb(pv, "elect-leaders", cmd_partitions_elect, common, "preferred or unclean")
    p.add_argument("--election-type", choices=["preferred", "unclean"], default="preferred")
    p.add_argument("--topic")
    p.add_argument("--partition", type=int)
    p.add_argument("--all-topic-partitions", action="store_true")
    p = _verb(pv, "reassignments", cmd_partitions_reassignments, common,
              "list ongoing reassignments")
    p.add_argument("--topic")
    p.add_argument("--partition", type=int)

    groups = sub.add_parser("groups", help="consumer and share groups")
    gv = groups.add_subparsers(dest="verb", metavar="VERB", required=True)
    p = _verb(gv, "list", cmd_groups_list, common, "list groups")
    p.add_argument("--state", action="append")
    p = _verb(gv, "describe", cmd_groups_describe, common, "members, offsets and lag")
    _group(p)
    p = _verb(gv, "reset-offsets", cmd_groups_reset, common,
              "reset committed offsets (dry run unless --execute)")
    _group(p)
    p.add_argument("--topic", action="append", metavar="TOPIC[:P,..]")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--to-earliest", action="store_true")
    how.add_argument("--to-latest", action="store_true")
    how.add_argument("--to-offset", type=int)
    how.add_argument("--shift-by", type=int)
    how.add_argument("--to-datetime")
    p.add_argument("--execute", action="store_true")
    p.add_argument("--dry-run", action="store_true", help="the default")
    p = _verb(gv, "delete", cmd_groups_delete, common,
              "delete a group, or its offsets with --topic T or T:P")
    _group(p)
    p.add_argument("--topic", action="append", metavar="TOPIC[:P,..]")

    txns = sub.add_parser("transactions", help="transactions (their coordinators' view)")
    tv = txns.add_subparsers(dest="verb", metavar="VERB", required=True)
    p = _verb(tv, "list", cmd_transactions_list, common, "list transactions")
    p.add_argument("--state", action="append", help="Kafka's state name, e.g. Ongoing")
    p.add_argument("--producer-id", type=int, action="append")
    p.add_argument("--min-duration-ms", type=int,
                   help="only transactions ongoing at least this long (hanging ones)")
    p = _verb(tv, "describe", cmd_transactions_describe, common,
              "state, producer, partitions of a transactional id")
    p.add_argument("--transactional-id", required=True)
    p = _verb(tv, "abort", cmd_transactions_abort, common,
              "fence the producer and abort its ongoing transaction")
    p.add_argument("--transactional-id", required=True)
    p = _verb(tv, "find-hanging", cmd_transactions_find_hanging, common,
              "open transactions in partitions that their coordinator does not know as ongoing")
    p.add_argument("--max-transaction-timeout-ms", type=int,
                   help="how old an open transaction must be (default "
                        "transaction.max.timeout.ms)")
    producers = sub.add_parser("producers", help="a partition's active producers")
    pv = producers.add_subparsers(dest="verb", metavar="VERB", required=True)
    p = _verb(pv, "describe", cmd_producers_describe, common,
              "producer ids, epochs, sequences and open transactions of a partition")
    p.add_argument("--topic", required=True)
    p.add_argument("--partition", type=int, required=True)

    cluster = sub.add_parser("cluster", help="brokers, controller, features")
    cv = cluster.add_subparsers(dest="verb", metavar="VERB", required=True)
    _verb(cv, "describe", cmd_cluster_describe, common, "describe the cluster")
    p = _verb(cv, "unregister", cmd_cluster_unregister, common,
              "drop the registration of a broker that is gone for good (KIP-631)")
    p.add_argument("--id", type=int, required=True, help="the broker id")
    quorum = sub.add_parser("quorum", help="the metadata quorum")
    qv = quorum.add_subparsers(dest="verb", metavar="VERB", required=True)
    _verb(qv, "describe", cmd_quorum_describe, common,
          "leader, epoch, replication status, directory ids, observers")
    p = _verb(qv, "add-controller", cmd_quorum_add_controller, common,
              "make a caught-up observer controller a voter (KIP-853)")
    p.add_argument("--config", "-c", required=True,
                   help="the properties file of the controller to add")
    p.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
    p = _verb(qv, "remove-controller", cmd_quorum_remove_controller, common,
              "remove a voter from the metadata quorum (KIP-853)")
    p.add_argument("--controller-id", type=int, required=True)
    p.add_argument("--controller-directory-id", required=True,
                   help="its metadata log dir's directory.id (see `skiff quorum describe`)")

    configs = sub.add_parser("configs", help="broker and topic configs")
    fv = configs.add_subparsers(dest="verb", metavar="VERB", required=True)
    p = _verb(fv, "get", cmd_configs_get, common, "configs with their sources")
    _target(p)
    p.add_argument("names", nargs="*", help="only these keys")
    p.add_argument("--synonyms", action="store_true")
    p.add_argument("--dynamic", action="store_true", help="only dynamic (altered) configs")
    p = _verb(fv, "set", cmd_configs_set, common, "set dynamic configs")
    _target(p)
    p.add_argument("pairs", nargs="+", metavar="KEY=VALUE")
    p.add_argument("--validate-only", action="store_true")
    p = _verb(fv, "delete", cmd_configs_delete, common, "remove dynamic configs")
    _target(p)
    p.add_argument("keys", nargs="+", metavar="KEY")
    p.add_argument("--validate-only", action="store_true")

    acls = sub.add_parser("acls", help="ACLs (as kafka-acls.sh)")
    av = acls.add_subparsers(dest="verb", metavar="VERB", required=True)
    p = _verb(av, "list", cmd_acls_list, common, "list ACLs (all, or of a resource)")
    acl_arguments(p, adding=False)
    p = _verb(av, "add", cmd_acls_add, common, "add ALLOW/DENY ACLs")
    acl_arguments(p, adding=True)
    p = _verb(av, "remove", cmd_acls_remove, common, "remove the matching ACLs")
    acl_arguments(p, adding=False)
    add_feature_parsers(sub, _verb, common)
    quotas = sub.add_parser("quotas", help="client quotas (users, client ids, IPs)")
    qv2 = quotas.add_subparsers(dest="verb", metavar="VERB", required=True)
    p = _verb(qv2, "describe", cmd_quotas_describe, common,
              "quotas of the entities matching the options (none: every entity)")
    add_entity_options(p)
    p.add_argument("--strict", action="store_true",
                   help="only entities with exactly the types given")
    p = _verb(qv2, "alter", cmd_quotas_alter, common, "set or remove quotas of one entity")
    add_entity_options(p)
    p.add_argument("--add-config", action="append", metavar="KEY=VALUE[,KEY=VALUE]",
                   help="producer_byte_rate, consumer_byte_rate, request_percentage, "
                        "controller_mutation_rate; connection_creation_rate for IPs")
    p.add_argument("--delete-config", action="append", metavar="KEY[,KEY]")
    p.add_argument("--validate-only", action="store_true")

    p = _verb(sub, "produce", cmd_produce, common,
              "console producer: one record per stdin line (or --value)")
    p.add_argument("--topic", required=True)
    p.add_argument("--partition", type=int)
    p.add_argument("--value", action="append", help="a record value instead of stdin")
    p.add_argument("--parse-key", action="store_true", help="lines are KEY<sep>VALUE")
    p.add_argument("--key-separator", default="\t")
    p.add_argument("--header", action="append", metavar="KEY=VALUE")
    p.add_argument("--null-marker", help="a value equal to this is sent as null")
    p.add_argument("--format", choices=["text", "base64", "hex"], default="text")
    p.add_argument("--acks", type=int, default=-1, choices=[-1, 0, 1])
    p = _verb(sub, "consume", cmd_consume, common, "console consumer")
    p.add_argument("--topic", required=True)
    p.add_argument("--partition", type=int)
    p.add_argument("--from-beginning", action="store_true")
    p.add_argument("--offset", type=int)
    p.add_argument("--from-timestamp", type=int, metavar="MS")
    p.add_argument("--max-messages", type=int, default=10)
    p.add_argument("--timeout-ms", type=int, default=1000,
                   help="stop after this long without a new record")
    p.add_argument("--print-key", action="store_true")
    p.add_argument("--print-headers", action="store_true")
    p.add_argument("--print-offset", action="store_true")
    p.add_argument("--print-partition", action="store_true")
    p.add_argument("--print-timestamp", action="store_true")
    p.add_argument("--format", choices=["text", "base64", "hex"], default="text")


def _status_exit(code_name: str) -> int:
    """A status from the admin API: 3 when it could not answer, else 1 (the cluster refused,
    INVALID_ARGUMENT included: exit 2 is only for the command line's own usage errors)."""
    if code_name in ("UNAVAILABLE", "DEADLINE_EXCEEDED"):
        return EXIT_UNREACHABLE
    return EXIT_FAILED


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    import grpc

    out = out or sys.stdout
    address = args.bootstrap or os.environ.get(ENV_BOOTSTRAP) or DEFAULT_BOOTSTRAP
    client = None
    try:
        client = Client(address, args.timeout, AdminCredentials.from_args(args))
        return int(args.admin_fn(client, args, out))
    except UsageError as exc:
        print(f"skiff: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except TimeoutError as exc:
        print(f"skiff: error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except grpc.RpcError as exc:
        code = exc.code()
        details = (exc.details() or "").replace("\n", " ")
        tls = client is not None and client.tls
        transport = code is grpc.StatusCode.UNAVAILABLE and any(
            w in details.lower() for w in ("socket closed", "connect", "reset", "handshake"))
        if transport and _kafka_listener(address):
            reason = (f"{address} is a Kafka listener; the admin API is on admin.listeners "
                      f"(9094 by default): point --bootstrap or ${ENV_BOOTSTRAP} there")
        elif code is grpc.StatusCode.UNAVAILABLE and not tls and "socket closed" in \
                details.lower():
            reason = (f"the admin API at {address} closed the connection ({details}): it "
                      "may be a TLS listener; give --ssl-ca (and --ssl-cert/--ssl-key if it "
                      "asks for client certificates)")
        elif code is grpc.StatusCode.UNAVAILABLE and tls and (
                "handshake" in details.lower() or "ssl" in details.lower()):
            reason = (f"TLS with the admin API at {address} failed ({details}): check "
                      "--ssl-ca, and --ssl-cert/--ssl-key when it requires client "
                      "certificates")
        elif code is grpc.StatusCode.UNAVAILABLE and (
                "connect" in details.lower() or "dns" in details.lower()):
            reason = (f"cannot reach the admin API at {address} ({details}); is the node "
                      f"running? Set --bootstrap or ${ENV_BOOTSTRAP}")
        elif code is grpc.StatusCode.DEADLINE_EXCEEDED and details == "Deadline Exceeded":
            # the client's own deadline (the server's timeouts carry their own message)
            reason = f"no answer from {address} within {args.timeout:g}s ({details})"
        else:
            reason = f"{details} [{code.name}]"
        print(f"skiff: error: {reason}", file=sys.stderr)
        return _status_exit(code.name)
    except BrokenPipeError:
        return EXIT_OK
    finally:
        if client is not None:
            client.close()


def _kafka_listener(address: str, timeout_s: float = 2.0) -> bool:
    """Does `address` answer a Kafka ApiVersions v0 request (as a Kafka listener does,
    plaintext)? Asked only after the admin API call failed UNAVAILABLE, to say why."""
    import socket
    import struct

    host, _, port = address.rpartition(":")
    correlation = 0x534B4646  # "SKFF"
    client_id = b"skiff-cli"
    body = struct.pack(">hhih", 18, 0, correlation, len(client_id)) + client_id
    try:
        with socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)),
                                      timeout=timeout_s) as s:
            s.sendall(struct.pack(">i", len(body)) + body)
            head = b""
            while len(head) < 10:
                chunk = s.recv(10 - len(head))
                if not chunk:
                    return False
                head += chunk
    except (OSError, ValueError):
        return False
    size, got, error_code = struct.unpack(">iih", head)
    return got == correlation and 6 <= size <= 1 << 20 and error_code in (0, 35)
