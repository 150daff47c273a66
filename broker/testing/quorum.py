"""A stand-in for the Raft driver of a single-voter quorum, for in-process nodes in tests and
benchmarks: what it appends is committed at once."""

from __future__ import annotations

from broker.metadata.publisher import MetadataPublisher


class CommitOnAppendQuorum:
    """Test double of the Raft driver for a single-voter quorum: every appended batch is
    committed immediately. Offsets are assigned here and the batch is applied to the
    publisher synchronously before `append` returns, which is what the one-voter commit
    amounts to without the Raft log underneath."""

    def __init__(self, publisher: MetadataPublisher, epoch: int = 1) -> None:
        self.publisher = publisher
        self.epoch = epoch
        self.next_offset = 0
        self.is_leader = True
        self.appended: list[list[bytes]] = []

    async def append(self, records: list[bytes]) -> int:
        if not self.is_leader:
            raise RuntimeError("not the leader")
        last = self.next_offset + len(records) - 1
        self.next_offset = last + 1
        self.appended.append(list(records))
        self.publisher.apply_committed(last, self.epoch, records)
        return last
