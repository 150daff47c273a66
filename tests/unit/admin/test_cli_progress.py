"""The pure parts of `skiff partitions reassign --wait`: when a move is done, the live line."""

from __future__ import annotations

from broker.cli.admin.partitions import progress_line, reassignment_done
from tests.unit.admin.harness import pb

P = pb.partitions


def _status(replicas: list[int], adding: list[int], removing: list[int], leo: int | None,
            progress: dict[int, int], leader: int = 4) -> object:
    s = P.ReassignmentStatus(topic="t", partition=0, replicas=replicas, adding_replicas=adding,
                             removing_replicas=removing, isr=[4, 5],
                             in_progress=bool(adding or removing), leader=leader)
    if leo is not None:
        s.leader_log_end_offset = leo
    s.progress.extend(P.ReplicaProgress(replica_id=r, log_end_offset=e)
                      for r, e in progress.items())
    return s


def test_done_means_the_target_replicas_and_nothing_moving() -> None:
    moving = _status([6, 5, 4], [6], [4], 300, {6: 120, 5: 300, 4: 300})
    assert not reassignment_done(moving, [6, 5])
    # this node's metadata does not show the change yet: not done either
    assert not reassignment_done(_status([4, 5], [], [], 300, {}), [6, 5])
    assert reassignment_done(_status([6, 5], [], [], 300, {}), [5, 6])
    assert reassignment_done(_status([4, 5], [], [], 300, {}), None)  # a cancel


def test_progress_line_shows_leader_and_adding_replica_offsets() -> None:
    moving = _status([6, 5, 4], [6], [4], 300, {6: 120, 5: 300, 4: 300})
    targets: dict[tuple[str, int], list[int] | None] = {("t", 0): [6, 5]}
    assert progress_line([moving], targets) == \
        "reassigning: 0/1 partitions done; t-0 leader 4 LEO 300 adding 6@120"
    unknown = _status([6, 5, 4], [6], [4], None, {})
    assert progress_line([unknown], targets) == \
        "reassigning: 0/1 partitions done; t-0 leader 4 LEO ? adding -"
    done = _status([6, 5], [], [], 300, {6: 300, 5: 300})
    assert progress_line([done], targets) == "reassigning: 1/1 partitions done"


def test_progress_line_is_bounded() -> None:
    many = []
    targets: dict[tuple[str, int], list[int] | None] = {}
    for i in range(5):
        s = _status([6, 5, 4], [6], [4], 10, {6: i})
        s.partition = i  # type: ignore[attr-defined]
        many.append(s)
        targets[("t", i)] = [6, 5]
    line = progress_line(many, targets, limit=3)
    assert line.count("adding") == 3 and line.endswith("; +2 more")
