"""Share sessions (KIP-932), pure: which partitions a share consumer fetches from this
broker, and the session epoch that orders its ShareFetch and ShareAcknowledge requests.

One session per (group id, member id). The epoch a request carries:

    0    opens a session (replacing the member's old one) with the request's partitions;
         a request that opens a session may not acknowledge anything (INVALID_REQUEST)
    -1   closes the session after its acknowledgements (SHARE_SESSION_NOT_FOUND without
         one); its records still acquired are released; a ShareFetch with -1 fetches nothing
    n>0  must be the session's next epoch (INVALID_SHARE_SESSION_EPOCH otherwise,
         SHARE_SESSION_NOT_FOUND without a session); a ShareFetch adds its partitions and
         drops its forgotten ones; the next epoch is n + 1 (after 2^31-1: 1)

ShareAcknowledge never opens a session: epoch 0 is INVALID_SHARE_SESSION_EPOCH.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_EPOCH = 2**31 - 1

SessionKey = tuple[str, str]  # (group id, member id)
SessionPartition = tuple[uuid.UUID, int]  # (topic id, partition)


@dataclass(slots=True)
class ShareSession:
    group_id: str
    member_id: str
    epoch: int  # the epoch the next request must carry
    partitions: dict[SessionPartition, None] = field(default_factory=dict)  # ordered set


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= MAX_EPOCH else epoch + 1


class ShareSessionCache:
    def __init__(self, max_sessions: int) -> None:
        self.max_sessions = max_sessions
        self.sessions: dict[SessionKey, ShareSession] = {}

    def fetch_update(self, group_id: str, member_id: str, epoch: int,
                     added: Iterable[SessionPartition], forgotten: Iterable[SessionPartition],
                     has_acks: bool) -> tuple[ErrorCode, ShareSession | None, str | None]:
        """A ShareFetch's session step: (error, the session, message). The old session a
        new one replaces is returned by `replaced` first (its records to release)."""
        key = (group_id, member_id)
        if epoch == INITIAL_EPOCH:
            if has_acks:
                return (ErrorCode.invalid_request, None,
                        "Acknowledge data present on initial ShareFetchRequest.")
            if key not in self.sessions and len(self.sessions) >= self.max_sessions:
                return (ErrorCode.share_session_limit_reached, None,
                        "The share session cache is full.")
            session = ShareSession(group_id, member_id, 1)
            for p in added:
                session.partitions[p] = None
            self.sessions[key] = session
            return ErrorCode.none, session, None
        current = self.sessions.get(key)
        if current is None:
            return (ErrorCode.share_session_not_found, None,
                    f"Share session for member {member_id} of group {group_id} not found.")
        session = current
        if epoch == FINAL_EPOCH:
            return ErrorCode.none, session, None
        if epoch != session.epoch:
            return (ErrorCode.invalid_share_session_epoch, None,
                    f"The share session epoch {epoch} is not the expected {session.epoch}.")
        for p in forgotten:
            session.partitions.pop(p, None)
        for p in added:
            session.partitions[p] = None
        session.epoch = next_epoch(epoch)
        return ErrorCode.none, session, None

    def acknowledge_update(self, group_id: str, member_id: str, epoch: int
                           ) -> tuple[ErrorCode, ShareSession | None, str | None]:
        key = (group_id, member_id)
        if epoch == INITIAL_EPOCH:
            return (ErrorCode.invalid_share_session_epoch, None,
                    "A ShareAcknowledge request cannot open a share session (epoch 0).")
        session = self.sessions.get(key)
        if session is None:
            return (ErrorCode.share_session_not_found, None,
                    f"Share session for member {member_id} of group {group_id} not found.")
        if epoch == FINAL_EPOCH:
            return ErrorCode.none, session, None
        if epoch != session.epoch:
            return (ErrorCode.invalid_share_session_epoch, None,
                    f"The share session epoch {epoch} is not the expected {session.epoch}.")
        session.epoch = next_epoch(epoch)
        return ErrorCode.none, session, None

    def remove(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.sessions.pop((group_id, member_id), None)

    def existing(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.sessions.get((group_id, member_id))
