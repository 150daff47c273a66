"""The `skiff` command: one entry point, subcommands per concern."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

if __name__ == "__main__":
    # kio registers test strategies for its types with hypothesis whenever hypothesis is
    # importable (it is wherever the tests run): ~15% of a node's import CPU, for strategies
    # no `skiff` process uses. Only for `python -m broker.cli.main`, the command tests and
    # `skiff dev` run; a process that imports this module keeps its hypothesis.
    sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]

from broker import __name__ as _pkg  # noqa: F401  (keeps the package importable check honest)
from broker.cli import admin, health, kube, server, storage, tools, users


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="skiff", description="Skiff: a Kafka-compatible broker")
    parser.add_argument("--version", action="version", version="skiff 0.1.0")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    storage.add_parser(sub)
    server.add_parsers(sub)
    tools.add_parser(sub)
    admin.add_parsers(sub)
    health.add_parser(sub)
    users.add_parser(sub)
    kube.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    handler = getattr(args, "handler", None)
    if handler is not None:
        return int(handler(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
