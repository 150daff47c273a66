"""NodeConfig, the parsed and checked config of one node (built from its sources by
loading.py: load_config, build_config)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from broker.config.definitions import BROKER_CONFIGS

if TYPE_CHECKING:
    from broker.config.listeners import Listener, Voter

# -- the node config -----------------------------------------------------------


@dataclass
class NodeConfig:
    """Parsed, validated config of one node. `cfg["num.partitions"]` gives the typed value."""

    values: dict[str, Any]
    originals: dict[str, str]          # what was explicitly set (known and unknown keys)
    origin: dict[str, str]             # key -> "file" | "override" | "env"
    warnings: list[str] = field(default_factory=list)
    # derived
    process_roles: frozenset[str] = frozenset()
    node_id: int = -1
    voters: list[Voter] = field(default_factory=list)
    bootstrap_servers: list[tuple[str, int]] = field(default_factory=list)
    listeners: list[Listener] = field(default_factory=list)
    advertised_listeners: list[Listener] = field(default_factory=list)
    security_protocol_map: dict[str, str] = field(default_factory=dict)
    controller_listener_names: list[str] = field(default_factory=list)
    inter_broker_listener_name: str = "PLAINTEXT"
    log_dirs: list[Path] = field(default_factory=list)
    metadata_log_dir: Path = Path()

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    @property
    def is_broker(self) -> bool:
        return "broker" in self.process_roles

    @property
    def is_controller(self) -> bool:
        return "controller" in self.process_roles

    def is_set(self, key: str) -> bool:
        """Whether a key was given explicitly (STATIC_BROKER_CONFIG) rather than defaulted."""
        return key in self.originals

    def listener(self, name: str) -> Listener | None:
        for lst in self.listeners:
            if lst.name == name:
                return lst
        return None

    @property
    def broker_listeners(self) -> list[Listener]:
        return [x for x in self.listeners if x.name not in self.controller_listener_names]

    @property
    def controller_listeners(self) -> list[Listener]:
        return [x for x in self.listeners if x.name in self.controller_listener_names]

    def all_directories(self) -> list[Path]:
        """Every log dir plus the metadata log dir, without duplicates, in order."""
        out: list[Path] = []
        for d in [*self.log_dirs, self.metadata_log_dir]:
            if d not in out:
                out.append(d)
        return out

    def summary(self) -> dict[str, Any]:
        """Explicitly-set known keys and a few essentials, for the startup log line."""
        keys = {"process.roles", "node.id", "listeners", "log.dirs"} | set(self.originals)
        return {k: self.values[k] for k in sorted(keys)
                if k in self.values and not BROKER_CONFIGS[k].sensitive}


def listener_scoped(cfg: NodeConfig, key: str) -> dict[str, Any]:
    """{LISTENER NAME: parsed value} of `listener.name.<l>.<key>` settings."""
    out: dict[str, Any] = {}
    for k, v in cfg.originals.items():
        if k.lower().startswith("listener.name."):
            name, _, base = k[len("listener.name."):].partition(".")
            if base == key:
                out[name.upper()] = BROKER_CONFIGS[key].parse(v)
    return out
