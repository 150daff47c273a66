"""A private test network of Linux network namespaces, and packet-drop faults on it.

    net = TestNetwork.create()                 # bridge namespace, nothing in the root ns
    a = net.add_host("n1", 11)                 # namespace <prefix>-n1, eth0 10.213.0.11/24
    net.run_in("n1", ["ip", "addr"])           # `ip netns exec <ns> ...`
    net.set_blocked({("n1", "n2"), ("n2", "n1")})   # drop n1 -> n2 and n2 -> n1 (one atomic set)
    net.partition([["n1"], ["n2", "n3"]])      # drop every packet between the groups
    net.heal()                                 # forward everything again
    net.destroy()                              # delete every namespace this object made

Layout. A bridge `br0` lives in a namespace of its own (`<prefix>-br`); each host is a
namespace whose `eth0` is one end of a veth pair, the other end enslaved to `br0` in the
bridge namespace. The pair is created from inside the bridge namespace, so no interface,
address or route ever appears in the root namespace, and 10.213.0.0/24 exists only behind
the bridge: no packet of the test can leave these namespaces.

Faults. One nftables table of the `bridge` family in the bridge namespace drops IPv4
packets whose (source, destination) pair is in the set `blocked`. The drop happens on the
"wire", as a real partition: the sender's TCP keeps retransmitting into the void and gets
no error, unlike a drop in the sender's own output hook. ARP still passes, as it would
through a switch with an IP filter. Replacing the set is one nft transaction, so a change
of partition never passes through an all-open or all-closed state.

Every namespace name starts with `skp<pid>-` (the creating process), so stale ones left
by a killed test run are recognised and removed by `remove_stale()` (only those whose
process is gone). Commands have time bounds; failures carry the command's stderr.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

SUBNET = "10.213.0"
PREFIX_RE = re.compile(r"^skp(\d+)-")
CMD_TIMEOUT_S = 20.0


class NetnsUnavailable(RuntimeError):
    """Why this machine cannot host the test network (not root, no `ip netns`, no nft)."""


def _run(args: Sequence[str], stdin: str | None = None) -> str:
    proc = subprocess.run(list(args), input=stdin, capture_output=True, text=True,
                          timeout=CMD_TIMEOUT_S, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({proc.returncode}): "
                           f"{proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout


def unavailable_reason() -> str | None:
    """None when namespaces, veth pairs, a bridge and nftables all work here; otherwise why
    not (for a pytest skip)."""
    if os.geteuid() != 0:
        return "network namespaces need root (run as root, as CI does)"
    for tool in ("ip", "nft"):
        if shutil.which(tool) is None:
            return f"`{tool}` is not installed (apt-get install iproute2 nftables)"
    probe = f"skp{os.getpid()}-probe"
    try:
        _run(["ip", "netns", "add", probe])
        try:
            _run(["ip", "-n", probe, "link", "add", "br0", "type", "bridge"])
            _run(["ip", "netns", "exec", probe, "nft", "-f", "-"], stdin=_ruleset())
        finally:
            _run(["ip", "netns", "del", probe])
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        return f"cannot build a namespace with a bridge and nftables here: {exc}"
    return None


def _ruleset() -> str:
    return """
