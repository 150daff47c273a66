"""Differences between Apache Kafka 4.4's answers and Skiff's that the differential harness
(test_differential.py) accepts, each with its reason. Anything not listed fails the test.

`Accepted(api, path, reason, versions=None, scenario=None)`: `path` is a glob on the field
path (`*` matches anything, brackets are literal: `results[*].configs[*].config_source`);
`api` "*" is any API. `NOT_SCRIPTED` names the APIs Skiff serves that no script sends yet.
docs/compatibility.md ("Differential harness: Skiff against Kafka 4.4") lists the same.
"""

from __future__ import annotations

from tests.support.differential import Accepted

NOT_SCRIPTED: dict[str, str] = {
    **{name: "not scripted: the shared reference node's PLAINTEXT listener refuses it with "
             "-1 timestamps (as Kafka writes them), which kio's datetime reader cannot decode; "
             "tests/compat/kafka/test_tools_tokens.py runs it with kafka-delegation-tokens "
             "against Kafka 4.4 on a SCRAM listener"
       for name in ("create_delegation_token", "renew_delegation_token",
                    "expire_delegation_token")},
    "write_txn_markers": "not scripted yet: an inter-broker request (the transaction "
                         "coordinator's); a script needs an open transaction's producer on "
                         "both brokers and Kafka requires CLUSTER_ACTION on the caller",
    "get_telemetry_subscriptions": "not scripted yet: Kafka 4.4 does not advertise it without a "
                                   "ClientTelemetry metrics reporter configured",
    "push_telemetry": "not scripted yet: Kafka 4.4 does not advertise it without a "
                      "ClientTelemetry metrics reporter configured",
    "add_raft_voter": "not scripted: skiff_node's quorum is static (kraft.version 0), the "
                      "reference's dynamic, so they answer differently by design; "
                      "test_tools_quorum_voters.py runs kafka-metadata-quorum add-controller "
                      "side by side against a Kafka 4.4 and a Skiff dynamic quorum of the same "
                      "shape, through a broker and the controllers, and test_tools_quorum.py "
                      "its refusals side by side with the reference",
    "remove_raft_voter": "not scripted: as add_raft_voter (kafka-metadata-quorum "
                         "remove-controller in test_tools_quorum_voters.py and "
                         "test_tools_quorum.py)",
    **{name: "not scripted per version: a share consumer's requests depend on each other "
             "(member ids, epochs, acquired offsets); "
             "test_differential.py::test_share_group_sequence sends it in a scripted share "
             "consumer's life against a share-enabled Skiff node of its own and Kafka 4.4"
       for name in ("share_group_heartbeat", "share_group_describe", "share_fetch",
                    "share_acknowledge")},
    **{name: "not scripted per version: a streams member's requests depend on each other "
             "(member ids, epochs, topology); "
             "tests/compat/kafka/test_streams_groups.py runs Kafka Streams 4.4 with "
             "group.protocol=streams and kafka-streams-groups --describe against a Skiff "
             "cluster formatted at 4.4 and Kafka 4.4, and test_streams_group_topology_"
             "description.py the v1 exchanges and StreamsGroupTopologyDescriptionUpdate "
             "(KIP-1331), with and without Kafka's in-memory topology description plugin"
       for name in ("streams_group_heartbeat", "streams_group_describe",
                    "streams_group_topology_description_update")},
    **{name: "not scripted per version: they need a share group with offsets; "
             "tests/compat/kafka/test_tools_share_groups.py runs kafka-share-groups "
             "(--describe, --reset-offsets, --delete-offsets) against Kafka 4.4 and Skiff"
       for name in ("describe_share_group_offsets", "alter_share_group_offsets",
                    "delete_share_group_offsets")},
    **{name: "not scripted yet: an inter-broker request of the share coordinator's (KIP-932) "
             "that Kafka requires CLUSTER_ACTION for, sent by share-partition leaders with "
             "epochs a script would have to fake; tests/unit/handlers/test_<api>.py and the "
             "restart cases of tests/compat/kafka/test_java_share_groups.py cover it"
       for name in ("initialize_share_group_state", "read_share_group_state",
                    "write_share_group_state", "delete_share_group_state",
                    "read_share_group_state_summary")},
}

