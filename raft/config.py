"""KRaft quorum configuration, under Kafka's own property names.

Defaults are tuned for fast failover on a LAN (see docs/raft.md): Kafka ships
election.timeout 1000 ms and fetch.timeout 2000 ms, which put a leader's death
2-3 s from a new leader; here a follower notices a silent leader after 500 ms
and elects within a few hundred more.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from raft.core import CoreConfig


class ConfigError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class VoterAddress:
    node_id: int
    host: str
    port: int


def parse_voters(value: str) -> dict[int, VoterAddress]:
    """`controller.quorum.voters`: comma-separated `id@host:port`."""
    voters: dict[int, VoterAddress] = {}
    for item in filter(None, (v.strip() for v in value.split(","))):
        node, sep, addr = item.partition("@")
        host, colon, port = addr.rpartition(":")
        if not sep or not colon or not node.isdigit() or not port.isdigit() or not host:
            raise ConfigError(f"controller.quorum.voters: bad entry {item!r} (want id@host:port)")
        nid = int(node)
        if nid in voters:
            raise ConfigError(f"controller.quorum.voters: node {nid} listed twice")
        if not 0 < int(port) < 65536:
            raise ConfigError(f"controller.quorum.voters: bad port in {item!r}")
        voters[nid] = VoterAddress(nid, host.strip("[]"), int(port))
    return voters


def parse_bootstrap_servers(value: str) -> tuple[VoterAddress, ...]:
    """`controller.quorum.bootstrap.servers`: comma-separated `host:port` (KIP-853)."""
    out: list[VoterAddress] = []
    for item in filter(None, (v.strip() for v in value.split(","))):
        host, colon, port = item.rpartition(":")
        if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(f"controller.quorum.bootstrap.servers: bad entry {item!r} "
                              "(want host:port)")
        out.append(VoterAddress(-(len(out) + 1), host.strip("[]"), int(port)))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class RaftConfig:
    node_id: int
    voters: dict[int, VoterAddress] = field(default_factory=dict)
    bootstrap_servers: tuple[VoterAddress, ...] = ()
    election_timeout_ms: int = 500
    fetch_timeout_ms: int = 500
    election_backoff_max_ms: int = 200
    append_linger_ms: int = 25
    request_timeout_ms: int = 2000
    retry_backoff_ms: int = 20
    fetch_max_wait_ms: int = 200
    log_dir: str = ""
    max_record_bytes_between_snapshots: int = 20 * 1024 * 1024
    max_idle_interval_ms: int = 500
    # the most a follower asks for in one FetchSnapshot, and a leader answers with
    fetch_snapshot_max_bytes: int = 1 << 20
    cluster_id: str | None = None

    KEYS = {
        "node.id": "node_id",
        "controller.quorum.voters": "voters",
        "controller.quorum.bootstrap.servers": "bootstrap_servers",
        "controller.quorum.election.timeout.ms": "election_timeout_ms",
        "controller.quorum.fetch.timeout.ms": "fetch_timeout_ms",
        "controller.quorum.election.backoff.max.ms": "election_backoff_max_ms",
        "controller.quorum.append.linger.ms": "append_linger_ms",
        "controller.quorum.request.timeout.ms": "request_timeout_ms",
        "controller.quorum.retry.backoff.ms": "retry_backoff_ms",
        "metadata.log.dir": "log_dir",
        "metadata.log.max.record.bytes.between.snapshots": "max_record_bytes_between_snapshots",
        "metadata.max.idle.interval.ms": "max_idle_interval_ms",
        "controller.quorum.fetch.snapshot.max.bytes": "fetch_snapshot_max_bytes",
        "cluster.id": "cluster_id",
    }

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> RaftConfig:
        """Read the keys this module knows; others belong to someone else."""
        kwargs: dict[str, object] = {}
        for key, attr in cls.KEYS.items():
            if key not in props:
                continue
            raw = props[key].strip()
            if attr == "voters":
                kwargs[attr] = parse_voters(raw)
            elif attr == "bootstrap_servers":
                kwargs[attr] = parse_bootstrap_servers(raw)
            elif attr in ("log_dir", "cluster_id"):
                kwargs[attr] = raw
            else:
                try:
                    n = int(raw)
                except ValueError:
                    raise ConfigError(f"{key}: not an integer: {raw!r}") from None
                if n < 0 or (attr != "node_id" and attr.endswith("_ms") and n > 3_600_000):
                    raise ConfigError(f"{key}: out of range: {n}")
                kwargs[attr] = n
        if "node_id" not in kwargs:
            raise ConfigError("node.id is required")
        cfg = cls(**kwargs)  # type: ignore[arg-type]
        cfg.validate()
        return cfg

    def validate(self) -> None:
        if not self.voters and not self.bootstrap_servers:
            raise ConfigError("controller.quorum.voters or controller.quorum.bootstrap.servers "
                              "is required")
        if self.voters and self.bootstrap_servers:
            # Kafka's rule: one or the other, so a node never mixes static and dynamic views
            raise ConfigError("set controller.quorum.voters or "
                              "controller.quorum.bootstrap.servers, not both")
        if self.election_timeout_ms <= 0 or self.fetch_timeout_ms <= 0:
            raise ConfigError("election and fetch timeouts must be positive")
        if self.fetch_max_wait_ms >= self.fetch_timeout_ms:
            raise ConfigError("controller.quorum.fetch.timeout.ms must exceed the fetch wait "
                              f"({self.fetch_max_wait_ms} ms)")

    def core_config(self) -> CoreConfig:
        return CoreConfig(
            election_timeout_ms=self.election_timeout_ms,
            fetch_timeout_ms=self.fetch_timeout_ms,
            election_backoff_max_ms=max(1, self.election_backoff_max_ms),
            fetch_max_wait_ms=self.fetch_max_wait_ms,
            request_timeout_ms=self.request_timeout_ms,
            retry_backoff_ms=max(1, self.retry_backoff_ms),
            snapshot_chunk_bytes=max(1, self.fetch_snapshot_max_bytes),
            leader_async_flush=True,
            hw_notify_delay_ms=5,
        )
