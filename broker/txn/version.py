"""The gate of transactions V2 (KIP-890 part 2): the finalized feature level
`transaction.version` in the metadata image (broker/metadata/features.py), as Kafka reads
it. Level 2 lets producers use Produce v12+, EndTxn v5, TxnOffsetCommit v5 and
AddPartitionsToTxn v5 (the epoch bumped at every transaction's end, partitions added by
the first produce); clients read the level from ApiVersions and use those versions only
at 2. A request of those versions while the level is lower is answered
UNSUPPORTED_VERSION for its transactional part."""

from __future__ import annotations

from typing import Any

from broker.metadata.features import TRANSACTION_VERSION

TV2 = 2


def transaction_version(image: Any) -> int:
    """The finalized transaction.version (0 when the image has none)."""
    level = getattr(image, "finalized_level", None)
    return int(level(TRANSACTION_VERSION)) if level is not None else 0


def transactions_v2(image: Any) -> bool:
    return transaction_version(image) >= TV2