# Error paths not scripted yet, with why.
UNSCRIPTED_ERROR_PATHS: dict[str, str] = {
    "unauthorized": "not scripted yet: the shared reference node (kafka_ref) runs without an "
                    "authorizer, and a second, secured Kafka node would add a JVM start to CI; "
                    "tests/compat/test_security_acls.py covers Skiff's authorizer with real "
                    "clients",
}

# ---------------------------------------------------------------------------- ApiVersions

_NOT_IN_SKIFF = {
    17: "SaslHandshake: Skiff advertises it only on SASL listeners",
    36: "SaslAuthenticate: Skiff advertises it only on SASL listeners",
    94: "an API newer than kio 0.6.5's schemas (the newest on PyPI)",
}
# Skiff's max differs from Kafka 4.4's. (ApiVersions v5, TxnOffsetCommit v6, DeleteGroups v3,
# StreamsGroupHeartbeat/Describe v1 and StreamsGroupTopologyDescriptionUpdate, not in kio 0.6.5,
# are served from classes generated by broker/protocol/kio_next_gen.py.)
_LAGGING = {22: "InitProducerId v6 (KIP-939 two-phase commit): Skiff advertises it, Kafka 4.4 "
                "does not (transaction.two.phase.commit.enable is off by default)"}

_API_VERSIONS: list[Accepted] = [
    Accepted("api_versions", "api_keys[api_key=*].min_version",
             "Skiff serves Kafka 3.9's floors by default (skiff.min.api.versions=kafka3, for "
             "old clients); Kafka 4 dropped them (KIP-896)"),
    *[Accepted("api_versions", f"api_keys[api_key={k}] (missing in Skiff)", why)
      for k, why in _NOT_IN_SKIFF.items()],
    *[Accepted("api_versions", f"api_keys[api_key={k}].max_version", why)
      for k, why in _LAGGING.items()],
    *[Accepted("api_versions", f"api_keys[api_key={k}] (only in Skiff)",
               "client telemetry (KIP-714): Kafka 4.4 advertises it only with a "
               "ClientTelemetry metrics reporter configured") for k in (71, 72)],
    Accepted("api_versions", "supported_features[name=metadata.version].*",
             "Skiff's metadata.version range is 3.9-IV0..4.4-IV2 (21-33), Kafka 4.4's 7-33"),
    *[Accepted("api_versions", f"{part}[name={f}] (missing in Skiff)",
               f"{f}: a feature Skiff does not implement (eligible leader replicas)")
      for part in ("supported_features", "finalized_features")
      for f in ("eligible.leader.replicas.version",)],
    Accepted("api_versions", "finalized_features[name=kraft.version] (missing in Skiff)",
             "skiff dev starts a static quorum (controller.quorum.voters, kraft.version 0, "
             "which is not listed); the reference is formatted --standalone (kraft.version 1)"),
]

# ----------------------------------------------------------------------- DescribeConfigs

