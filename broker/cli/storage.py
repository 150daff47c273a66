"""`skiff storage`: random-uuid and format, as kafka-storage.sh. What formatting writes and
what a starting node checks is broker/metadata/storage.py."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

from broker.config import ConfigError, load_config
from broker.protocol.kafka_uuid import random_kafka_uuid

# -- the subcommands ------------------------------------------------------------------------


def add_parser(sub: Any) -> None:
    p = sub.add_parser("storage", help="format storage directories, make cluster ids")
    ssub = p.add_subparsers(dest="storage_command", metavar="COMMAND")
    ssub.add_parser("random-uuid", help="print a random cluster id")
    f = ssub.add_parser("format", help="write meta.properties into every log directory")
    f.add_argument("--config", "-c", required=True, help="the node's properties file")
    f.add_argument("--cluster-id", "-t", required=True, help="from `skiff storage random-uuid`")
    f.add_argument("--ignore-formatted", "-g", action="store_true",
                   help="skip directories that are already formatted")
    f.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
    f.add_argument("--add-scram", "-S", action="append", default=[], metavar="SCRAM",
                   help="a SCRAM credential for the bootstrap metadata, as kafka-storage.sh: "
                        "'SCRAM-SHA-512=[name=alice,password=alice-secret]'")
    f.add_argument("--release-version", "-r", metavar="VERSION",
                   help="the metadata.version to start with, as a release (3.9 ... 4.4) or "
                        "a level name (4.0-IV1); default the latest (4.4)")
    f.add_argument("--feature", "-f", action="append", default=[], metavar="NAME=LEVEL",
                   help="a finalized feature level other than the release's default, e.g. "
                        "transaction.version=1 (repeatable)")
    q = f.add_mutually_exclusive_group()
    q.add_argument("--standalone", "-s", action="store_true",
                   help="KIP-853: this controller alone is the initial voter set "
                        "(kraft.version 1; grow it with `skiff quorum add-controller`)")
    q.add_argument("--initial-controllers", "-I", metavar="ID@HOST:PORT:DIRID,...",
                   help="KIP-853: the initial voter set, with each controller's metadata "
                        "directory id (this node's is written to its meta.properties)")
    q.add_argument("--no-initial-controllers", "-N", action="store_true",
                   help="KIP-853: a controller that will join an existing quorum")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from broker.metadata.storage import StorageError, format_storage

    if args.storage_command == "random-uuid":
        print(random_kafka_uuid())
        return 0
    if args.storage_command == "format":
        try:
            cfg = load_config(args.config, args.override, os.environ,
                              warn=lambda m: print(f"warning: {m}", file=sys.stderr))
            format_storage(cfg, args.cluster_id, args.ignore_formatted, out=sys.stdout,
                           add_scram=args.add_scram, standalone=args.standalone,
                           initial_controllers=args.initial_controllers,
                           no_initial_controllers=args.no_initial_controllers,
                           release_version=args.release_version, feature=args.feature)
        except (ConfigError, StorageError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        return 0
    print("usage: skiff storage {random-uuid,format} ...", file=sys.stderr)
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="skiff")
    add_parser(parser.add_subparsers(dest="command"))
    return run(parser.parse_args(["storage", *(argv or [])]))
