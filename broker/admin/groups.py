"""GroupService: consumer groups through this node's group coordinator.

Every call about one group is answered by the group's coordinator: the broker that leads the
group's __consumer_offsets partition. Any other node (another broker, or a controller-only
node, which has no coordinator) forwards the call to that broker's admin listener (its ADMIN
endpoint in the broker registration), once: a forwarded call that finds the coordinator
moved answers FAILED_PRECONDITION naming the new one. ListGroups asks every unfenced broker
and merges their listings. Lag is the partition's high watermark minus the committed
offset; the high watermark (and log start, for resets) comes from the partition's leader:
this node's log, or the leader's DescribeTopics (-1 when the leader does not answer).
Resetting to a timestamp asks each partition's leader for the first offset at or after it:
this node's log, or Kafka's ListOffsets (v4) on the leader's inter-broker listener.
Offsets are reset only in a group with no active members (Kafka's rule); a dry run returns
the plan without committing it. Resetting a group that does not exist yet creates it with
those offsets, as kafka-consumer-groups does.

Share groups (KIP-932, with share.version >= 1) are answered from the same coordinator's
share service, as kafka-share-groups sees them: listed with type "share"; described with
their members and each partition's share-partition start offset and lag; reset (earliest,
latest, a timestamp or an offset; Empty groups only) through the share coordinator, as
AlterShareGroupOffsets does; their offsets deleted by whole topic, as
DeleteShareGroupOffsets does; and deleted with their share-partitions' state.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

import grpc
from kio.schema.errors import ErrorCode

from broker.admin.errors import AdminError, S, from_kafka, rpc_errors
from broker.admin.forward import Forwarder, admin_endpoint_of
from broker.admin.pb import groups, groups_grpc, partitions, topics
from broker.admin.services import AdminServices
from broker.coordinator.partitioning import partition_for
from broker.errors import KafkaError
from broker.group.records import OFFSETS_TOPIC
from broker.group.shell import GroupCoordinatorService, service_of
from broker.group.types import CommitPartition, OffsetCommitRequest, TopicPartition
from broker.protocol.transport import ConnectionSecurity
from broker.replication.leader_offsets import list_offsets
from broker.replication.partition import Role
from broker.share.shell import ShareService, share_enabled, share_service_of

MAX_ASSIGNMENT_TOPICS = 100_000
MAX_RESET_PARTITIONS = 100_000
OFFSETS_TOPIC_WAIT_S = 10.0
PEER_TIMEOUT_S = 5.0
_GROUPS = groups.DESCRIPTOR.services_by_name["GroupService"]
_DESCRIBE_TOPICS = topics.DESCRIPTOR.services_by_name["TopicService"] \
    .methods_by_name["DescribeTopics"]
Bounds = dict[tuple[str, int], tuple[int, int]]  # (log start offset, high watermark)


def _need_group(request: Any) -> None:
    if not request.group_id:
        raise AdminError(S.INVALID_ARGUMENT, "a group id is required")


def _status(error: ErrorCode, what: str) -> AdminError:
    if error is ErrorCode.group_id_not_found:
        return AdminError(S.NOT_FOUND, f"no group {what}")
    if error is ErrorCode.non_empty_group:
        return AdminError(S.FAILED_PRECONDITION,
                          f"group {what} has active members; stop its consumers first")
    if error is ErrorCode.group_subscribed_to_topic:
        return AdminError(S.FAILED_PRECONDITION,
                          f"{what}: the group's members are subscribed to that topic")
    if error is ErrorCode.coordinator_load_in_progress:
        return AdminError(S.UNAVAILABLE, f"group {what}: the coordinator is loading; retry")
    return from_kafka(KafkaError(error, f"group {what}"))


def decode_assignment(data: bytes) -> list[tuple[str, int]]:
    """The partitions of a ConsumerProtocolAssignment (any version); [] when unreadable."""
    out: list[tuple[str, int]] = []
    try:
        pos = 2
        n = int.from_bytes(data[pos:pos + 4], "big", signed=True)
        pos += 4
        if n < 0 or n > MAX_ASSIGNMENT_TOPICS or len(data) < pos:
            return []
        for _ in range(n):
            ln = int.from_bytes(data[pos:pos + 2], "big", signed=True)
            pos += 2
            if ln < 0 or pos + ln > len(data):
                return []
            topic = data[pos:pos + ln].decode()
            pos += ln
            k = int.from_bytes(data[pos:pos + 4], "big", signed=True)
            pos += 4
            if k < 0 or pos + 4 * k > len(data):
                return []
            for i in range(k):
                out.append((topic, int.from_bytes(data[pos + 4 * i:pos + 4 * i + 4], "big",
                                                  signed=True)))
            pos += 4 * k
    except (UnicodeDecodeError, ValueError):
        return []
    return out


class GroupService(groups_grpc.GroupServiceServicer):  # type: ignore[misc]
    def __init__(self, node: AdminServices, forwarder: Forwarder | None = None) -> None:
        self.node = node
        self.forwarder = forwarder

    # ---- routing ---------------------------------------------------------------------------

    def _local_coordinator(self) -> bool:
        return self.node.group_coordinator is not None

    def _coordinator_id(self, group_id: str) -> int:
        """The broker leading the group's __consumer_offsets partition (-1: none now); with
        no __consumer_offsets yet, this node if it has a coordinator, else any unfenced
        broker (it creates the topic on the first reset)."""
        image = self.node.metadata
        topic = image.topic(OFFSETS_TOPIC)
        if topic is None or not topic.partitions:
            if self._local_coordinator():
                return int(self.node.node_id)
            alive = [b for b, reg in sorted(image.brokers.items()) if not reg.fenced]
            return alive[0] if alive else -1
        return int(image.leader_of(OFFSETS_TOPIC,
                                   partition_for(group_id, len(topic.partitions))))

    async def _at_coordinator(self, request: Any, context: grpc.aio.ServicerContext,
                              name: str) -> Any | None:
        """The coordinator's answer when it is another broker; None: answer here."""
        if self.forwarder is None or self.forwarder.is_forwarded(context):
            return None
        target = self._coordinator_id(request.group_id)
        if target < 0 or target == self.node.node_id:
            return None
        address = admin_endpoint_of(self.node)(target)
        if address is None:
            if self._local_coordinator():
                return None  # answers FAILED_PRECONDITION naming the coordinator
            raise AdminError(S.UNAVAILABLE, f"group {request.group_id} is coordinated by "
                                            f"broker {target}, whose admin address is unknown "
                                            f"here; ask its admin listener")
        return await self.forwarder.call(address, _GROUPS.methods_by_name[name], request,
                                         context.time_remaining())

    async def _bounds(self, keys: Iterable[tuple[str, int]]) -> Bounds:
        """(log start, high watermark) of each partition from its leader: this node's log,
        or the leader's DescribeTopics; partitions whose leader does not answer are left
        out."""
        out: Bounds = {}
        remote: dict[int, set[str]] = {}
        other_workers: list[tuple[str, int]] = []
        wanted = set(keys)
        router = self.node.replicas.shard_router
        for t, p in wanted:
            part = self.node.replicas.get(t, p)
            if part is not None and part.role is Role.LEADER:
                out[(t, p)] = (int(part.log.log_start_offset), int(part.log.high_watermark))
                continue
            leader = self.node.metadata.leader_of(t, p)
            if leader >= 0 and leader != self.node.node_id:
                remote.setdefault(leader, set()).add(t)
            elif leader == self.node.node_id and router is not None and not router.owns(t, p):
                other_workers.append((t, p))
        if other_workers:
            out.update(await self._other_workers_bounds(sorted(other_workers)))
        address_of = admin_endpoint_of(self.node)

        async def ask(leader: int, names: set[str]) -> None:
            address = address_of(leader)
            if address is None or self.forwarder is None:
                return
            try:
                resp = await self.forwarder.call(
                    address, _DESCRIBE_TOPICS,
                    topics.DescribeTopicsRequest(names=sorted(names)), PEER_TIMEOUT_S)
            except AdminError:
                return
            for t in resp.topics:
                for pd in t.partitions:
                    key = (t.topic.name, pd.partition.partition_id)
                    if key in wanted and pd.HasField("high_watermark") \
                            and pd.partition.leader == leader:
                        out[key] = (pd.log_start_offset, pd.high_watermark)

        await asyncio.gather(*(ask(b, n) for b, n in remote.items()))
        return out

    async def _other_workers_bounds(self, keys: list[tuple[str, int]]) -> Bounds:
        """A broker of several workers (skiff.broker.workers): the partitions this broker
        leads in its other processes, asked of their owners."""
        router = self.node.replicas.shard_router
        assert router is not None
        return {k: (start, hw) for k, (start, hw, _) in
                (await router.partition_offsets(keys)).items()}

    async def _offsets_at(self, keys: list[tuple[str, int]], timestamp_ms: int,
                          bounds: Bounds) -> dict[tuple[str, int], int]:
        """The first offset with a timestamp at or after `timestamp_ms` in each partition
        (its high watermark when there is none), from the partition's leader."""
        out: dict[tuple[str, int], int] = {}
        remote: dict[int, list[tuple[str, int]]] = {}
        for t, p in keys:
            part = self.node.replicas.get(t, p)
            if part is not None and part.role is Role.LEADER:
                _, offset, _ = part.fetch_offset_for_timestamp(timestamp_ms)
                out[(t, p)] = bounds[(t, p)][1] if offset < 0 else offset
            else:
                remote.setdefault(self.node.metadata.leader_of(t, p), []).append((t, p))
        listener = self.node.config.inter_broker_listener_name

        async def ask(leader: int, wanted: list[tuple[str, int]]) -> None:
            reg = self.node.metadata.broker(leader) if leader >= 0 else None
            ep = None if reg is None else reg.endpoint(listener)
            if ep is None:
                t, p = wanted[0]
                raise AdminError(S.UNAVAILABLE, f"{t}-{p}: its leader (broker {leader}) has "
                                                f"no {listener} endpoint known here; retry")
            for (t, p), (error, offset) in (await _list_offsets(
                    ep.host, ep.port, wanted, timestamp_ms,
                    self.node.inter_broker_security)).items():
                if error is not ErrorCode.none:
                    raise _status(error, f"({t}-{p} on broker {leader})")
                out[(t, p)] = bounds[(t, p)][1] if offset < 0 else offset

        await asyncio.gather(*(ask(b, w) for b, w in remote.items()))
        return out

    # ---- helpers -------------------------------------------------------------------------

    def _service(self) -> GroupCoordinatorService:
        return service_of(self.node)

    def _share_group(self, group_id: str) -> ShareService | None:
        """This node's share service when `group_id` is a share group it coordinates."""
        if not self._local_coordinator() or not share_enabled(self.node):
            return None
        share = share_service_of(self.node)
        if group_id not in share.groups.groups:
            return None
        try:
            share.coordinated(group_id)
        except KafkaError:
            return None
        return share

    def _share_listed(self, states: Iterable[str]) -> list[Any]:
        if not share_enabled(self.node):
            return []
        wanted = {s.lower() for s in states}
        return [groups.GroupListing(group_id=gid, state=state, protocol_type="share",
                                    type="share")
                for gid, state in share_service_of(self.node).listed()
                if not wanted or state.lower() in wanted]

    def _coordinated_here(self, svc: GroupCoordinatorService, group_id: str) -> None:
        """Raise unless this node's coordinator for `group_id` is loaded."""
        try:
            svc.coordinator_for(group_id)
        except KafkaError as exc:
            p = svc.partition_of(group_id)
            if exc.error_code is ErrorCode.coordinator_load_in_progress:
                raise AdminError(S.UNAVAILABLE, f"group {group_id}: {OFFSETS_TOPIC}-{p} is "
                                                "loading on this node; retry") from None
            if self.node.metadata.topic(OFFSETS_TOPIC) is None:
                raise AdminError(S.NOT_FOUND, f"no group {group_id} (no group has "
                                              "committed offsets yet)") from None
            leader = self.node.metadata.leader_of(OFFSETS_TOPIC, p)
            if leader == self.node.node_id:
                raise AdminError(S.UNAVAILABLE, f"group {group_id}: {OFFSETS_TOPIC}-{p} is "
                                                "loading on this node; retry") from None
            who = f"broker {leader}" if leader >= 0 else "no broker (it has no leader now)"
            raise AdminError(S.FAILED_PRECONDITION,
                             f"group {group_id} is coordinated by {who}, which leads "
                             f"{OFFSETS_TOPIC}-{p}; use that broker's admin listener") from None

    async def _create_offsets_topic(self, svc: GroupCoordinatorService, group_id: str) -> None:
        """The first group of the cluster: create __consumer_offsets and wait (bounded) until
        this node has loaded the group's partition."""
        error = await svc.ensure_offsets_topic()
        if error is not ErrorCode.none:
            raise _status(error, group_id)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + OFFSETS_TOPIC_WAIT_S
        while loop.time() < deadline:
            try:
                svc.coordinator_for(group_id)
                return
            except KafkaError:
                await asyncio.sleep(0.02)
        raise AdminError(S.UNAVAILABLE, f"{OFFSETS_TOPIC} was created but is not loaded yet; "
                                        "retry")

    def _led_log(self, topic: str, partition: int) -> Any:
        part = self.node.replicas.get(topic, partition)
        if part is None or part.role is not Role.LEADER:
            leader = self.node.metadata.leader_of(topic, partition)
            raise AdminError(S.FAILED_PRECONDITION,
                             f"{topic}-{partition}: broker {leader} leads it, not node "
                             f"{self.node.node_id}; reset offsets through its admin listener")
        return part.log

    def _members(self, svc: GroupCoordinatorService, group_id: str,
                 ) -> tuple[str, str, str, list[Any], dict[tuple[str, int], str]] | None:
        """(state, protocol type, assignor, members, owner of each partition), None if none."""
        owner: dict[tuple[str, int], str] = {}
        members = []
        error, cdesc = svc.consumer_group_describe(group_id)
        if error is ErrorCode.none and cdesc is not None:
            for m in cdesc.members:
                tps = [(name, p) for _, name, ps in m.assignment for p in ps]
                for tp in tps:
                    owner[tp] = m.member_id
                members.append(groups.GroupMember(
                    member_id=m.member_id, group_instance_id=m.instance_id,
                    client_id=m.client_id, host=m.client_host,
                    assignment=[_tp(t, p) for t, p in tps]))
            return cdesc.state, "consumer", cdesc.assignor_name, members, owner
        error, sdesc = svc.streams_group_describe(group_id)
        if error is ErrorCode.none and sdesc is not None:
            # a streams member's partitions: its active tasks' source and repartition topics
            sources = {s.subtopology_id: [*s.source_topics,
                                          *(r.name for r in s.repartition_source_topics)]
                       for s in (sdesc.topology.subtopologies if sdesc.topology else ())}
            for sm in sdesc.members:
                tps = sorted({(t, p) for sub, p in sm.assignment.active
                              for t in sources.get(sub, ())})
                for tp in tps:
                    owner[tp] = sm.member_id
                members.append(groups.GroupMember(
                    member_id=sm.member_id, group_instance_id=sm.instance_id,
                    client_id=sm.client_id, host=sm.client_host,
                    assignment=[_tp(t, p) for t, p in tps]))
            return sdesc.state, "streams", "", members, owner
        error, desc = svc.describe_group(group_id)
        if error is not ErrorCode.none:
            raise _status(error, group_id)
        if desc is None:
            return None
        for dm in desc.members:
            tps = decode_assignment(dm.assignment) if desc.protocol_type == "consumer" else []
            for tp in tps:
                owner[tp] = dm.member_id
            members.append(groups.GroupMember(
                member_id=dm.member_id, group_instance_id=dm.group_instance_id,
                client_id=dm.client_id, host=dm.client_host,
                assignment=[_tp(t, p) for t, p in tps]))
        return desc.state, desc.protocol_type, desc.protocol_data, members, owner

    def _committed(self, svc: GroupCoordinatorService, group_id: str,
                   ) -> dict[tuple[str, int], tuple[int, str]]:
        result = svc.fetch_offsets(group_id, None)
        if result.error is not ErrorCode.none:
            raise _status(result.error, group_id)
        return {(f.topic, f.partition): (f.offset, f.metadata) for f in result.partitions
                if f.offset >= 0}

    # ---- RPCs ------------------------------------------------------------------------------

    @rpc_errors
    async def ListGroups(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        found: dict[str, Any] = {}
        if self._local_coordinator():
            error, listed = self._service().list_groups(list(request.states))
            if error is not ErrorCode.none:
                raise _status(error, "listing")
            for g in listed:
                found[g.group_id] = groups.GroupListing(
                    group_id=g.group_id, state=g.state, protocol_type=g.protocol_type,
                    type=g.group_type)
            for listing in self._share_listed(request.states):
                found.setdefault(listing.group_id, listing)
        elif self.forwarder is None or self.forwarder.is_forwarded(context):
            raise AdminError(S.UNAVAILABLE, f"node {self.node.node_id} has no group "
                                            "coordinator (not a broker); ask a broker")
        if self.forwarder is not None and not self.forwarder.is_forwarded(context):
            address_of = admin_endpoint_of(self.node)
            peers = [b for b, reg in sorted(self.node.metadata.brokers.items())
                     if not reg.fenced and b != self.node.node_id]
            if not peers and not self._local_coordinator():
                raise AdminError(S.UNAVAILABLE, f"node {self.node.node_id} has no group "
                                                "coordinator and no unfenced broker is known "
                                                "to ask; retry")
            method = _GROUPS.methods_by_name["ListGroups"]

            async def ask(broker: int) -> list[Any]:
                address = address_of(broker)
                if address is None:
                    raise AdminError(S.UNAVAILABLE, f"broker {broker}'s admin address is "
                                                    "unknown here; the listing would be "
                                                    "partial")
                try:
                    resp = await self.forwarder.call(  # type: ignore[union-attr]
                        address, method, request, min(PEER_TIMEOUT_S,
                                                      context.time_remaining() or 1e9))
                except AdminError as exc:
                    raise AdminError(exc.code, f"broker {broker} did not list its groups "
                                                 f"({exc}); the listing would be partial"
                                     ) from None
                return list(resp.groups)

            for listing in await asyncio.gather(*(ask(b) for b in peers)):
                for g in listing:
                    found.setdefault(g.group_id, g)
        return groups.ListGroupsResponse(groups=[found[k] for k in sorted(found)])

    @rpc_errors
    async def DescribeGroup(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        _need_group(request)
        remote = await self._at_coordinator(request, context, "DescribeGroup")
        if remote is not None:
            return remote
        gid = request.group_id
        svc = self._service()
        self._coordinated_here(svc, gid)
        share = self._share_group(gid)
        if share is not None:
            return await self._describe_share_group(share, gid)
        described = self._members(svc, gid)
        committed = self._committed(svc, gid)
        if described is None and not committed:
            raise AdminError(S.NOT_FOUND, f"no group {gid}")
        state, ptype, assignor, members, owner = described or ("Empty", "", "", [], {})
        group_type = "consumer" if svc.consumer_group_describe(gid)[1] is not None \
            else "streams" if ptype == "streams" else "classic"
        offsets = []
        keys = sorted(set(committed) | set(owner))
        bounds = await self._bounds(keys)
        for t, p in keys:
            off, meta = committed.get((t, p), (-1, ""))
            hw = bounds.get((t, p), (-1, -1))[1]
            lag = max(hw - off, 0) if hw >= 0 and off >= 0 else -1
            offsets.append(groups.PartitionOffset(
                topic=t, partition=p, committed_offset=off, log_end_offset=hw, lag=lag,
                metadata=meta, member_id=owner.get((t, p), "")))
        return groups.DescribeGroupResponse(
            group_id=gid, state=state, protocol_type=ptype, protocol=assignor,
            coordinator_id=self.node.node_id, members=members, offsets=offsets,
            type=group_type)

    async def _describe_share_group(self, share: ShareService, gid: str) -> Any:
        error, desc, message = share.describe(gid)
        if error is not ErrorCode.none or desc is None:
            raise _status(error, f"{gid} ({message})" if message else gid)
        members = [groups.GroupMember(
            member_id=m.member_id, client_id=m.client_id, host=m.client_host,
            assignment=[_tp(name, p) for _, name, ps in m.assignment for p in ps])
            for m in desc.members]
        try:
            described = await share.describe_offsets(gid, None)
        except KafkaError as exc:
            raise _status(exc.error_code, gid) from None
        keys = [(t.name, p.partition) for t in described for p in t.partitions]
        bounds = await self._bounds(keys)
        offsets = [groups.PartitionOffset(
            topic=t.name, partition=p.partition, committed_offset=p.start_offset,
            log_end_offset=bounds.get((t.name, p.partition), (-1, -1))[1], lag=p.lag)
            for t in described for p in sorted(t.partitions, key=lambda x: x.partition)]
        return groups.DescribeGroupResponse(
            group_id=gid, state=desc.state, protocol_type="share",
            protocol=desc.assignor_name, coordinator_id=self.node.node_id, members=members,
            offsets=sorted(offsets, key=lambda o: (o.topic, o.partition)), type="share")

    @rpc_errors
    async def ResetOffsets(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        _need_group(request)
        remote = await self._at_coordinator(request, context, "ResetOffsets")
        if remote is not None:
            return remote
        st = request.strategy
        if st == groups.RESET_STRATEGY_UNSPECIFIED or st not in groups.ResetStrategy.values():
            raise AdminError(S.INVALID_ARGUMENT, "choose a reset strategy: earliest, latest, "
                                                 "timestamp, offset or shift")
        if not request.topics and not request.partitions:
            raise AdminError(S.INVALID_ARGUMENT, "name the topics or partitions to reset")
        if st == groups.RESET_STRATEGY_OFFSET and request.value < 0:
            raise AdminError(S.INVALID_ARGUMENT, f"offset {request.value} is negative")
        if st == groups.RESET_STRATEGY_TIMESTAMP and request.value < 0:
            raise AdminError(S.INVALID_ARGUMENT, f"timestamp {request.value} is negative")
        gid = request.group_id
        image = self.node.metadata
        wanted: list[tuple[str, int]] = []
        for name in request.topics:
            topic = image.topic(name)
            if topic is None:
                raise AdminError(S.NOT_FOUND, f"no topic {name}")
            wanted += [(name, p) for p in sorted(topic.partitions)]
        for tp in request.partitions:
            if image.partition(tp.topic, tp.partition) is None:
                raise AdminError(S.NOT_FOUND, f"no partition {tp.topic}-{tp.partition}")
            wanted.append((tp.topic, tp.partition))
        wanted = sorted(set(wanted))
        if len(wanted) > MAX_RESET_PARTITIONS:
            raise AdminError(S.INVALID_ARGUMENT, f"{len(wanted)} partitions; at most "
                                                 f"{MAX_RESET_PARTITIONS} per call")
        svc = self._service()
        if image.topic(OFFSETS_TOPIC) is None:
            await self._create_offsets_topic(svc, gid)
        self._coordinated_here(svc, gid)
        share = self._share_group(gid)
        if share is not None:
            return await self._reset_share_group(share, gid, request, wanted)
        described = self._members(svc, gid)
        if described is not None and (described[3] or described[0] != "Empty"):
            raise AdminError(S.FAILED_PRECONDITION,
                             f"group {gid} is {described[0]} with {len(described[3])} active "
                             "member(s); offsets can be reset only when it is Empty: stop "
                             "its consumers first")
        committed = self._committed(svc, gid)
        plan, bounds = await self._reset_plan(gid, request, wanted, committed)
        if not request.dry_run:
            result = await svc.commit_offsets(OffsetCommitRequest(
                group_id=gid, generation_id=-1, member_id="", group_instance_id=None,
                partitions=tuple(CommitPartition(t, p, off) for t, p, off in plan)))
            for (t, p), error in result.partitions:
                if error is not ErrorCode.none:
                    raise _status(error, f"{gid} ({t}-{p})")
        return _reset_response(plan, bounds, applied=not request.dry_run)

    async def _reset_plan(self, gid: str, request: Any, wanted: list[tuple[str, int]],
                          committed: dict[tuple[str, int], tuple[int, str]],
                          ) -> tuple[list[tuple[str, int, int]], Bounds]:
        """Each partition's new offset for the request's strategy, from the partitions'
        leaders, clamped to [log start, high watermark]; with the bounds it was made from."""
        st = request.strategy
        bounds = await self._bounds(wanted)
        for t, p in wanted:
            if (t, p) not in bounds:
                self._led_log(t, p)  # raises naming the leader when it is not this node
        at = (await self._offsets_at(wanted, request.value, bounds)
              if st == groups.RESET_STRATEGY_TIMESTAMP else {})
        plan: list[tuple[str, int, int]] = []
        for t, p in wanted:
            start, hw = bounds[(t, p)]
            if st == groups.RESET_STRATEGY_EARLIEST:
                new = start
            elif st == groups.RESET_STRATEGY_LATEST:
                new = hw
            elif st == groups.RESET_STRATEGY_TIMESTAMP:
                new = at[(t, p)]
            elif st == groups.RESET_STRATEGY_OFFSET:
                new = request.value
            else:
                current = committed.get((t, p))
                if current is None:
                    raise AdminError(S.FAILED_PRECONDITION,
                                     f"group {gid} has no committed offset for {t}-{p} to "
                                     "shift; use another strategy")
                new = current[0] + request.value
            plan.append((t, p, min(max(new, start), hw)))
        return plan, bounds

    async def _reset_share_group(self, share: ShareService, gid: str, request: Any,
                                 wanted: list[tuple[str, int]]) -> Any:
        """A share group's start offsets, as kafka-share-groups --reset-offsets sets them:
        the plan from the partitions' leaders, applied through the share coordinator
        (AlterShareGroupOffsets' path) unless a dry run."""
        st = request.strategy
        if st == groups.RESET_STRATEGY_SHIFT:
            raise AdminError(S.INVALID_ARGUMENT,
                             f"group {gid} is a share group: its start offsets can be reset "
                             "to the earliest, the latest, a timestamp or an offset, not "
                             "shifted (kafka-share-groups has no --shift-by)")
        error, desc, _ = share.describe(gid)
        if error is ErrorCode.none and desc is not None and desc.members:
            raise AdminError(S.FAILED_PRECONDITION,
                             f"share group {gid} is {desc.state} with {len(desc.members)} "
                             "active member(s); offsets can be reset only when it is Empty: "
                             "stop its consumers first")
        plan, bounds = await self._reset_plan(gid, request, wanted, {})
        if not request.dry_run:
            by_topic: dict[str, list[tuple[int, int]]] = {}
            for t, p, off in plan:
                by_topic.setdefault(t, []).append((p, off))
            try:
                altered = await share.alter_offsets(gid, list(by_topic.items()))
            except KafkaError as exc:
                raise _status(exc.error_code, gid) from None
            for topic in altered:
                for p, perr, _message in topic.partitions:
                    if perr is not ErrorCode.none:
                        raise _status(perr, f"{gid} ({topic.name}-{p})")
        return _reset_response(plan, bounds, applied=not request.dry_run)

    @rpc_errors
    async def DeleteOffsets(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        _need_group(request)
        remote = await self._at_coordinator(request, context, "DeleteOffsets")
        if remote is not None:
            return remote
        if not request.partitions and not request.topics:
            raise AdminError(S.INVALID_ARGUMENT, "name the topics or partitions whose offsets "
                                                 "to delete")
        gid = request.group_id
        svc = self._service()
        self._coordinated_here(svc, gid)
        share = self._share_group(gid)
        if share is not None:
            return await self._delete_share_offsets(share, gid, request)
        parts: list[TopicPartition] = [(tp.topic, tp.partition) for tp in request.partitions]
        for name in request.topics:
            topic = self.node.metadata.topic(name)
            if topic is None:
                raise AdminError(S.NOT_FOUND, f"no topic {name}")
            parts += [(name, p) for p in sorted(topic.partitions)]
        result = await svc.delete_offsets(gid, parts)
        if result.error is not ErrorCode.none:
            raise _status(result.error, gid)
        for (t, p), error in result.partitions:
            if error is not ErrorCode.none:
                raise _status(error, f"{gid} ({t}-{p})")
        return groups.DeleteOffsetsResponse()

    async def _delete_share_offsets(self, share: ShareService, gid: str, request: Any) -> Any:
        if request.partitions:
            raise AdminError(S.INVALID_ARGUMENT,
                             f"group {gid} is a share group: its offsets are deleted by whole "
                             "topic (DeleteShareGroupOffsets); name topics, not partitions")
        try:
            deleted = await share.delete_offsets(gid, list(dict.fromkeys(request.topics)))
        except KafkaError as exc:
            raise _status(exc.error_code, gid) from None
        for name, _tid, error, message in deleted:
            if error is not ErrorCode.none:
                raise _status(error, f"{gid} ({name}: {message})" if message
                              else f"{gid} ({name})")
        return groups.DeleteOffsetsResponse()

    @rpc_errors
    async def DeleteGroup(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        _need_group(request)
        remote = await self._at_coordinator(request, context, "DeleteGroup")
        if remote is not None:
            return remote
        gid = request.group_id
        svc = self._service()
        self._coordinated_here(svc, gid)
        share = self._share_group(gid)
        if share is not None:
            deleted = await share.delete_group(gid)
            error = ErrorCode.group_id_not_found if deleted is None else deleted
            if error is not ErrorCode.none:
                raise _status(error, gid)
            return groups.DeleteGroupResponse()
        error = (await svc.delete_groups([gid])).get(gid, ErrorCode.not_coordinator)
        if error is not ErrorCode.none:
            raise _status(error, gid)
        return groups.DeleteGroupResponse()


async def _list_offsets(host: str, port: int, keys: list[tuple[str, int]], timestamp_ms: int,
                        security: ConnectionSecurity | None = None,
                        ) -> dict[tuple[str, int], tuple[ErrorCode, int]]:
    """Kafka's ListOffsets v4 for `keys` at `timestamp_ms`: (error, offset) per partition."""
    try:
        out = await list_offsets(host, port, keys, timestamp_ms, security, PEER_TIMEOUT_S)
    except (OSError, TimeoutError) as exc:
        raise AdminError(S.UNAVAILABLE, f"ListOffsets to {host}:{port} failed: {exc!r}; "
                                        "retry") from None
    missing = [k for k in keys if k not in out]
    if missing:
        raise AdminError(S.UNAVAILABLE, f"ListOffsets to {host}:{port} did not answer for "
                                        f"{missing[0][0]}-{missing[0][1]}; retry")
    return out


def _reset_response(plan: list[tuple[str, int, int]], bounds: Bounds, *, applied: bool) -> Any:
    return groups.ResetOffsetsResponse(applied=applied, offsets=[
        groups.PartitionOffset(topic=t, partition=p, committed_offset=off,
                               log_end_offset=bounds[(t, p)][1],
                               lag=max(bounds[(t, p)][1] - off, 0))
        for t, p, off in plan])


def _tp(topic: str, partition: int) -> Any:
    return partitions.TopicPartition(topic=topic, partition=partition)