_BROKER_ONLY_IN_KAFKA = {
    "share groups: dead-letter queues, assignor, persister and share coordinator tuning "
    "settings (not implemented; Skiff serves the group.share.* settings its share groups read "
    "and the share.coordinator.* ones its share coordinator reads)": (
        "group.share.*", "share.coordinator.*", "share.fetch.purgatory.purge.interval.requests"),
    "tiered storage (not implemented)": ("remote.*", "log.remote.*", "log.local.retention.*",
                                         "follower.fetch.last.tiered.offset.enable"),
    "SASL mechanisms and login plugins Skiff does not have (GSSAPI/Kerberos, OAUTHBEARER's "
    "login side and pluggable JWT validators/retrievers, client callback handlers)": (
        "sasl.kerberos.*", "sasl.oauthbearer.*", "sasl.login.*",
        "sasl.client.callback.handler.class", "sasl.jaas.config",
        "sasl.server.max.receive.size"),
    "Java plugin classes and JVM-specific tuning with no Skiff counterpart": (
        "alter.config.policy.class.name", "create.topic.policy.class.name",
        "client.quota.callback.class", "config.providers", "kafka.metrics.*",
        "metric.reporters", "metrics.num.samples", "metrics.recording.level",
        "metrics.sample.window.ms", "replica.selector.class",
        "security.providers", "ssl.engine.factory.class", "ssl.keymanager.algorithm",
        "ssl.provider", "ssl.secure.random.implementation", "ssl.trustmanager.algorithm",
        "ssl.allow.dn.changes", "ssl.allow.san.changes", "background.threads",
        "group.coordinator.threads", "group.coordinator.background.threads",
        "num.replica.alter.log.dirs.threads", "queued.max.request.bytes",
        "replica.socket.receive.buffer.bytes", "log.cleaner.dedupe.buffer.size",
        "log.cleaner.io.buffer.load.factor", "log.cleaner.io.buffer.size",
        "offsets.load.buffer.size", "transaction.state.log.load.buffer.size",
        "*.purgatory.purge.interval.requests", "group.coordinator.cached.buffer.max.bytes",
        "group.coordinator.append.linger.ms", "socket.connection.setup.timeout.*"),
    "not implemented yet (a Skiff gap)": (
        "add.partitions.to.txn.retry.backoff.*", "alter.log.dirs.replication.quota.window.*",
        "replication.quota.window.*", "broker.id", "connection.failed.authentication.delay.ms",
        "controller.quorum.auto.join.enable", "controller.quorum.fetch.max.bytes",
        "early.start.listeners",
        "log.cleaner.io.max.bytes.per.second", "log.dir.failure.timeout.ms",
        "log.flush.start.offset.checkpoint.interval.ms", "max.decompressed.message.bytes",
        "offsets.topic.compression.codec", "transaction.two.phase.commit.enable",
        "group.consumer.*", "group.coordinator.rebalance.protocols"),
}
_TOPIC_ONLY_IN_KAFKA = {
    "tiered storage (not implemented)": ("local.retention.*", "remote.*"),
    "not implemented yet (a Skiff gap)": ("max.decompressed.message.bytes",),
}
_ONLY_IN_SKIFF = {
    "Skiff's own settings (admin plane, metrics listener, logging, page-cache drop-behind, "
    "old-client floors, worker processes, shutdown)": (
        "admin.*", "metrics.listeners", "log.format", "log.level", "log.drop.behind.bytes",
        "drop.behind.bytes", "skiff.min.api.versions", "skiff.broker.workers",
        "broker.session.disconnect.timeout.ms",
        "controlled.shutdown.timeout.ms", "client.telemetry.*"),
    "StandardAuthorizer settings Kafka 4.4 lists only when an authorizer is configured": (
        "allow.everyone.if.no.acl.found", "super.users"),
    "removed in Kafka 4.0; Skiff keeps them while it serves Kafka 3.9's API versions": (
        "log.message.downconversion.enable", "message.downconversion.enable",
        "leader.imbalance.per.broker.percentage"),
}

_CONFIG_PATHS = ("results[resource_name=*].configs[name={}] (missing in Skiff)",
                 "topics[name=*].configs[name={}] (missing in Skiff)")
_ONLY_PATHS = ("results[resource_name=*].configs[name={}] (only in Skiff)",
               "topics[name=*].configs[name={}] (only in Skiff)")


def _names(groups: dict[str, tuple[str, ...]], paths: tuple[str, ...],
           scenario: str | None = None) -> list[Accepted]:
    return [Accepted(api, path.format(name), why, scenario=scenario)
            for why, names in groups.items() for name in names for path in paths
            for api in ("describe_configs", "create_topics")]


_READ_ONLY = {
    "Kafka updates it per broker at run time; Skiff reads it at start only": (
        "listeners", "listener.security.protocol.map", "log.cleaner.backoff.ms",
        "num.recovery.threads.per.data.dir", "producer.id.expiration.ms",
        "sasl.enabled.mechanisms", "sasl.mechanism.inter.broker.protocol", "ssl.*",
        "principal.builder.class", "num.network.threads",
        "transaction.partition.verification.enable", "group.consumer.assignment.interval.ms",
        "group.share.assignment.interval.ms", "group.streams.assignment.interval.ms"),
    "Skiff applies it at run time (an AlterConfigs extension); Kafka only at start": (
        "log.flush.scheduler.interval.ms", "log.retention.check.interval.ms",
        "log.retention.hours", "log.retention.minutes", "log.roll.hours",
        "log.roll.jitter.hours"),
}

