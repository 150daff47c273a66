"""`skiff cluster describe|unregister`, `skiff quorum describe|add-controller|remove-controller`."""

from __future__ import annotations

import argparse
from typing import TextIO

from broker.cli.admin.common import (
    EXIT_OK,
    Client,
    UsageError,
    _when,
    print_json,
    print_table,
    to_json,
)

# ---- cluster and quorum --------------------------------------------------------------


def cmd_cluster_describe(c: Client, args: argparse.Namespace, out: TextIO) -> int:
    pb = c.pb
    resp = c.call(c.cluster.DescribeCluster, pb.cluster.DescribeClusterRequest())
    if args.output == "json":
        print_json(to_json(resp), out)
        return EXIT_OK
    out.write(f"ClusterId:       {resp.cluster_id}\n")
    out.write(f"ControllerId:    {resp.controller_id}\n")
    out.write(f"MetadataOffset:  {resp.metadata_offset} (epoch {resp.metadata_epoch})\n")
    feats = ", ".join(f"{f.name}={f.feature_level}" for f in resp.finalized_features)
    out.write(f"Features:        {feats or '-'}\n\n")
    states = {v: k.removeprefix("BROKER_STATE_").replace("_", " ").lower()
              for k, v in pb.cluster.BrokerState.items()}
    print_table(
        ["BROKER", "STATE", "EPOCH", "CONTROLLER", "LEADERS", "REPLICAS", "RACK", "ENDPOINTS"],
        ([b.registration.broker_id, states[b.state], b.registration.broker_epoch,
          "yes" if b.is_controller else "", b.leader_count, b.replica_count,
          b.registration.rack if b.registration.HasField("rack") else "-",
          [f"{e.name}://{e.host}:{e.port}" for e in b.registration.endpoints]]
         for b in resp.brokers), out)
    return EXIT_OK


def cmd_cluster_unregister(c: Client, args: argparse.Namespace, out: TextIO) -> int:
    c.call(c.cluster.UnregisterBroker, c.pb.cluster.UnregisterBrokerRequest(broker_id=args.id))
    out.write(f"Broker {args.id} is no longer registered.\n")
    return EXIT_OK


def cmd_quorum_describe(c: Client, args: argparse.Namespace, out: TextIO) -> int:
    resp = c.call(c.quorum.DescribeQuorum, c.pb.cluster.DescribeQuorumRequest())
    if args.output == "json":
        print_json(to_json(resp), out)
        return EXIT_OK
    out.write(f"ClusterId:              {resp.cluster_id}\n")
    out.write(f"LeaderId:               {resp.leader_id}\n")
    out.write(f"LeaderEpoch:            {resp.leader_epoch}\n")
    out.write(f"HighWatermark:          {resp.high_watermark}\n")
    out.write(f"MaxFollowerLag:         {resp.max_follower_lag}\n")
    out.write(f"MaxFollowerLagTimeMs:   {resp.max_follower_lag_time_ms}\n")
    out.write(f"CurrentVoters:          {[v.replica_id for v in resp.voters]}\n")
    out.write(f"CurrentObservers:       {[o.replica_id for o in resp.observers]}\n\n")
    rows = []
    for kind, reps in (("Voter", resp.voters), ("Observer", resp.observers)):
        for r in reps:
            status = "Leader" if r.replica_id == resp.leader_id else (
                "Follower" if kind == "Voter" else "Observer")
            rows.append([r.replica_id, r.directory_id or "-", r.log_end_offset, r.lag,
                         _when(r.last_fetch_timestamp_ms),
                         _when(r.last_caught_up_timestamp_ms), status])
    print_table(["NODE", "DIRECTORY ID", "LOG END OFFSET", "LAG", "LAST FETCH",
                 "LAST CAUGHT UP", "STATUS"], rows, out)
    return EXIT_OK


def cmd_quorum_add_controller(c: Client, args: argparse.Namespace, out: TextIO) -> int:
    """As `kafka-metadata-quorum --command-config controller.properties add-controller`: the
    controller to add is the one that `--config` describes (node.id, its controller
    listener, the directory id in its metadata log dir's meta.properties); it must already
    run as an observer of the quorum and have caught up."""
    import os

    from broker.config import ConfigError, load_config
    from broker.metadata.storage import StorageError, read_meta_properties

    try:
        cfg = load_config(args.config, args.override, os.environ)
        meta = read_meta_properties(cfg.metadata_log_dir)
    except (ConfigError, StorageError) as exc:
        raise UsageError(str(exc)) from None
    if not cfg.is_controller or not cfg.controller_listeners:
        raise UsageError(f"{args.config}: process.roles has no controller role or no "
                         "controller listener")
    if meta is None or not meta.directory_id:
        raise UsageError(f"{cfg.metadata_log_dir} is not formatted (no directory.id): run "
                         "`skiff storage format --no-initial-controllers` first")
    pb = c.pb.cluster
    lst = cfg.controller_listeners[0]
    adv = next((a for a in cfg.advertised_listeners if a.name == lst.name), None)
    host = (adv.host if adv is not None else lst.host) or "localhost"
    port = adv.port if adv is not None else lst.port
    resp = c.call(c.quorum.AddController, pb.AddControllerRequest(
        controller_id=cfg.node_id, directory_id=meta.directory_id,
        endpoints=[pb.ControllerEndpoint(name=lst.name, host=host, port=port)],
        timeout_ms=int(args.timeout * 1000)))
    out.write(f"Added controller {cfg.node_id} with directory id {meta.directory_id} "
              f"({lst.name}://{host}:{port}); quorum leader {resp.leader_id}\n")
    return EXIT_OK


def cmd_quorum_remove_controller(c: Client, args: argparse.Namespace, out: TextIO) -> int:
    """As `kafka-metadata-quorum remove-controller --controller-id N
    --controller-directory-id D`."""
    resp = c.call(c.quorum.RemoveController, c.pb.cluster.RemoveControllerRequest(
        controller_id=args.controller_id, directory_id=args.controller_directory_id,
        timeout_ms=int(args.timeout * 1000)))
    out.write(f"Removed controller {args.controller_id} with directory id "
              f"{args.controller_directory_id}; quorum leader {resp.leader_id}\n")
    return EXIT_OK
