"""Assignment batching ({consumer,share,streams}.assignment.interval.ms, Kafka 4.4) in the
pure group cores, the TargetAssignmentMetadata timestamp it counts from, and the GROUP
configs' checks and DescribeConfigs entries."""

from __future__ import annotations

import pytest
from grouphelpers import START_MS
from kio.schema.errors import ErrorCode
from test_consumer_group import T1, Consumers, image
from test_streams_group import ALL_TASKS, Streams

from broker.config.describe import ConfigSynonym
from broker.config.resource_configs import (
    DYNAMIC_GROUP_CONFIG,
    ResourceConfigError,
    describe_group,
    validate_group_config,
)
from broker.config.types import ConfigSource
from broker.group import records as rec
from broker.group.consumer import ConsumerGroupState, group_records
from broker.group.streams import ASSIGNMENT_DELAYED, StreamsGroupState, Tasks
from broker.group.types import assignment_interval_elapsed
from broker.share.group import ShareGroupCoordinator, ShareGroupSettings, ShareHeartbeatRequest

E = ErrorCode


def test_interval_rule_is_kafkas() -> None:
    assert assignment_interval_elapsed(0, 1000, 5)  # the first target: at once
    assert assignment_interval_elapsed(START_MS, 0, START_MS)  # batching off
    assert not assignment_interval_elapsed(START_MS, 1000, START_MS + 999)
    assert assignment_interval_elapsed(START_MS, 1000, START_MS + 1000)


# ---- consumer groups ---------------------------------------------------------------------------


def test_consumer_second_member_waits_for_the_interval() -> None:
    c = Consumers(image(a=4), consumer_assignment_interval_ms=1000)
    a = c.join()
    assert c.epoch[a] == 1 and len(c.owned[a][T1]) == 4  # the first target: at once
    c.now += 100
    b = c.join()
    g = c.group()
    # the group epoch moved, the target did not: b is at the assignment epoch with nothing
    assert (g.group_epoch, g.assignment_epoch) == (2, 1)
    assert c.epoch[b] == 1 and c.owned[b] == {} and b not in g.target
    assert g.state is ConsumerGroupState.ASSIGNING
    c.now += 899
    c.settle([a, b], rounds=3)
    assert (g.assignment_epoch, len(c.owned[a][T1]), c.owned[b]) == (1, 4, {})
    c.now += 1  # START_MS + 1000: the interval has passed since the first target
    c.settle([a, b])
    assert g.assignment_epoch == 2 and g.assignment_timestamp == START_MS + 1000
    assert len(c.owned[a][T1]) == 2 and len(c.owned[b][T1]) == 2
    assert g.state is ConsumerGroupState.STABLE


def test_consumer_interval_zero_assigns_at_once() -> None:
    c = Consumers(image(a=4), consumer_assignment_interval_ms=1000)
    # the group's own consumer.assignment.interval.ms comes before the broker's
    c.coord.group_configs = lambda _gid: {"consumer.assignment.interval.ms": "0"}
    a = c.join()
    c.now += 100
    b = c.join()
    g = c.group()
    assert g.assignment_epoch == g.group_epoch == 2 and c.epoch[b] == 2
    c.settle([a, b])
    assert len(c.owned[a][T1]) == 2 and len(c.owned[b][T1]) == 2


def test_consumer_assignment_timestamp_is_written_and_replayed() -> None:
    c = Consumers(image(a=4), consumer_assignment_interval_ms=1000)
    c.join()
    g = c.group()
    [value] = [v for k, v in group_records(g).items()
               if rec.decode_consumer_group_key(k).record_type
               == rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA]
    assert rec.decode_target_assignment_metadata(value, "x") == (1, START_MS)
    fresh = Consumers(image(a=4), consumer_assignment_interval_ms=1000).coord
    for k, v in group_records(g).items():
        fresh.replay_consumer_record(rec.decode_consumer_group_key(k), v, k)
    assert fresh.consumer_groups["g"].assignment_timestamp == START_MS


def test_target_assignment_metadata_timestamp_is_tagged_field_0() -> None:
    # Kafka's layout: version 0, AssignmentEpoch, then tag 0 (8 bytes) only when not 0
    assert rec.encode_streams_group_target_assignment_metadata_value(5).hex() == "00000000000500"
    ts = rec.encode_share_group_target_assignment_metadata_value(5, 0x18BCFE5687B)
    assert ts.hex() == "0000000000050100080000018bcfe5687b"
    assert rec.decode_target_assignment_metadata(ts, "x") == (5, 0x18BCFE5687B)
    assert rec.decode_share_group_target_assignment_metadata_value(ts) == 5


# ---- share groups ------------------------------------------------------------------------------

SIX = {"six": (T1, 6)}


def share_hb(member: str, epoch: int) -> ShareHeartbeatRequest:
    return ShareHeartbeatRequest("g", member, epoch, None, ("six",) if epoch == 0 else None)