table bridge skiff_chaos {
    set blocked { type ipv4_addr . ipv4_addr; }
    chain forward {
        type filter hook forward priority 0; policy accept;
        ip saddr . ip daddr @blocked drop
    }
}
"""


def remove_stale() -> list[str]:
    """Delete namespaces named by this module for processes that no longer exist."""
    removed = []
    for name in list_namespaces():
        m = PREFIX_RE.match(name)
        if m is None:
            continue
        pid = int(m.group(1))
        try:
            os.kill(pid, 0)
            continue  # its owner still runs
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=CMD_TIMEOUT_S,
                       check=False)
        removed.append(name)
    return removed


def list_namespaces() -> list[str]:
    out = _run(["ip", "netns", "list"])
    return [line.split()[0] for line in out.splitlines() if line.strip()]


@dataclass(frozen=True)
class Host:
    name: str        # short name given by the test ("n1", "client")
    netns: str       # the namespace's name
    address: str     # its IPv4 address on the test subnet

    def exec_prefix(self) -> list[str]:
        return ["ip", "netns", "exec", self.netns]


class TestNetwork:
    __test__ = False  # not a pytest class

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.bridge_ns = f"{prefix}-br"
        self.hosts: dict[str, Host] = {}
        self._namespaces: list[str] = []
        self._blocked: frozenset[tuple[str, str]] = frozenset()

    @classmethod
    def create(cls, tag: str = "") -> TestNetwork:
        remove_stale()
        net = cls(f"skp{os.getpid()}-{tag}" if tag else f"skp{os.getpid()}")
        try:
            net._add_namespace(net.bridge_ns)
            _run(["ip", "-n", net.bridge_ns, "link", "add", "br0", "type", "bridge"])
            _run(["ip", "-n", net.bridge_ns, "link", "set", "br0", "up"])
            _run(["ip", "netns", "exec", net.bridge_ns, "nft", "-f", "-"], stdin=_ruleset())
        except BaseException:
            net.destroy()
            raise
        return net

    def _add_namespace(self, name: str) -> None:
        _run(["ip", "netns", "add", name])
        self._namespaces.append(name)
        _run(["ip", "-n", name, "link", "set", "lo", "up"])

    def add_host(self, name: str, octet: int) -> Host:
        if name in self.hosts:
            raise ValueError(f"host {name} exists")
        if not 2 <= octet <= 254:
            raise ValueError(f"octet {octet} outside 2..254")
        host = Host(name, f"{self.prefix}-{name}", f"{SUBNET}.{octet}")
        self._add_namespace(host.netns)
        port = f"v{octet}"  # the bridge-side end, named inside the bridge namespace only
        _run(["ip", "-n", self.bridge_ns, "link", "add", port, "type", "veth",
              "peer", "name", "eth0", "netns", host.netns])
        _run(["ip", "-n", self.bridge_ns, "link", "set", port, "master", "br0", "up"])
        _run(["ip", "-n", host.netns, "addr", "add", f"{host.address}/24", "dev", "eth0"])
        _run(["ip", "-n", host.netns, "link", "set", "eth0", "up"])
        self.hosts[name] = host
        return host

    def run_in(self, name: str, args: Sequence[str]) -> str:
        return _run([*self.hosts[name].exec_prefix(), *args])

    # ---- faults ----------------------------------------------------------------------------

    @property
    def blocked(self) -> frozenset[tuple[str, str]]:
        """The (from, to) host pairs whose packets are dropped now."""
        return self._blocked

    def set_blocked(self, pairs: Iterable[tuple[str, str]]) -> None:
        """Drop exactly the packets from a to b for each (a, b) in `pairs` (directional),
        replacing whatever was blocked before, in one nft transaction."""
        wanted = frozenset(pairs)
        for a, b in wanted:
            if a not in self.hosts or b not in self.hosts or a == b:
                raise ValueError(f"bad pair {(a, b)}")
        script = "flush set bridge skiff_chaos blocked\n"
        if wanted:
            elements = ", ".join(f"{self.hosts[a].address} . {self.hosts[b].address}"
                                 for a, b in sorted(wanted))
            script += f"add element bridge skiff_chaos blocked {{ {elements} }}\n"
        _run(["ip", "netns", "exec", self.bridge_ns, "nft", "-f", "-"], stdin=script)
        self._blocked = wanted

    def partition(self, groups: Sequence[Iterable[str]]) -> None:
        """Hosts talk only within their group; hosts in no group keep talking to all."""
        sets = [set(g) for g in groups]
        self.set_blocked(cut_between(sets))

    def heal(self) -> None:
        self.set_blocked(())

    # ---- teardown --------------------------------------------------------------------------

    def destroy(self) -> None:
        """Delete every namespace this object created (their veth ends go with them)."""
        errors = []
        for name in reversed(self._namespaces):
            proc = subprocess.run(["ip", "netns", "del", name], capture_output=True, text=True,
                                  timeout=CMD_TIMEOUT_S, check=False)
            if proc.returncode != 0 and "No such file" not in proc.stderr:
                errors.append(f"{name}: {proc.stderr.strip()}")
        self._namespaces.clear()
        self.hosts.clear()
        if errors:
            raise RuntimeError("could not delete namespaces: " + "; ".join(errors))


def cut_between(groups: Sequence[set[str]]) -> set[tuple[str, str]]:
    """Both directions of every pair of hosts in different groups."""
    pairs: set[tuple[str, str]] = set()
    for i, g in enumerate(groups):
        for j, h in enumerate(groups):
            if i != j:
                pairs.update((a, b) for a in g for b in h)
    return pairs
