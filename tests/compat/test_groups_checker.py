"""The ownership checker the group compat modules rely on must catch what it claims to."""

from __future__ import annotations

from typing import Any

import pytest

from tests.compat.groupsupport import check_exclusive, committed_rereads


def ev(t: float, m: str, kind: str, **kw: Any) -> dict[str, Any]:
    return {"t": t, "m": m, "ev": kind, **kw}


def test_clean_eager_handover_passes() -> None:
    check_exclusive([ev(1, "a", "assigned", parts=[0, 1]), ev(2, "a", "msg", p=0, o=0),
                     ev(3, "a", "revoked", parts=[0, 1]), ev(4, "b", "assigned", parts=[1]),
                     ev(4, "a", "assigned", parts=[0])], eager=True)


def test_overlap_is_caught() -> None:
    with pytest.raises(AssertionError, match="still owned by a"):
        check_exclusive([ev(1, "a", "assigned", parts=[0, 1]),
                         ev(2, "b", "assigned", parts=[1])], eager=False)


def test_eager_assign_without_revoke_is_caught() -> None:
    with pytest.raises(AssertionError, match="revoke before assign"):
        check_exclusive([ev(1, "a", "assigned", parts=[0]),
                         ev(2, "a", "assigned", parts=[0, 1])], eager=True)


def test_incremental_assign_is_fine_when_not_eager() -> None:
    check_exclusive([ev(1, "a", "assigned", parts=[0]), ev(2, "a", "assigned", parts=[1]),
                     ev(3, "a", "revoked", parts=[0]), ev(4, "b", "assigned", parts=[0])],
                    eager=False)


def test_record_outside_ownership_is_caught() -> None:
    with pytest.raises(AssertionError, match="does not own"):
        check_exclusive([ev(1, "a", "assigned", parts=[0]), ev(2, "a", "msg", p=1, o=0)],
                        eager=True)


def test_killed_member_owns_nothing_after_its_death() -> None:
    check_exclusive([ev(1, "a", "assigned", parts=[0]), ev(2, "a", "killed"),
                     ev(8, "b", "assigned", parts=[0])], eager=True)
    with pytest.raises(AssertionError, match="still owned by a"):
        check_exclusive([ev(1, "a", "assigned", parts=[0]), ev(2, "b", "assigned", parts=[0]),
                         ev(3, "a", "killed")], eager=True)


def test_a_record_read_again_after_a_commit_covered_it_is_caught() -> None:
    events = [ev(1, "a", "msg", p=0, o=20), ev(2, "a", "commit", p=0, o=21),
              ev(3, "a", "revoked", parts=[0]), ev(4, "b", "assigned", parts=[0]),
              ev(5, "b", "msg", p=0, o=20), ev(5, "b", "msg", p=1, o=20)]
    assert committed_rereads(events, 0) == [20]
    assert committed_rereads(events, 1) == []


def test_records_no_commit_covered_yet_may_be_read_again() -> None:
    # "n" records 15-19 read by a, handed to b before the commit after 20 covered them
    events = [*(ev(1, "a", "msg", p=2, o=o) for o in range(15, 20)),
              ev(2, "a", "revoked", parts=[2]), ev(3, "b", "assigned", parts=[2]),
              *(ev(4, "b", "msg", p=2, o=o) for o in range(15, 21)),
              ev(5, "b", "commit", p=2, o=21)]
    assert committed_rereads(events, 2) == []


def test_a_record_whose_commit_failed_may_be_read_again() -> None:
    events = [ev(1, "a", "msg", p=0, o=5), ev(2, "a", "commit_failed", p=0, o=6, err="x"),
              ev(3, "b", "commit", p=0, o=9), ev(4, "b", "msg", p=0, o=5)]
    assert committed_rereads(events, 0) == []
