"""KIP-890 verification across the workers of a broker (broker/node/shard_routing.py): the
owner of a partition names its verification guard by a token that dies with the guard, so
an append whose guard was dropped meanwhile (a marker written) reaches the log without it."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

from broker.log import AppendResult
from broker.node.shard_routing import RemoteVerificationGuard, ShardOps, _token_for
from broker.replication.producer_state import VerificationGuard

Key = tuple[str, int]


class FakeReplicas:
    """The owner's ReplicaManager, reduced to the guards it holds and what appends saw."""

    def __init__(self) -> None:
        self.held: dict[Key, VerificationGuard] = {}
        self.seen: list[dict[Key, VerificationGuard | None] | None] = []

    def start_verifications_local(self, producer_id: int, epoch: int,
                                  sequences: dict[Key, int], *,
                                  supports_epoch_bump: bool = False,
                                  ) -> dict[Key, VerificationGuard | None]:
        out: dict[Key, VerificationGuard | None] = {}
        for key in sequences:
            if key[1] == 9:
                out[key] = None  # the transaction is already open there
            else:
                out[key] = self.held.setdefault(key, VerificationGuard())
        return out

    async def append_local(self, entries: dict[Key, Any], *, required_acks: int,
                           timeout_ms: int,
                           verification: dict[Key, VerificationGuard | None] | None = None,
                           ) -> dict[Key, AppendResult]:
        self.seen.append(verification)
        return {k: AppendResult(0, 0, -1, 0, 1, 0) for k in entries}


def test_a_token_names_the_guard_until_the_owner_drops_it() -> None:
    replicas = FakeReplicas()
    ops = ShardOps(replicas, lambda _name: None)  # type: ignore[arg-type]

    peer: Any = None

    async def run() -> None:
        answers = await ops.start_verification(peer, [("t", 0, 0), ("t", 1, 0), ("t", 9, 0)],
                                               7, 0, False)
        tokens = {(t, p): tok for t, p, tok in answers}
        assert tokens[("t", 9)] is None and None not in (tokens[("t", 0)], tokens[("t", 1)])
        items = [("t", 0, memoryview(b"r")), ("t", 1, memoryview(b"r"))]
        await ops.append(peer, items, 1, 1000, [tokens[("t", 0)], tokens[("t", 1)]])
        assert replicas.seen[-1] == {("t", 0): replicas.held[("t", 0)],
                                     ("t", 1): replicas.held[("t", 1)]}
        replicas.seen.clear()
        # a marker for partition 1 drops its guard: its late append carries none
        del replicas.held[("t", 1)]
        gc.collect()
        await ops.append(peer, items, 1, 1000, [tokens[("t", 0)], tokens[("t", 1)]])
        assert replicas.seen[-1] == {("t", 0): replicas.held[("t", 0)], ("t", 1): None}
        # without tokens the append is not a verified one
        await ops.append(peer, items, 1, 1000)
        assert replicas.seen[-1] is None

    asyncio.run(run())


def test_a_guard_is_named_only_to_its_owner() -> None:
    guard = RemoteVerificationGuard(owner=2, token=5)
    assert _token_for(guard, 2) == 5
    assert _token_for(guard, 1) is None
    assert _token_for(VerificationGuard(), 2) is None
    assert _token_for(None, 2) is None
