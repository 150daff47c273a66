"""broker/handlers/_authz.py and the per-API checks: with the StandardAuthorizer on, each
API refuses what Kafka refuses, with Kafka's error code, and changes nothing."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import importlib
import uuid
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from broker.handlers import (
    create_topics,
    delete_topics,
    describe_configs,
    fetch,
    init_producer_id,
    join_group,
    metadata,
    offset_commit,
    produce,
)
from broker.handlers._authz import guard_controller_listener, refused_response
from broker.protocol.api import response_schema
from broker.protocol.kio_build import build
from broker.security.authorizer import AclOperation as O
from broker.security.authorizer import PatternType
from broker.security.authorizer import ResourceType as R
from broker.server.dispatch import Dispatcher
from tests.unit.handlers.acl_support import AUTHORIZER, allow, ctx_of, dispatch, grant
from tests.unit.handlers.conftest import TestNode, roundtrip
from tests.unit.handlers.datapath import create, produce_request, records
from tests.unit.handlers.test_fetch import fetch_request
from tests.unit.handlers.test_metadata import request as metadata_request

ALICE = "User:alice"


def secured(node_factory: Any) -> TestNode:
    node: TestNode = node_factory(AUTHORIZER)
    asyncio.run(create(node, "orders"))
    asyncio.run(create(node, "secret"))
    return node


def run(handler: Any, node: TestNode, api: int, version: int, request: Any,
        principal: str = ALICE) -> Any:
    return asyncio.run(handler.handle(node, ctx_of(api, version, principal), request))


def test_produce_needs_write_and_writes_nothing_without_it(node_factory: Any) -> None:
    node = secured(node_factory)
    grant(node, allow(ALICE, O.WRITE, R.TOPIC, "orders"))

    def produce_to(topic: str) -> ErrorCode:
        chunks = run(produce, node, 0, 9, produce_request(9, topic, 0, records(b"x")))
        body = chunks.to_bytes()
        resp, _ = entity_reader(response_schema(0, 9))(body, 0)
        code: ErrorCode = resp.responses[0].partition_responses[0].error_code
        return code

    assert produce_to("orders") is ErrorCode.none
    assert produce_to("secret") is ErrorCode.topic_authorization_failed
    assert produce_to("missing") is ErrorCode.topic_authorization_failed  # no existence leak
    assert node.replicas.get("secret", 0).log.read_records(0) == []


def test_fetch_needs_read_and_a_follower_cluster_action(node_factory: Any) -> None:
    node = secured(node_factory)
    grant(node, allow(ALICE, O.READ, R.TOPIC, "orders"))

    def fetch_from(topic: str, replica_id: int = -1, principal: str = ALICE) -> ErrorCode:
        req = dataclasses.replace(fetch_request(12, topic, 0), replica_id=replica_id)
        chunks = run(fetch, node, 1, 12, req, principal)
        m = importlib.import_module("kio.schema.fetch.v12.response")
        resp, _ = entity_reader(m.FetchResponse)(chunks.to_bytes(), 0)
        code: ErrorCode = resp.responses[0].partitions[0].error_code
        return code

    assert fetch_from("orders") is ErrorCode.none
    assert fetch_from("secret") is ErrorCode.topic_authorization_failed
    assert fetch_from("orders", replica_id=2) is ErrorCode.topic_authorization_failed
    grant(node, allow("User:broker", O.CLUSTER_ACTION, R.CLUSTER, "kafka-cluster"))
    # past the check (replica 2 is no replica of it: the replica manager's answer)
    assert fetch_from("orders", replica_id=2, principal="User:broker") is \
        ErrorCode.not_leader_or_follower


def test_metadata_hides_what_may_not_be_described(node_factory: Any) -> None:
    node = secured(node_factory)
    grant(node, allow(ALICE, O.DESCRIBE, R.TOPIC, "ord", PatternType.PREFIXED))
    everything = run(metadata, node, 3, 12, metadata_request(12, None, include_ops=True))
    assert [t.name for t in everything.topics] == ["orders"]
    assert everything.topics[0].topic_authorized_operations == 1 << O.DESCRIBE
    named = run(metadata, node, 3, 12, metadata_request(12, ["orders", "secret", "new"]))
    assert [(t.name, t.error_code) for t in named.topics] == [
        ("orders", ErrorCode.none), ("secret", ErrorCode.topic_authorization_failed),
        ("new", ErrorCode.topic_authorization_failed)]
    # DESCRIBE on "ordnew" but no CREATE: not auto-created
    named = run(metadata, node, 3, 12, metadata_request(12, ["ordnew"]))
    assert named.topics[0].error_code is ErrorCode.topic_authorization_failed
    assert node.metadata.topic("ordnew") is None
    assert node.metadata.topic("new") is None


def test_join_group_and_offset_commit(node_factory: Any) -> None:
    node = secured(node_factory)
    jm = importlib.import_module("kio.schema.join_group.v9.request")
    join = build(jm.JoinGroupRequest, group_id="app", session_timeout=datetime.timedelta(
        seconds=10), rebalance_timeout=datetime.timedelta(seconds=10), member_id="",
        group_instance_id=None, protocol_type="consumer", protocols=(), reason=None)
    assert run(join_group, node, 11, 9, join).error_code is \
        ErrorCode.group_authorization_failed
    cm = importlib.import_module("kio.schema.offset_commit.v8.request")
    commit = build(cm.OffsetCommitRequest, group_id="app", generation_id_or_member_epoch=-1,
                   member_id="", group_instance_id=None, topics=tuple(
                       build(cm.OffsetCommitRequestTopic, name=t, partitions=(build(
                           cm.OffsetCommitRequestPartition, partition_index=0,
                           committed_offset=1, committed_leader_epoch=-1,
                           committed_metadata=""),)) for t in ("orders", "secret")))
    resp = run(offset_commit, node, 8, 8, commit)
    assert {t.partitions[0].error_code for t in resp.topics} == {
        ErrorCode.group_authorization_failed}
    grant(node, allow(ALICE, O.READ, R.GROUP, "app"), allow(ALICE, O.READ, R.TOPIC, "orders"))
    resp = run(offset_commit, node, 8, 8, commit)
    codes = {t.name: t.partitions[0].error_code for t in resp.topics}
    assert codes["secret"] is ErrorCode.topic_authorization_failed
    assert codes["orders"] is not ErrorCode.topic_authorization_failed


def test_create_and_delete_topics(node_factory: Any) -> None:
    node = secured(node_factory)
    cm = importlib.import_module("kio.schema.create_topics.v5.request")
    req = build(cm.CreateTopicsRequest, topics=(build(
        cm.CreatableTopic, name="mine", num_partitions=1, replication_factor=1,
        assignments=(), configs=()),), timeout=datetime.timedelta(seconds=5),
        validate_only=False)
    assert run(create_topics, node, 19, 5, req).topics[0].error_code is \
        ErrorCode.topic_authorization_failed
    grant(node, allow(ALICE, O.CREATE, R.TOPIC, "mi", PatternType.PREFIXED))
    created = run(create_topics, node, 19, 5, req).topics[0]
    assert created.error_code is ErrorCode.none
    assert created.topic_config_error_code is ErrorCode.topic_authorization_failed
    dm = importlib.import_module("kio.schema.delete_topics.v4.request")
    dreq = build(dm.DeleteTopicsRequest, topic_names=("mine",),
                 timeout=datetime.timedelta(seconds=5))
    assert run(delete_topics, node, 20, 4, dreq).responses[0].error_code is \
        ErrorCode.topic_authorization_failed
    assert node.metadata.topic("mine") is not None

    # v6 (Kafka 4.x clients), by name and by id: DELETE needed too; an id whose topic may be
    # described is answered with its name, one that may not without it
    m6 = importlib.import_module("kio.schema.delete_topics.v6.request")
    ids = {n: node.metadata.topic(n).topic_id for n in ("mine", "orders", "secret")}
    grant(node, allow(ALICE, O.DESCRIBE, R.TOPIC, "orders"))
    req6 = build(m6.DeleteTopicsRequest, topics=(
        build(m6.DeleteTopicState, name="mine", topic_id=uuid.UUID(int=0)),
        build(m6.DeleteTopicState, name=None, topic_id=ids["orders"]),
        build(m6.DeleteTopicState, name=None, topic_id=ids["secret"])),
        timeout=datetime.timedelta(seconds=5))
    got = run(delete_topics, node, 20, 6, req6).responses
    assert sorted((r.name or "", r.error_code) for r in got) == [
        ("", ErrorCode.topic_authorization_failed),
        ("mine", ErrorCode.topic_authorization_failed),
        ("orders", ErrorCode.topic_authorization_failed)]
    assert all(node.metadata.topic(n) is not None for n in ids)
    grant(node, allow(ALICE, O.DELETE, R.TOPIC, "orders"))
    got = run(delete_topics, node, 20, 6, build(m6.DeleteTopicsRequest, topics=(
        build(m6.DeleteTopicState, name=None, topic_id=ids["orders"]),),
        timeout=datetime.timedelta(seconds=5))).responses
    assert [(r.name, r.error_code) for r in got] == [("orders", ErrorCode.none)]
    assert node.metadata.topic("orders") is None


def test_describe_configs_per_resource(node_factory: Any) -> None:
    node = secured(node_factory)
    grant(node, allow(ALICE, O.ALTER_CONFIGS, R.TOPIC, "orders"))  # implies DESCRIBE_CONFIGS
    m = importlib.import_module("kio.schema.describe_configs.v4.request")
    req = build(m.DescribeConfigsRequest, resources=tuple(
        build(m.DescribeConfigsResource, resource_type=t, resource_name=n,
              configuration_keys=None) for t, n in ((2, "orders"), (2, "secret"), (4, "1"))),
        include_synonyms=False, include_documentation=False)
    resp = run(describe_configs, node, 32, 4, req)
    assert [r.error_code for r in resp.results] == [
        ErrorCode.none, ErrorCode.topic_authorization_failed,
        ErrorCode.cluster_authorization_failed]


def test_init_producer_id_idempotent(node_factory: Any) -> None:
    node = secured(node_factory)
    m = importlib.import_module("kio.schema.init_producer_id.v4.request")
    req = build(m.InitProducerIdRequest, transactional_id=None,
                transaction_timeout=datetime.timedelta(seconds=60), producer_id=-1,
                producer_epoch=-1)
    assert run(init_producer_id, node, 22, 4, req).error_code is \
        ErrorCode.cluster_authorization_failed
    grant(node, allow(ALICE, O.WRITE, R.TOPIC, "orders"))  # WRITE on some topic suffices
    assert run(init_producer_id, node, 22, 4, req).error_code is not \
        ErrorCode.cluster_authorization_failed


def test_describe_cluster_and_its_operations(node_factory: Any) -> None:
    node = secured(node_factory)
    m = importlib.import_module("kio.schema.describe_cluster.v1.request")
    req = build(m.DescribeClusterRequest, include_cluster_authorized_operations=True,
                endpoint_type=1)
    # Anyone may describe the cluster, as Kafka 4.4 answers (tests/compat/kafka/
    # test_java_acls.py): without DESCRIBE on it, no authorized operations (0)
    plain = dispatch(node, 60, 1, req, principal=ALICE)
    assert plain.error_code is ErrorCode.none
    assert len(plain.brokers) == 1
    assert plain.cluster_authorized_operations == 0
    grant(node, allow(ALICE, O.DESCRIBE, R.CLUSTER, "kafka-cluster"))
    ok = dispatch(node, 60, 1, req, principal=ALICE)
    assert ok.error_code is ErrorCode.none
    assert ok.cluster_authorized_operations == 1 << O.DESCRIBE


def test_controller_listener_needs_cluster_action(node_factory: Any) -> None:
    node = secured(node_factory)
    called: list[int] = []

    async def handle(n: Any, ctx: Any, request: Any) -> Any:
        called.append(ctx.api_key)
        return None

    inner = Dispatcher()
    inner.register(52, handle)  # Vote
    inner.register(18, handle)  # ApiVersions: never checked
    guarded = guard_controller_listener(inner)
    vm = importlib.import_module("kio.schema.vote.v2.request")
    vote = build(vm.VoteRequest, cluster_id=None, voter_id=1, topics=())
    entry = guarded.get(52)
    assert entry is not None
    answer = asyncio.run(entry.handle(node, ctx_of(52, 2, "User:intruder"), vote))
    assert answer.error_code is ErrorCode.cluster_authorization_failed
    assert roundtrip(answer) == answer
    assert called == []
    asyncio.run(entry.handle(node, ctx_of(52, 2, "User:admin"), vote))
    versions = guarded.get(18)
    assert versions is not None
    asyncio.run(versions.handle(node, ctx_of(18, 3, "User:intruder"), None))
    assert called == [52, 18]


def test_refused_response_fills_a_top_level_error() -> None:
    m = importlib.import_module("kio.schema.describe_log_dirs.v4.request")
    resp = refused_response(m.DescribeLogDirsRequest(topics=None),
                            ErrorCode.cluster_authorization_failed)
    assert resp.error_code is ErrorCode.cluster_authorization_failed and resp.results == ()
    assert roundtrip(resp) == resp


def test_every_cluster_checked_api_answers_the_refusal_visibly(node_factory: Any) -> None:
    """Each API behind a whole-request cluster check, at each version served, answers a
    refused request with CLUSTER_AUTHORIZATION_FAILED in a field the client reads (a
    top-level error code, or every item's), never an empty success."""
    from kio.index import load_request_schema

    from broker.handlers import BROKER_HANDLERS
    from broker.handlers._authz import CLUSTER_CHECKS
    from broker.protocol.api import BROKER_APIS

    node = secured(node_factory)
    served = {int(m.API_KEY) for m in BROKER_HANDLERS}
    empty_requests: dict[int, Any] = {
        29: lambda v: importlib.import_module(f"kio.schema.describe_acls.v{v}.request")
        .DescribeAclsRequest(resource_type_filter=1, resource_name_filter=None,
                             pattern_type_filter=1, principal_filter=None, host_filter=None,
                             operation=1, permission_type=1),
        27: lambda v: _marker_request(v),
        # the share coordinator's state APIs: one share-partition, whose result carries it
        **{k: (lambda v, api=api, f=f: _share_state_request(api, v, f))
           for k, api, f in (
               (83, "initialize_share_group_state", {"state_epoch": 1, "start_offset": 0}),
               (84, "read_share_group_state", {"leader_epoch": 0}),
               (85, "write_share_group_state", {
                   "state_epoch": 0, "leader_epoch": 0, "start_offset": 0,
                   "delivery_complete_count": -1, "state_batches": ()}),
               (86, "delete_share_group_state", {}),
               (87, "read_share_group_state_summary", {"leader_epoch": 0}))},
    }
    checked = 0
    for key in sorted(set(CLUSTER_CHECKS) & served):
        r = BROKER_APIS.get(key)
        assert r is not None
        for v in range(r.min_version, r.max_version + 1):
            try:
                schema = load_request_schema(key, v)
            except Exception:  # versions Kafka 4 removed: broker/protocol/_kio_legacy
                continue
            req = empty_requests[key](v) if key in empty_requests else _minimal(schema)
            resp = dispatch(node, key, v, req, principal=ALICE)
            codes = _error_codes(resp)
            if (key == 35 and v < 3) or (key == 43 and v == 0):
                continue  # no error field: Kafka answers these with an empty result too
            assert ErrorCode.cluster_authorization_failed in codes, (key, v, resp)
            checked += 1
    assert checked >= 10


def _share_state_request(api: str, version: int, fields: dict[str, Any]) -> Any:
    from share_state_support import state_request

    return state_request(api, version, "g", uuid.UUID(int=1), 0, **fields)


def _marker_request(version: int) -> Any:
    """WriteTxnMarkers for one partition: its answer carries a code per partition."""
    m = importlib.import_module(f"kio.schema.write_txn_markers.v{version}.request")
    return m.WriteTxnMarkersRequest(markers=(m.WritableTxnMarker(
        producer_id=1, producer_epoch=0, transaction_result=True, coordinator_epoch=0,
        topics=(m.WritableTxnMarkerTopic(name="t", partition_indexes=(0,)),)),))


def _minimal(schema: Any) -> Any:
    """A request of `schema` with one item in each top-level list where the API needs one to
    answer per item, else empty."""
    values: dict[str, Any] = {}
    for f in dataclasses.fields(schema):
        if f.default is not dataclasses.MISSING:
            continue
        kind = f.metadata.get("kafka_type", "")
        if kind == "timedelta_i32":
            values[f.name] = datetime.timedelta(seconds=5)
        elif kind.startswith("int"):
            values[f.name] = 0
        elif kind == "bool":
            values[f.name] = False
        elif kind == "string":
            values[f.name] = ""
        else:
            values[f.name] = _one_item(schema, f.name)
    return schema(**values)


def _one_item(schema: Any, field: str) -> Any:
    """One element for the per-user / per-creation / per-filter lists, else ()."""
    mod = importlib.import_module(schema.__module__)
    item = {"creations": "AclCreation", "filters": "DeleteAclsFilter",
            "deletions": "ScramCredentialDeletion", "entries": "EntryData"}.get(field)
    if item is None:
        return None if field in ("topics", "users", "components") else ()
    cls = getattr(mod, item)
    vals: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            continue
        kind = f.metadata.get("kafka_type", "")
        vals[f.name] = ("x" if kind == "string" else 3 if kind.startswith("int")
                        else None if kind else ())  # no kafka_type: a nested list
    return (cls(**vals),)


def _error_codes(entity: Any) -> set[ErrorCode]:
    out: set[ErrorCode] = set()
    for f in dataclasses.fields(entity):
        value = getattr(entity, f.name)
        if isinstance(value, ErrorCode):
            out.add(value)
        elif isinstance(value, tuple):
            for item in value:
                if dataclasses.is_dataclass(item):
                    out |= _error_codes(item)
    return out


def test_describe_groups_checks_describe_and_reports_operations(node_factory: Any) -> None:
    from broker.handlers import describe_groups

    node = secured(node_factory)
    grant(node, allow(ALICE, O.READ, R.GROUP, "app"))
    m = importlib.import_module("kio.schema.describe_groups.v5.request")
    req = m.DescribeGroupsRequest(groups=("app", "other"), include_authorized_operations=True)
    resp = run(describe_groups, node, 15, 5, req)
    app, other = resp.groups
    assert other.error_code is ErrorCode.group_authorization_failed
    assert app.error_code is not ErrorCode.group_authorization_failed  # past the check
    assert app.authorized_operations == (1 << O.READ) | (1 << O.DESCRIBE)
    assert other.authorized_operations == 0
    assert roundtrip(resp) == resp


def test_transaction_apis_check_the_transactional_id_group_and_topics(
        node_factory: Any) -> None:
    """Kafka's checks for the transaction APIs: WRITE on the transactional id
    (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), READ on the group, WRITE/READ on topics, DESCRIBE
    to describe; the brokers' batched AddPartitionsToTxn needs CLUSTER_ACTION."""
    from broker.handlers import (
        add_offsets_to_txn,
        add_partitions_to_txn,
        describe_producers,
        describe_transactions,
        end_txn,
        txn_offset_commit,
    )

    def mod(api: str, v: int) -> Any:
        return importlib.import_module(f"kio.schema.{api}.v{v}.request")

    node = secured(node_factory)
    tiaf = ErrorCode.transactional_id_authorization_failed
    m = mod("init_producer_id", 4)
    init = build(m.InitProducerIdRequest, transactional_id="tx1",
                 transaction_timeout=datetime.timedelta(seconds=60), producer_id=-1,
                 producer_epoch=-1)
    assert run(init_producer_id, node, 22, 4, init).error_code is tiaf
    m = mod("end_txn", 3)
    end = build(m.EndTxnRequest, transactional_id="tx1", producer_id=1, producer_epoch=0,
                committed=True)
    assert run(end_txn, node, 26, 3, end).error_code is tiaf
    m = mod("add_offsets_to_txn", 3)
    offsets = build(m.AddOffsetsToTxnRequest, transactional_id="tx1", producer_id=1,
                    producer_epoch=0, group_id="g")
    assert run(add_offsets_to_txn, node, 25, 3, offsets).error_code is tiaf

    grant(node, allow(ALICE, O.WRITE, R.TRANSACTIONAL_ID, "tx1"),
          allow(ALICE, O.WRITE, R.TOPIC, "orders"))
    assert run(add_offsets_to_txn, node, 25, 3, offsets).error_code is \
        ErrorCode.group_authorization_failed
    m = mod("add_partitions_to_txn", 3)
    add = build(m.AddPartitionsToTxnRequest, v3_and_below_transactional_id="tx1",
                v3_and_below_producer_id=1, v3_and_below_producer_epoch=0,
                v3_and_below_topics=(build(m.AddPartitionsToTxnTopic, name="orders",
                                           partitions=(0,)),
                                     build(m.AddPartitionsToTxnTopic, name="secret",
                                           partitions=(0,))))
    resp = run(add_partitions_to_txn, node, 24, 3, add)
    codes = {t.name: t.results_by_partition[0].partition_error_code
             for t in resp.results_by_topic_v3_and_below}
    assert codes == {"orders": ErrorCode.operation_not_attempted,
                     "secret": ErrorCode.topic_authorization_failed}
    m = mod("txn_offset_commit", 3)
    commit = build(m.TxnOffsetCommitRequest, transactional_id="tx1", group_id="g",
                   producer_id=1, producer_epoch=0, topics=(build(
                       m.TxnOffsetCommitRequestTopic, name="orders", partitions=(build(
                           m.TxnOffsetCommitRequestPartition, partition_index=0,
                           committed_offset=5, committed_metadata=None),)),))
    resp = run(txn_offset_commit, node, 28, 3, commit)
    assert resp.topics[0].partitions[0].error_code is ErrorCode.group_authorization_failed
    m = mod("describe_transactions", 0)
    resp = run(describe_transactions, node, 65, 0, build(
        m.DescribeTransactionsRequest, transactional_ids=("tx2",)))
    assert resp.transaction_states[0].error_code is tiaf
    m = mod("describe_producers", 0)
    resp = run(describe_producers, node, 61, 0, build(m.DescribeProducersRequest, topics=(
        build(m.TopicRequest, name="secret", partition_indexes=(0,)),)))
    assert resp.topics[0].partitions[0].error_code is ErrorCode.topic_authorization_failed
    m = mod("add_partitions_to_txn", 4)
    batched = build(m.AddPartitionsToTxnRequest, transactions=(build(
        m.AddPartitionsToTxnTransaction, transactional_id="tx1", producer_id=1,
        producer_epoch=0, verify_only=True, topics=()),))
    assert run(add_partitions_to_txn, node, 24, 4, batched).error_code is \
        ErrorCode.cluster_authorization_failed


def test_describe_topic_partitions_needs_describe(node_factory: Any) -> None:
    """DescribeTopicPartitions (Kafka 4.x's describeTopics): every topic means those that may
    be described; a named one that may not is TOPIC_AUTHORIZATION_FAILED and no partitions,
    as Kafka 4.4 answers the Java client (tests/compat/kafka/test_java_acls.py)."""
    from broker.handlers import describe_topic_partitions
    from broker.security.authorizer import SUPPORTED_OPERATIONS

    node = secured(node_factory)
    grant(node, allow(ALICE, O.READ, R.TOPIC, "orders"))  # READ implies DESCRIBE
    m = importlib.import_module("kio.schema.describe_topic_partitions.v0.request")

    def ask(*names: str) -> Any:
        req = build(m.DescribeTopicPartitionsRequest, topics=tuple(
            build(m.TopicRequest, name=n) for n in names), response_partition_limit=2000,
            cursor=None)
        return run(describe_topic_partitions, node, 75, 0, req)

    assert [(t.name, t.error_code) for t in ask().topics] == [("orders", ErrorCode.none)]
    got = {t.name: t for t in ask("orders", "secret", "missing").topics}
    assert {n: t.error_code for n, t in got.items()} == {
        "orders": ErrorCode.none, "secret": ErrorCode.topic_authorization_failed,
        "missing": ErrorCode.topic_authorization_failed}
    assert got["secret"].partitions == ()
    ops = got["orders"].topic_authorized_operations
    assert ops == (1 << O.READ) | (1 << O.DESCRIBE)
    assert ops & ~sum(1 << int(o) for o in SUPPORTED_OPERATIONS[R.TOPIC]) == 0


def test_controller_listener_config_changes_per_resource(node_factory: Any) -> None:
    """IncrementalAlterConfigs on the controller listener (KIP-919): an operator needs
    ALTER_CONFIGS on each resource (a forwarding broker's CLUSTER_ACTION covers all); the
    refused resources are answered in place, the others reach the handler."""
    node = secured(node_factory)
    grant(node, allow(ALICE, O.ALTER_CONFIGS, R.TOPIC, "orders"))
    seen: list[tuple[str, ...]] = []
    m = importlib.import_module("kio.schema.incremental_alter_configs.v1.request")
    rm = importlib.import_module("kio.schema.incremental_alter_configs.v1.response")

    async def handle(n: Any, ctx: Any, request: Any) -> Any:
        seen.append(tuple(r.resource_name for r in request.resources))
        return build(rm.IncrementalAlterConfigsResponse, throttle_time=datetime.timedelta(0),
                     responses=tuple(build(rm.AlterConfigsResourceResponse,
                                           error_code=ErrorCode.none, error_message=None,
                                           resource_type=r.resource_type,
                                           resource_name=r.resource_name)
                                     for r in request.resources))

    inner = Dispatcher()
    inner.register(44, handle)
    entry = guard_controller_listener(inner).get(44)
    assert entry is not None
    request = build(m.IncrementalAlterConfigsRequest, validate_only=False, resources=tuple(
        build(m.AlterConfigsResource, resource_type=rtype, resource_name=name, configs=())
        for rtype, name in ((2, "secret"), (2, "orders"), (4, ""))))
    answer = asyncio.run(entry.handle(node, ctx_of(44, 1, ALICE), request))
    assert [(r.resource_name, r.error_code) for r in answer.responses] == [
        ("secret", ErrorCode.topic_authorization_failed), ("orders", ErrorCode.none),
        ("", ErrorCode.cluster_authorization_failed)]
    assert roundtrip(answer) == answer
    refused_all = asyncio.run(entry.handle(node, ctx_of(44, 1, "User:intruder"), request))
    assert [r.error_code for r in refused_all.responses] == [
        ErrorCode.topic_authorization_failed, ErrorCode.topic_authorization_failed,
        ErrorCode.cluster_authorization_failed]
    asyncio.run(entry.handle(node, ctx_of(44, 1, "User:admin"), request))  # a super user
    assert seen == [("orders",), ("secret", "orders", "")]
