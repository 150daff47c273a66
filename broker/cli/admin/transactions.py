"""`skiff transactions list|describe|abort` (what kafka-transactions.sh does through the
transaction coordinators)."""

from __future__ import annotations

import argparse
from typing import TextIO

from broker.cli.admin.common import EXIT_OK, Client, _when, print_json, print_table, to_json


def cmd_transactions_list(c: Client, args: argparse.Namespace, out: TextIO) -> int:
    t = c.pb.transactions
    resp = c.call(c.transactions.ListTransactions, t.ListTransactionsRequest(
        states=args.state or [], producer_ids=args.producer_id or [],
        min_duration_ms=args.min_duration_ms or 0))
    if args.output == "json":
        print_json(to_json(resp), out)
    else:
        print_table(["TRANSACTIONAL-ID", "COORDINATOR", "PRODUCER-ID", "STATE"],
                    ([x.transactional_id, x.coordinator_id, x.producer_id, x.state]
                     for x in resp.transactions), out)
    return EXIT_OK


def cmd_transactions_describe(c: Client, args: argparse.Namespace, out: TextIO) -> int:
    t = c.pb.transactions
    resp = c.call(c.transactions.DescribeTransaction,
                  t.DescribeTransactionRequest(transactional_id=args.transactional_id))
    if args.output == "json":
        print_json(to_json(resp), out)
        return EXIT_OK
    parts = ",".join(f"{p.topic}-{p.partition}" for p in resp.partitions) or "-"
    start = _when(resp.start_time_ms)
    print_table(["TRANSACTIONAL-ID", "COORDINATOR", "PRODUCER-ID", "EPOCH", "STATE",
                 "TIMEOUT-MS", "START-TIME", "PARTITIONS"],
                [[resp.transactional_id, resp.coordinator_id, resp.producer_id,
                  resp.producer_epoch, resp.state, resp.timeout_ms, start, parts]], out)
    return EXIT_OK


def cmd_transactions_abort(c: Client, args: argparse.Namespace, out: TextIO) -> int:
    t = c.pb.transactions
    resp = c.call(c.transactions.AbortTransaction,
                  t.AbortTransactionRequest(transactional_id=args.transactional_id))
    if args.output == "json":
        print_json(to_json(resp), out)
    else:
        out.write(f"Aborting the transaction of {resp.transactional_id} (producer "
                  f"{resp.producer_id} fenced at epoch {resp.producer_epoch}).\n")
    return EXIT_OK


def cmd_transactions_find_hanging(c: Client, args: argparse.Namespace, out: TextIO) -> int:
    t = c.pb.transactions
    resp = c.call(c.transactions.FindHangingTransactions, t.FindHangingTransactionsRequest(
        max_transaction_timeout_ms=args.max_transaction_timeout_ms or 0))
    if args.output == "json":
        print_json(to_json(resp), out)
    else:
        print_table(["TOPIC", "PARTITION", "PRODUCER-ID", "EPOCH", "START-OFFSET",
                     "LAST-TIMESTAMP", "LEADER", "TRANSACTIONAL-ID", "COORDINATOR-STATE"],
                    ([h.topic, h.partition, h.producer_id, h.producer_epoch, h.start_offset,
                      _when(h.last_timestamp_ms), h.leader_id, h.transactional_id or "-",
                      h.coordinator_state or "-"] for h in resp.transactions), out)
    return EXIT_OK


def cmd_producers_describe(c: Client, args: argparse.Namespace, out: TextIO) -> int:
    t = c.pb.transactions
    resp = c.call(c.transactions.DescribeProducers,
                  t.DescribeProducersRequest(topic=args.topic, partition=args.partition))
    if args.output == "json":
        print_json(to_json(resp), out)
    else:
        print_table(["PRODUCER-ID", "EPOCH", "LAST-SEQUENCE", "LAST-TIMESTAMP",
                     "COORDINATOR-EPOCH", "CURRENT-TXN-START-OFFSET"],
                    ([p.producer_id, p.producer_epoch, p.last_sequence,
                      _when(p.last_timestamp_ms), p.coordinator_epoch,
                      p.current_txn_start_offset] for p in resp.producers), out)
    return EXIT_OK