_FIXTURE = ("the two nodes are set up differently: Kafka from a server.properties file "
            "(a standalone KRaft quorum through controller.quorum.bootstrap.servers), "
            "skiff dev from its command line (a static controller.quorum.voters and its own "
            "metadata.log.dir); paths and ports differ")

_CONFIGS: list[Accepted] = [
    *_names(_BROKER_ONLY_IN_KAFKA, _CONFIG_PATHS[:1], "broker configs*"),
    *_names(_TOPIC_ONLY_IN_KAFKA, _CONFIG_PATHS),
    *_names(_ONLY_IN_SKIFF, _ONLY_PATHS),
    *[Accepted("describe_configs", f"results[*].configs[name={name}].read_only", why)
      for why, names in _READ_ONLY.items() for name in names],
    *[Accepted("describe_configs", f"results[*].configs[name={name}]*", _FIXTURE)
      for name in ("listeners", "advertised.listeners", "log.dirs", "metadata.log.dir",
                   "controller.quorum.voters", "controller.quorum.bootstrap.servers")],
    *[Accepted(api, f"{part}.configs[name=min.insync.replicas]*",
               "Kafka 4.4's storage format writes min.insync.replicas=1 as a cluster-level "
               "dynamic default (eligible leader replicas, KIP-966); Skiff has no such record")
      for api, part in (("describe_configs", "results[*]"), ("create_topics", "topics[*]"))],
    *[Accepted(api, f"{part}.configs[name={name}]*",
               "Skiff preallocates segment files by default (docs/configuration.md lists it "
               "among the defaults that differ from Kafka's on purpose)")
      for api, part in (("describe_configs", "results[*]"), ("create_topics", "topics[*]"))
      for name in ("preallocate", "log.preallocate")],
]

# ----------------------------------------------------------------------------- the rest

_OTHER: list[Accepted] = [
    Accepted("describe_quorum", "nodes (length)",
             "skiff dev runs a static quorum (kraft.version 0) whose voters Skiff keeps "
             "without endpoints, so DescribeQuorum v2 lists no nodes; the reference runs a "
             "dynamic quorum (formatted --standalone) and lists its voter's endpoint. Whether "
             "Kafka lists nodes for a static quorum was not checked", versions=(2,)),
    Accepted("consumer_group_describe", "groups[*].group_epoch",
             "described right after the first heartbeat, Kafka 4.4's group was at epoch 2 "
             "with nothing assigned yet, Skiff's at epoch 1 with the partition assigned in "
             "that first heartbeat", scenario="consumer_group_describe"),
    Accepted("consumer_group_describe", "groups[*].assignment_epoch",
             "as group_epoch: Skiff assigns in the first heartbeat, Kafka one epoch later",
             scenario="consumer_group_describe"),
    Accepted("consumer_group_describe", "groups[*].members[*].*assignment.topic_partitions",
             "Skiff assigns the partitions in the member's first heartbeat; Kafka 4.4 in a "
             "later one (the describe comes before it)"),
    Accepted("consumer_group_heartbeat", "assignment*",
             "Skiff assigns the partitions in the member's first heartbeat; Kafka 4.4 does "
             "when it has resolved the subscribed topic by then, else in a later one "
             "(timing-dependent on Kafka's side)"),
    *(Accepted("share_group_describe", f"groups[*].{field}",
               "Kafka 4.4 assigns a share group only the partitions whose share state the "
               "share coordinator has initialized, and bumps the group epoch when metadata "
               "resolves and again when initialization completes (epoch 3 by the time the "
               "member holds its partition); Skiff assigns at once (epoch 1), and the "
               "partition's leader initializes the state on the first ShareFetch. The member's "
               "assignment, deliveries and acknowledgements are the same",
               scenario="share group sequence")
      for field in ("group_epoch", "assignment_epoch")),
    Accepted("produce", "responses[*].partition_responses[*].log_append_time (set?)",
             "Kafka 4.4 answers a duplicate batch with the original batch's timestamp in "
             "log_append_time even on a CreateTime topic; Skiff answers -1",
             scenario="out of order sequence*"),
]

_GROUP_CONFIGS: list[Accepted] = []

ACCEPTED: list[Accepted] = [*_API_VERSIONS, *_CONFIGS, *_GROUP_CONFIGS, *_OTHER]
