"""`skiff tools ...`: operator tools that read files directly (no running node needed)."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def add_parser(sub: Any) -> None:
    tools = sub.add_parser("tools", help="operator tools: dump-log")
    tools.add_argument("tool", choices=["dump-log"], help="dump-log: print and verify segments")
    tools.add_argument("args", nargs=argparse.REMAINDER, help="the tool's own arguments")
    tools.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.tool == "dump-log":
        from broker.log.dump import main as dump_log

        return dump_log(list(args.args))
    print(f"unknown tool {args.tool}", file=sys.stderr)
    return 2
