"""The cross-field checks of a node's config, as KafkaConfig's KRaft checks make them, and
what they derive (roles, listeners, voters, directories)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from broker.config.definitions import SECURITY_PROTOCOLS
from broker.config.listeners import _LISTENER, _host_port, parse_listeners, parse_voters
from broker.config.types import ConfigError

if TYPE_CHECKING:
    from broker.config.node_config import NodeConfig

def _derive_and_check(cfg: NodeConfig, explicit: set[str]) -> None:
    v = cfg.values
    roles = v["process.roles"]
    if not roles:
        raise ConfigError("process.roles", ",".join(roles),
                          "a non-empty list of roles: broker, controller, or broker,controller")
    if len(set(roles)) != len(roles):
        raise ConfigError("process.roles", ",".join(roles), "each role at most once")
    cfg.process_roles = frozenset(roles)
    if v["node.id"] < 0:
        raise ConfigError("node.id", v["node.id"], "a non-negative node id (required in KRaft)")
    cfg.node_id = v["node.id"]

    # security protocol map
    pmap: dict[str, str] = {}
    for item in v["listener.security.protocol.map"]:
        name, sep, proto = item.partition(":")
        if not sep or not name.strip():
            raise ConfigError("listener.security.protocol.map", ",".join(
                v["listener.security.protocol.map"]), f"{item!r} is not NAME:PROTOCOL")
        proto = proto.strip().upper()
        if proto not in SECURITY_PROTOCOLS:
            raise ConfigError("listener.security.protocol.map", item,
                              f"a security protocol among {', '.join(SECURITY_PROTOCOLS)}")
        pmap[name.strip().upper()] = proto
    cfg.controller_listener_names = [n.upper() for n in v["controller.listener.names"]]
    if "listener.security.protocol.map" not in explicit:
        # As Kafka does in KRaft: controller listeners not in the default map use PLAINTEXT.
        for n in cfg.controller_listener_names:
            pmap.setdefault(n, "PLAINTEXT")
    cfg.security_protocol_map = pmap
    if not cfg.controller_listener_names:
        raise ConfigError("controller.listener.names", "",
                          "at least one listener name (required when process.roles is set)")
    for n in cfg.controller_listener_names:
        if n not in pmap:
            raise ConfigError("controller.listener.names", n,
                              "a name with an entry in listener.security.protocol.map")

    for item in v["listeners"]:
        if not _LISTENER.match(item.strip()):
            raise ConfigError("listeners", ",".join(v["listeners"]),
                              f"{item!r} is not a listener of the form NAME://host:port")
    raw_names = [item.strip().split("://", 1)[0].upper() for item in v["listeners"]]
    if cfg.is_controller and not any(n in raw_names for n in cfg.controller_listener_names):
        raise ConfigError(
            "controller.listener.names", ",".join(cfg.controller_listener_names),
            "at least one value appearing in listeners "
            f"({','.join(v['listeners'])}) because process.roles contains controller")
    cfg.listeners = parse_listeners("listeners", v["listeners"], pmap)
    from broker.security.settings import refuse_unsupported_listeners

    refuse_unsupported_listeners("listeners", cfg.listeners)  # never served as PLAINTEXT
    ports = [x.port for x in cfg.listeners if x.port != 0]
    if len(set(ports)) != len(ports):
        raise ConfigError("listeners", ",".join(v["listeners"]), "each listener on its own port")
    listener_names = [x.name for x in cfg.listeners]

    # voters / bootstrap servers
    cfg.voters = parse_voters("controller.quorum.voters", v["controller.quorum.voters"])
    cfg.bootstrap_servers = [
        _host_port("controller.quorum.bootstrap.servers",
                   ",".join(v["controller.quorum.bootstrap.servers"]), s.strip())
        for s in v["controller.quorum.bootstrap.servers"]
    ]
    if not cfg.voters and not cfg.bootstrap_servers:
        raise ConfigError("controller.quorum.voters", "",
                          "either controller.quorum.voters (id@host:port,...) or "
                          "controller.quorum.bootstrap.servers must be set")
    voter_ids = {x.node_id for x in cfg.voters}


    if cfg.is_controller:
        if cfg.voters and cfg.node_id not in voter_ids:
            raise ConfigError(
                "controller.quorum.voters", ",".join(v["controller.quorum.voters"]),
                f"the set of voters to include node.id {cfg.node_id} "
                "because process.roles contains controller")
        if not cfg.is_broker:
            extra = [n for n in listener_names if n not in cfg.controller_listener_names]
            if extra:
                raise ConfigError(
                    "listeners", ",".join(v["listeners"]),
                    "only controller listeners when process.roles=controller "
                    f"(found {','.join(extra)})")
    else:
        if cfg.node_id in voter_ids:
            raise ConfigError(
                "controller.quorum.voters", ",".join(v["controller.quorum.voters"]),
                f"a set of voters that does not include node.id {cfg.node_id}, because "
                "process.roles contains just the broker role")
        clash = [n for n in cfg.controller_listener_names if n in listener_names]
        if clash:
            raise ConfigError(
                "controller.listener.names", ",".join(cfg.controller_listener_names),
                "names that do not appear in listeners when process.roles=broker "
                f"(found {','.join(clash)})")

    if cfg.is_broker:
        if v["inter.broker.listener.name"] is not None and "security.inter.broker.protocol" in \
                explicit:
            raise ConfigError("inter.broker.listener.name", v["inter.broker.listener.name"],
                              "not to be set together with security.inter.broker.protocol")
        ibl = v["inter.broker.listener.name"]
        if ibl is None:
            proto = v["security.inter.broker.protocol"]
            ibl = next((x.name for x in cfg.broker_listeners if x.security_protocol == proto),
                       proto)
        ibl = ibl.upper()
        if ibl in cfg.controller_listener_names:
            raise ConfigError("inter.broker.listener.name", ibl,
                              "a broker listener, not one of controller.listener.names")
        if ibl not in listener_names:
            raise ConfigError("inter.broker.listener.name", ibl,
                              "a listener name that appears in listeners "
                              f"({','.join(listener_names)})")
        cfg.inter_broker_listener_name = ibl
        if not cfg.broker_listeners:
            raise ConfigError("listeners", ",".join(v["listeners"]),
                              "at least one non-controller listener for the broker role")

    if v["advertised.listeners"] is not None:
        adv = parse_listeners("advertised.listeners", v["advertised.listeners"], pmap)
        for a in adv:
            if a.host in ("0.0.0.0", "::"):
                raise ConfigError("advertised.listeners", ",".join(v["advertised.listeners"]),
                                  f"a routable host, not the meta-address {a.host}")
            if a.name not in listener_names:
                raise ConfigError("advertised.listeners", ",".join(v["advertised.listeners"]),
                                  f"listener {a.name} to appear in listeners")
        named = {a.name for a in adv}
        # listeners not advertised explicitly are advertised as they are bound
        cfg.advertised_listeners = adv + [x for x in cfg.listeners if x.name not in named]
    else:
        cfg.advertised_listeners = list(cfg.listeners)

    dirs = v["log.dirs"] if v["log.dirs"] is not None else [v["log.dir"]]
    dirs = [d for d in dirs if d]
    if not dirs:
        raise ConfigError("log.dirs", ",".join(v["log.dirs"] or []), "at least one directory")
    if len(set(dirs)) != len(dirs):
        raise ConfigError("log.dirs", ",".join(dirs), "each directory once")
    cfg.log_dirs = [Path(d) for d in dirs]
    cordoned = [d for d in (v.get("cordoned.log.dirs") or []) if d]
    if "*" in cordoned and len(cordoned) > 1:  # Kafka's KafkaConfig.validateCordonedLogDirs
        raise ConfigError("cordoned.log.dirs", ",".join(cordoned),
                          "requirement failed: When cordoned.log.dirs is set to *, it must not "
                          "contain other values")
    missing = [d for d in cordoned if d != "*" and d not in dirs]
    if missing:
        raise ConfigError("cordoned.log.dirs", ",".join(cordoned),
                          "requirement failed: All entries in cordoned.log.dirs must be present "
                          f"in log.dirs or log.dir. Missing entries : {','.join(missing)}")
    cfg.metadata_log_dir = Path(v["metadata.log.dir"]) if v["metadata.log.dir"] else \
        cfg.log_dirs[0]

    if v["broker.heartbeat.interval.ms"] >= v["broker.session.timeout.ms"]:
        raise ConfigError("broker.heartbeat.interval.ms", v["broker.heartbeat.interval.ms"],
                          "less than broker.session.timeout.ms "
                          f"({v['broker.session.timeout.ms']})")
    # Kafka 4.4's GroupCoordinatorConfig requirements for the streams group settings
    for key, bound, above in (
            ("group.streams.task.offset.interval.ms",
             "group.streams.min.task.offset.interval.ms", True),
            ("group.streams.num.warmup.replicas", "group.streams.max.warmup.replicas", False)):
        if (v[key] < v[bound]) if above else (v[key] > v[bound]):
            raise ConfigError(key, v[key], f"must be {'greater' if above else 'less'} than or "
                                           f"equal to {bound} ({v[bound]})")
    for kind in ("consumer", "share", "streams"):  # Kafka's GroupCoordinatorConfig checks
        interval, low, high = (f"group.{kind}.assignment.interval.ms",
                               f"group.{kind}.min.assignment.interval.ms",
                               f"group.{kind}.max.assignment.interval.ms")
        for key, bound, ok, words in ((high, low, v[high] >= v[low], "greater than or equal"),
                                      (interval, low, v[interval] >= v[low],
                                       "greater than or equal"),
                                      (interval, high, v[interval] <= v[high],
                                       "less than or equal")):
            if not ok:
                raise ConfigError(key, v[key],
                                  f"requirement failed: {key} must be {words} to {bound}")
    if v["socket.request.max.bytes"] < v["message.max.bytes"]:
        cfg.warnings.append("socket.request.max.bytes is smaller than message.max.bytes: "
                            "produce requests near the message limit will be refused")
    _check_workers(cfg)


def _check_workers(cfg: NodeConfig) -> None:
    """skiff.broker.workers (broker/node/shards.py): what a broker of several workers does
    not serve yet is refused here, never run as if it were."""
    workers = cfg.values["skiff.broker.workers"]
    if workers == 1:
        return
    key = "skiff.broker.workers"
    if not cfg.is_broker:
        raise ConfigError(key, workers, "1 on a node without the broker role (workers split "
                                        "a broker's partitions)")
    cpus = os.cpu_count() or 1
    if workers > 4 * cpus:
        raise ConfigError(key, workers, f"at most 4 per core ({cpus} cores here)")
