"""The admin verbs of `skiff`, over the gRPC admin API (skiff.admin.v1).

    skiff topics create|delete|list|describe|alter
    skiff partitions reassign|elect-leaders|reassignments
    skiff groups list|describe|reset-offsets|delete
    skiff transactions list|describe|abort|find-hanging
    skiff producers describe
    skiff cluster describe      skiff quorum describe
    skiff configs get|set|delete
    skiff produce               skiff consume

The admin address is `--bootstrap HOST:PORT`, else $SKIFF_ADMIN, else 127.0.0.1:9094.
Output is a table unless `--output json`. Exit codes: 0 success; 1 the cluster refused
(unknown topic, already exists, an invalid argument, not supported yet, ...); 2 a usage
error the command finds itself (exit 2 is never a server's answer); 3 the admin API
could not be reached or is not ready (unreachable, unavailable, timed out). Failures print
one line, `skiff: error: <reason>`, on stderr.
"""

from __future__ import annotations

from broker.cli.admin.parser import add_parsers as add_parsers
from broker.cli.admin.parser import run as run
