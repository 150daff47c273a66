"""KIP-890 verification across the workers of a broker (broker/node/shard_routing.py): the
owner of a partition names its verification guard by a token, and the append that carries
the token back is checked against that guard, so one dropped meanwhile (a marker written)
fails it as in one process."""

from __future__ import annotations

import asyncio
from typing import Any

from broker.log import AppendResult
from broker.node.shard_routing import ShardOps, _token_for
from broker.replication.producer_state import RemoteVerificationGuard, VerificationGuard

Key = tuple[str, int]


class FakeReplicas:
    """The owner's ReplicaManager, reduced to the guards it holds and what appends saw."""

    def __init__(self) -> None:
        self.held: dict[Key, VerificationGuard] = {}
        self.seen: list[dict[Key, Any] | None] = []

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
                           timeout_ms: int, verification: dict[Key, Any] | None = None,
                           ) -> dict[Key, AppendResult]:
        self.seen.append(verification)
        return {k: AppendResult(0, 0, -1, 0, 1, 0) for k in entries}


def test_a_token_names_the_guard_it_was_made_for() -> None:
    replicas = FakeReplicas()
    ops = ShardOps(replicas, lambda _name: None)  # type: ignore[arg-type]
    peer: Any = None
    items = [("t", 0, memoryview(b"r")), ("t", 1, memoryview(b"r"))]

    async def tokens() -> dict[Key, int | None]:
        answers = await ops.start_verification(peer, [("t", 0, 0), ("t", 1, 0), ("t", 9, 0)],
                                               7, 0, False)
        return {(t, p): tok for t, p, tok in answers}

    async def run() -> None:
        first = await tokens()
        assert first[("t", 9)] is None and None not in (first[("t", 0)], first[("t", 1)])
        await ops.append(peer, items, 1, 1000, [first[("t", 0)], first[("t", 1)]])
        assert replicas.seen[-1] == {("t", 0): replicas.held[("t", 0)],
                                     ("t", 1): replicas.held[("t", 1)]}
        # a token serves one append: used again, it names nothing
        await ops.append(peer, items, 1, 1000, [first[("t", 0)], first[("t", 1)]])
        assert replicas.seen[-1] == {("t", 0): None, ("t", 1): None}
        # a marker for partition 1 drops its guard while the node asks the coordinator:
        # the late append carries the old guard, no longer the producer's
        second = await tokens()
        dropped = replicas.held[("t", 1)]
        replicas.held[("t", 1)] = VerificationGuard()
        await ops.append(peer, items, 1, 1000, [second[("t", 0)], second[("t", 1)]])
        seen = replicas.seen[-1]
        assert seen is not None
        assert seen[("t", 0)] is replicas.held[("t", 0)]
        assert seen[("t", 1)] is dropped and dropped is not replicas.held[("t", 1)]
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
