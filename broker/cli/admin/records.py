"""`skiff produce` and `skiff consume`."""

from __future__ import annotations

import argparse
import base64
import json
import sys
from collections.abc import Iterable
from typing import TextIO

from broker.cli.admin.common import EXIT_OK, Client, UsageError, _kv, print_json, to_json

# ---- produce and consume -----------------------------------------------------------------


def _decode_value(text: str, fmt: str) -> bytes:
    if fmt == "base64":
        try:
            return base64.b64decode(text, validate=True)
        except ValueError:
            raise UsageError(f"not base64: {text[:40]!r}") from None
    if fmt == "hex":
        try:
            return bytes.fromhex(text)
        except ValueError:
            raise UsageError(f"not hex: {text[:40]!r}") from None
    return text.encode()


def _encode_value(raw: bytes | None, fmt: str) -> str | None:
    if raw is None:
        return None
    if fmt == "base64":
        return base64.b64encode(raw).decode()
    if fmt == "hex":
        return raw.hex()
    return raw.decode("utf-8", errors="backslashreplace")


def cmd_produce(c: Client, args: argparse.Namespace, out: TextIO) -> int:
    pb = c.pb.records
    headers = [pb.Header(key=k, value=v.encode())
               for k, v in _kv(args.header, "--header").items()]
    lines: Iterable[str] = args.value if args.value else sys.stdin
    recs = []
    for line in lines:
        line = line.rstrip("\n")
        if not line and not args.value:
            continue
        r = pb.ProducerRecord(headers=headers)
        if args.parse_key:
            key, sep, value = line.partition(args.key_separator)
            if not sep:
                raise UsageError(f"no key separator {args.key_separator!r} in {line[:40]!r}")
            r.key = _decode_value(key, args.format)
            line = value
        if not (args.null_marker is not None and line == args.null_marker):
            r.value = _decode_value(line, args.format)
        if args.partition is not None:
            r.partition = args.partition
        recs.append(r)
    if not recs:
        raise UsageError("no records: give --value or lines on stdin")
    # The node's own replication timeout ends before the call's deadline, so a slow ISR is
    # reported as such rather than as a silent deadline.
    resp = c.call(c.records.Produce, pb.ProduceRequest(
        topic=args.topic, records=recs, acks=args.acks,
        timeout_ms=max(1, int(c.timeout_s * 800))))
    if args.output == "json":
        print_json(to_json(resp), out)
    else:
        for r in resp.records:
            out.write(f"{args.topic}-{r.partition}@{r.offset}\n")
    return EXIT_OK


def cmd_consume(c: Client, args: argparse.Namespace, out: TextIO) -> int:
    pb = c.pb.records
    req = pb.ConsumeRequest(topic=args.topic, max_records=args.max_messages,
                            max_wait_ms=args.timeout_ms)
    if args.partition is not None:
        req.partitions.append(args.partition)
    if args.offset is not None:
        if args.partition is None:
            raise UsageError("--offset needs --partition")
        req.offset = args.offset
    elif args.from_timestamp is not None:
        req.timestamp_ms = args.from_timestamp
    else:
        req.position = (pb.START_POSITION_EARLIEST if args.from_beginning
                        else pb.START_POSITION_LATEST)
    # The stream ends by itself (max records, or max_wait_ms without a new record): the
    # deadline only has to cover the waiting.
    stream = c.records.Consume(req, timeout=c.timeout_s + args.timeout_ms / 1000,
                               metadata=c.metadata)
    count = 0
    for r in stream:
        count += 1
        if args.output == "json":
            out.write(json.dumps({
                "topic": r.topic, "partition": r.partition, "offset": r.offset,
                "timestamp": r.timestamp_ms, "timestamp_type": r.timestamp_type,
                "key": _encode_value(r.key if r.HasField("key") else None, args.format),
                "value": _encode_value(r.value if r.HasField("value") else None, args.format),
                "headers": {h.key: _encode_value(h.value if h.HasField("value") else None,
                                                 args.format) for h in r.headers},
            }) + "\n")
            continue
        parts = []
        if args.print_partition:
            parts.append(f"Partition:{r.partition}")
        if args.print_offset:
            parts.append(f"Offset:{r.offset}")
        if args.print_timestamp:
            parts.append(f"{r.timestamp_type}:{r.timestamp_ms}")
        if args.print_headers:
            parts.append(",".join(
                f"{h.key}:{_encode_value(h.value if h.HasField('value') else None, args.format)}"
                for h in r.headers) or "NO_HEADERS")
        if args.print_key:
            parts.append(str(_encode_value(r.key, args.format)) if r.HasField("key") else "null")
        parts.append(str(_encode_value(r.value, args.format)) if r.HasField("value") else "null")
        out.write("\t".join(parts) + "\n")
        out.flush()
    if args.output != "json":
        print(f"Processed a total of {count} messages", file=sys.stderr)
    return EXIT_OK