def test_share_second_member_waits_for_the_interval() -> None:
    g = ShareGroupCoordinator(ShareGroupSettings(assignment_interval_ms=1000))
    r, _ = g.heartbeat(share_hb("a", 0), SIX, START_MS)
    assert r.member_epoch == 1 and r.assignment == ((T1, (0, 1, 2, 3, 4, 5)),)
    r, _ = g.heartbeat(share_hb("b", 0), SIX, START_MS + 500)
    assert r.member_epoch == 1 and r.assignment == ()  # the last target: none for b
    assert (g.groups["g"].group_epoch, g.groups["g"].assignment_epoch) == (2, 1)
    r, _ = g.heartbeat(share_hb("a", 1), SIX, START_MS + 999)
    assert r.member_epoch == 1 and r.assignment is None
    r, _ = g.heartbeat(share_hb("b", 1), SIX, START_MS + 1000)
    assert r.member_epoch == 2 and r.assignment == ((T1, (1, 3, 5)),)
    r, _ = g.heartbeat(share_hb("a", 1), SIX, START_MS + 1001)
    assert r.member_epoch == 2 and r.assignment == ((T1, (0, 2, 4)),)
    assert g.groups["g"].assignment_timestamp == START_MS + 1000


def test_share_group_config_zero_assigns_at_once() -> None:
    own = ShareGroupSettings(assignment_interval_ms=0)
    g = ShareGroupCoordinator(ShareGroupSettings(assignment_interval_ms=1000), lambda _g: own)
    g.heartbeat(share_hb("a", 0), SIX, START_MS)
    r, _ = g.heartbeat(share_hb("b", 0), SIX, START_MS + 1)
    assert r.member_epoch == 2 and r.assignment == ((T1, (1, 3, 5)),)


# ---- streams groups ----------------------------------------------------------------------------


def test_streams_second_member_is_told_assignment_delayed() -> None:
    s = Streams(streams_assignment_interval_ms=1000)
    s.hb("a")
    assert s.active("a") == ALL_TASKS
    s.d.advance(100)
    r = s.hb("b")
    assert r.member_epoch == 1 and r.assignment == Tasks()
    assert (ASSIGNMENT_DELAYED, "Assignment delayed due to the configured assignment "
                                "interval.") in r.status
    assert s.group().state is StreamsGroupState.ASSIGNING
    s.d.advance(1000)  # no timer: the target waits for a heartbeat, as in Kafka
    assert s.group().assignment_epoch == 1
    r = s.hb("b")
    assert r.member_epoch == 2 and r.status == ()
    s.settle("a", "b")
    assert len(s.active("a")) == len(s.active("b")) == 3
    assert s.group().assignment_timestamp == START_MS + 1100


def test_streams_interval_zero_assigns_at_once() -> None:
    s = Streams(streams_assignment_interval_ms=0)
    s.hb("a")
    s.d.advance(100)
    r = s.hb("b")
    assert r.member_epoch == 2 and r.status == ()


# ---- GROUP configs -----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["consumer", "share", "streams"])
def test_interval_config_within_the_node_bounds(kind: str) -> None:
    name = f"{kind}.assignment.interval.ms"
    for ok in ("0", "15000", None):
        validate_group_config(None, name, ok)
    with pytest.raises(ResourceConfigError) as e:
        validate_group_config(None, name, "15001")
    assert e.value.message == f"{name} must be in the range 0 to 15000 inclusive."
    bounds = {f"group.{kind}.min.assignment.interval.ms": 100,
              f"group.{kind}.max.assignment.interval.ms": 2000}
    with pytest.raises(ResourceConfigError) as e:
        validate_group_config(bounds, name, "50")
    assert e.value.message == f"{name} must be in the range 100 to 2000 inclusive."


@pytest.mark.parametrize("kind", ["consumer", "share", "streams"])
def test_offload_flag_is_taken_as_kafka_takes_it(kind: str) -> None:
    """Kafka 4.4 takes *.assignor.offload.enable (a BOOLEAN, default the broker's true) and
    runs the assignor within the heartbeat whatever it says; so does Skiff."""
    name = f"{kind}.assignor.offload.enable"
    for value in ("true", "false", "FALSE"):
        validate_group_config(None, name, value)
    validate_group_config(None, name, None)
    with pytest.raises(ResourceConfigError) as e:
        validate_group_config(None, name, "maybe")
    assert e.value.code is E.invalid_config
    assert e.value.message == (f"Invalid value maybe for configuration {name}: Expected value "
                               "to be either true or false")
    # internal in Kafka 4.4's GroupConfig: described only when the group sets it
    assert describe_group(None, {}, [name], include_synonyms=True) == []
    [set_] = describe_group(None, {name: "false"}, [name], include_synonyms=True)
    assert (set_.value, set_.type.name) == ("false", "BOOLEAN")
    assert [(s.name, s.value) for s in set_.synonyms] == [
        (name, "false"), (f"group.{name}", "true")]


def test_describe_lists_the_intervals_with_the_broker_synonyms() -> None:
    names = [f"{k}.assignment.interval.ms" for k in ("consumer", "share", "streams")]
    entries = {e.name: e for e in describe_group(None, {"share.assignment.interval.ms": "0"},
                                                 names, include_synonyms=True)}
    assert set(entries) == set(names)
    consumer = entries["consumer.assignment.interval.ms"]
    assert (consumer.value, consumer.source) == ("1000", ConfigSource.DEFAULT_CONFIG)
    assert consumer.synonyms == (ConfigSynonym("group.consumer.assignment.interval.ms", "1000",
                                               ConfigSource.DEFAULT_CONFIG),)
    share = entries["share.assignment.interval.ms"]
    assert (share.value, share.source) == ("0", ConfigSource(DYNAMIC_GROUP_CONFIG))
    assert [s.name for s in share.synonyms] == ["share.assignment.interval.ms",
                                                "group.share.assignment.interval.ms"]
